package storage

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"switchboard/domain/memory"
)

// livenessClass is the high half of every replica's liveness lock key
// ("SwLv"); the low half is the replica's own random number, which its
// claimer name carries after a '#'.
const livenessClass int64 = 0x5377_4c76

// liveGrace is how long a claimer's liveness lock must stay gone before its
// claims are given back. A replica whose lock connection broke (a server
// restart, a network blink) takes the lock again within a check or two, and
// its claims must not change hands meanwhile; a dead one's never come back.
const liveGrace = 3 * time.Second

// liveLocks is the keys' low halves of the liveness locks held now in this
// database (advisory locks are per database, so another deployment's
// replicas, or another test's, are not seen). A bigint key shows in pg_locks
// as classid (high half), objid (low half) and objsubid 1.
const liveLocks = `live AS MATERIALIZED (
    SELECT l.objid::bigint AS n FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.classid = $1::oid
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))`

// liveFollowers is liveLocks with the class in the text, for a statement
// whose $1 is another value (owedOrders).
var liveFollowers = strings.Replace(liveLocks, "$1::oid", fmt.Sprint(livenessClass), 1)

// lockOf is the liveness key a claimer name ends in (NULL for a name
// without one: such claims end only with their lease).
const lockOf = `substring(claimed_by FROM '#([0-9]{1,10})$')::bigint`

// Liveness is this replica's proof of life to its peers, and its watch over
// theirs. Every claim (claimTables: inbox updates, outbox rows, memory-chat
// stages, vacancy matches, cover letters, résumé drafts) carries the
// claimer's name (REPLICA_NAME#n), and the claimer holds the session
// advisory lock keyed n for as long as its process lives. When a replica
// dies its kernel closes the lock's connection and the server drops the lock
// at once; every replica looks every second for claims whose claimer's lock
// is gone and, after liveGrace, gives them back, so the dead replica's work
// goes on within seconds instead of after its leases (30 s for an update,
// 2 min for a stage or a match), which a master's Accept pressed in the
// meantime would outlive. A claim whose claimer cannot be told (no key in
// its name, or two replicas that drew the same number) still ends with its
// lease.
type Liveness struct {
	store   *Store
	lock    *SessionLock
	claimer string
	log     *slog.Logger
	// gone is when each claimer was first seen holding claims without its
	// lock; only this replica's patience, so losing it costs liveGrace.
	gone map[string]time.Time
}

// Liveness returns the liveness of the replica named replica, with a number
// of its own drawn at random: a restarted replica is a new claimer, so the
// claims its previous process left are seen as the dead's. Nothing connects
// until Run.
func (s *Store) Liveness(replica string) *Liveness {
	var b [4]byte
	_, _ = rand.Read(b[:]) // never fails: crypto/rand crashes the program instead
	n := binary.BigEndian.Uint32(b[:])
	return &Liveness{
		store:   s,
		lock:    newSessionLock(s.pool.Config().ConnConfig.Copy(), livenessClass<<32|int64(n), "liveness lock", s.log),
		claimer: fmt.Sprintf("%s#%d", replica, n),
		log:     s.log,
		gone:    map[string]time.Time{},
	}
}

// Claimer is the name this replica's claims carry.
func (l *Liveness) Claimer() string { return l.claimer }

