// Package jobs runs Switchboard's periodic jobs on a gocron v2 scheduler and
// makes every job run once per tick across all replicas.
//
// # Ticks and slots
//
// A job registered with Scheduler.Every ticks on multiples of its interval
// since the Unix epoch (12:00:00, 12:00:15, … for 15s), on every replica.
// When the timer fires, the replica numbers its tick
// slot = floor((now + slack) / interval), where the slack (interval/100,
// 100ms to interval/2) absorbs a timer firing a hair early as the wall clock
// slews, and the rest of the interval absorbs one firing late on a busy
// process. Aligning ticks to the epoch is what lets replicas that never talk
// to each other agree on a number for "this tick". The run's ctx carries the
// claimed Tick (TickFrom).
//
// Before a run the replica asks its Locker for two things at once:
//
//	slot key     job:{name}:slot:{n}   set if absent, expires after 2×interval, never deleted
//	run lease    job:{name}:running    set if absent, expires after Lease, refreshed
//	                                   every Lease/3 while the job runs, deleted at the end
//	                                   only by the holder (token-checked)
//
// The slot key is what makes it once per tick. A lock held only for the run
// (the usual gocron Locker; gocron issue #841) is released when the run ends,
// and a replica whose timer fires a moment later — clock skew, a busy
// process, a slow dial — takes the free lock and runs the same tick again. The
// slot key outlives the run, so the late replica finds its tick taken. It
// lives two intervals so that replicas whose clocks disagree by up to one
// interval still collide on it.
//
// The run lease is what keeps a run longer than the interval from overlapping
// a run on another replica (WithSingletonMode only guards this replica). When
// the lease is held the tick is skipped and its slot is left unclaimed (both
// keys are checked and set in one atomic step), so a replica ticking later in
// the same slot, after the long run ended, may still do that tick's work.
// Burning the slot would turn "busy" into "lost tick" and buy nothing: the
// lease already forbids overlap, and the slot key already forbids a second
// run of the tick.
//
// Scheduler.RunNow (for example "an order was created: distribute now")
// claims only the lease: an on-demand run is extra work, not a tick.
//
// A skipped tick is counted as jobs_runs_total{outcome="skipped"}: at debug
// level when another replica has it, at warn level ("job skipped: lock
// unavailable") when the locker cannot answer. Nothing here retries a skipped
// tick; the next tick comes anyway.
//
// # Lockers
//
// RedisLocker keeps the keys in Redis (REDIS_URL set: several replicas);
// MemoryLocker keeps them in a map with the same semantics (a single replica,
// or tests that run several schedulers in one process). Every Redis call is
// bounded by a short timeout, so an outage costs skipped ticks, never a hung
// scheduler. FallbackLocker wraps a RedisLocker: while Redis fails, ticks
// are locked by a MemoryLocker in this process (each replica runs each tick
// once, replicas may run it together — safe, see below), and Redis is used
// again once it answers. A run that ends while Redis is away cannot release
// its Redis lease; the lease then expires by itself.
//
// # Why correctness still comes from SQL
//
// The lock saves work; it never guarantees anything. A lease can expire under
// a stalled process, Redis can lose keys on failover, clocks can disagree by
// more than an interval, and RunNow deliberately runs beside the ticks. So
// every job must be harmless when it runs twice or on two replicas at once:
// it claims rows with conditional UPDATEs (UPDATE … WHERE state = $old) or
// FOR UPDATE SKIP LOCKED, and treats "zero rows" as someone else's success.
// With the lock, that second run is rare; without it, still correct.
//
// # Runs
//
// Each run's error or panic is logged with the job name and duration,
// counted in jobs_runs_total{job,outcome} and jobs_run_duration_seconds{job},
// and reported to a Recorder (storage's job_runs table, for /status). A
// failing or panicking job never stops the scheduler: the next tick runs.
// Shutdown cancels the context every job receives and waits up to
// Config.StopTimeout for running jobs.
package jobs