// Run holds the lock, taking it again whenever its connection is lost, and
// every second gives back the claims of replicas whose lock has been gone
// for liveGrace, until ctx ends. The lock outlives Run: the replica's other
// services may still be settling their claims as they stop, and Close (or
// the process's end) gives it up once they have.
func (l *Liveness) Run(ctx context.Context) {
	t := time.NewTicker(lockCheckEvery)
	defer t.Stop()
	lost := false
	for {
		held, err := l.hold(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case !held && !lost:
			l.log.Warn("liveness lock not held: peers may take this replica's claims after a grace", "err", err)
			lost = true
		case held && lost:
			l.log.Info("liveness lock held again")
			lost = false
		}
		if err := l.reclaim(ctx, time.Now()); err != nil && ctx.Err() == nil {
			l.log.Warn("give back dead replicas' claims", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Close gives up the lock; peers then take the claims still open after
// liveGrace.
func (l *Liveness) Close() { l.lock.Close() }

func (l *Liveness) hold(ctx context.Context) (bool, error) {
	if l.lock.Held() {
		if ok, err := l.lock.Renew(ctx); ok || err != nil {
			return ok, err
		}
	}
	return l.lock.Acquire(ctx)
}

// reclaim gives back the claims of claimers that have been without their
// lock since liveGrace before now. This replica's own claims are never
// given back here: while its lock is lost it is alive all the same.
func (l *Liveness) reclaim(ctx context.Context, now time.Time) error {
	dead, err := l.store.claimersWithoutLock(ctx)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	var due []string
	for _, c := range dead {
		if c == l.claimer {
			continue
		}
		seen[c] = true
		if since, ok := l.gone[c]; !ok {
			l.gone[c] = now
		} else if now.Sub(since) >= liveGrace {
			due = append(due, c)
		}
	}
	for c := range l.gone {
		if !seen[c] {
			delete(l.gone, c)
		}
	}
	if len(due) == 0 {
		return nil
	}
	freed, err := l.store.releaseClaims(ctx, due)
	if err != nil {
		return err
	}
	if len(freed) > 0 {
		l.log.Warn("gave back the claims of replicas that are gone", "claimers", due, "claims", freed)
	}
	return nil
}

// claimTable is a table whose claims name their claimer: which of its rows
// hold a live claim, how one is given back, and whom that wakes.
type claimTable struct {
	name string
	// live selects the rows claimed within their lease.
	live string
	// giveBack is the SET of a given-back claim: cleared, so the row is
	// claimable at once; or, where a reaper decides what a return means,
	// only its lease ended.
	giveBack string
	// wake and payload: the NOTIFY that tells the workers (none: they poll).
	wake, payload string
	// also is a further statement on the given-back rows (given), as a CTE.
	also string
}

// alsoCTE is t.also as the statement's next CTE, if any.
func (t claimTable) alsoCTE() string {
	if t.also == "" {
		return ""
	}
	return ", also AS (\n    " + t.also + ")"
}

// claimTables are the claims Liveness watches, the order it logs them in.
var claimTables = []claimTable{
	{name: "inbox", live: "state = 'pending' AND claimed_until > now()",
		giveBack: "claimed_by = NULL, claim_token = NULL, claimed_until = NULL", wake: InboxChannel},
	// The sender polls every 100 ms.
	{name: "outbox", live: "state = 'pending' AND claim_token IS NOT NULL AND claimed_until > now()",
		giveBack: "claimed_by = NULL, claim_token = NULL, claimed_until = NULL"},
	// The reaper returns the stage and counts the return (a run that kills
	// every replica that takes it still fails after MaxReaps).
	{name: "pipeline_runs", live: "closed_at IS NULL AND claimed_until > now()",
		giveBack: "claimed_until = now()", wake: memory.Channel, payload: reapPayload},
	// The claim token stays: the dead worker's writes name it, nobody
	// else's do, and the next claim draws its own. The fetch lease the claim
	// may have taken on its vacancy's detail ends too, or the vacancy's
	// other matches would wait it out (at worst a live fetch is repeated).
	{name: "vacancy_matches", live: "status = 'QUEUED' AND claimed_until > now()",
		giveBack: "claimed_until = now()", wake: QueueChannel,
		also: `UPDATE vacancies v SET detail_fetching_until = now() FROM given g
    WHERE v.id = g.vacancy_id AND v.detail_fetching_until > now()`},
	{name: "cover_letters", live: "state = 'pending' AND claimed_until > now()",
		giveBack: "claimed_until = now()", wake: LetterChannel},
	// The résumé workers sweep every 2 s.
	{name: "profile_drafts", live: "state = 'reading' AND claimed_until > now()",
		giveBack: "claimed_until = now()"},
	// The pusher runs every TASKS_PUSH_INTERVAL; the next tick, on any
	// replica, finds the task its dead claimer may have filed by its marker.
	{name: "task_pushes", live: "state = 'pending' AND claim_token IS NOT NULL AND claimed_until > now()",
		giveBack: "claimed_by = NULL, claim_token = NULL, claimed_until = NULL"},
}

// reapPayload on memory.Channel wakes every replica's memory reaper.
const reapPayload = `{"reap":true}`

// claimersWithoutLockSQL is claimersWithoutLock's statement, over every
// table in claimTables.
var claimersWithoutLockSQL = func() string {
	var claims []string
	for _, t := range claimTables {
		claims = append(claims, "SELECT claimed_by FROM "+t.name+" WHERE "+t.live)
	}
	return `
WITH ` + liveLocks + `, claims AS (
    ` + strings.Join(claims, "\n    UNION\n    ") + `
)
SELECT claimed_by FROM claims WHERE ` + lockOf + ` NOT IN (SELECT n FROM live)`
}()

// claimersWithoutLock lists the claimers of live claims whose liveness lock
// nobody holds.
func (s *Store) claimersWithoutLock(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, claimersWithoutLockSQL, livenessClass)
	if err != nil {
		return nil, fmt.Errorf("claimers without their liveness lock: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("claimers without their liveness lock: %w", err)
	}
	return out, nil
}

// releaseClaims gives back the live claims of claimers whose liveness lock
// is still gone (checked again in each statement: one that came back keeps
// its claims), table by table, waking each table's workers if it gave any
// back; it returns how many per table.
func (s *Store) releaseClaims(ctx context.Context, claimers []string) (map[string]int64, error) {
	freed := map[string]int64{}
	for _, t := range claimTables {
		var n int64
		err := s.pool.QueryRow(ctx, `
WITH `+liveLocks+`, given AS (
    UPDATE `+t.name+` SET `+t.giveBack+`
    WHERE `+t.live+` AND claimed_by = ANY($2) AND `+lockOf+` NOT IN (SELECT n FROM live)
    RETURNING *
)`+t.alsoCTE()+`
SELECT count(*), (SELECT count(pg_notify($3, $4)) WHERE $3 <> '' AND EXISTS (SELECT 1 FROM given)) FROM given`,
			livenessClass, claimers, t.wake, t.payload).Scan(&n, new(int64))
		if err != nil {
			return freed, fmt.Errorf("give back %s claims of %v: %w", t.name, claimers, err)
		}
		if n > 0 {
			freed[t.name] = n
		}
	}
	return freed, nil
}
