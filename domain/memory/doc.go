// Package memory is the memory chat (MaaS): a private message becomes a
// pipeline run that an orchestrator drives through the process document's
// stages, answers in the chat, and an archivist summarises into the user's
// long-term memory.
//
//	          intake (query → raw_logs, run NEW, one transaction)
//	              │
//	              ▼
//	NEW ──capture──► ANALYZING ──► ANALYZED ──capture──► ASSEMBLING ──► READY
//	 ▲                  │  reaper      ▲                    │ reaper      ▲  │
//	 └──────────────────┘              └────────────────────┘             │  capture
//	                                                                      │  ▼
//	COMPLETED ◄──────────────────────────────────────────────── RESPONDING ─┘ (reaper → READY)
//	    │ (the answer queued in the outbox by the same commit: delivered_at)
//	    │ archivist signal 2 → lsm_storage, archived_at
//	    │ (an incognito run: no summary; its texts and logged answer erased)
//	    ▼
//	(archived: the user's next run may start)
//
//	a stage at work (ANALYZING, ASSEMBLING, RESPONDING) ──► FAILED (the notice queued by the same commit;
//	                                                        what they wrote stays in raw_logs)
//
// Every stage starts with a capture, one conditional UPDATE that names the
// status it expects, so of any number of orchestrators exactly one runs a
// stage. The worker that captured a run carries it on: each stage's result
// is committed together with the capture of the next stage (two status
// changes, one commit), and the COMPLETED or FAILED run stays claimed for
// that worker's archive. What the user is told is written to the outbox
// (domain.Message rows the Notifier renders) in the commit that records
// the outcome, and the outbox's senders deliver it; no worker waits for
// Telegram. NOTIFY on pipeline_events is a hint to look: its
// payload says whether somebody holds the run, and only runs nobody holds (a
// new one, a stage handed back, the reaper's returns) are looked at. A sweep
// after every (re)connect and on a timer is the guarantee. A run whose orchestrator died
// mid-stage is returned by the reaper to the status before it, at most
// MaxReaps times, then FAILED; a stage whose result could not be saved is
// given back and counted the same way. A user's runs go strictly one after another:
// the capture of NEW waits until every earlier run of that user is archived
// or failed.
//
// Memories (memories.go): a summary is current until a later one
// supersedes it (the archivist's, when an exchange contradicts it, or the
// user's correction); superseded ones are history, never read for
// answers. The user pages, deletes, corrects and forgets them.
// A run taken in while the user's incognito is on (export.go) is
// incognito for good: its query is not logged, and instead of being
// summarised it is closed with its texts erased, so the exchange reaches no
// later run. /export's files are built from the summaries and raw logs
// when they are sent.
//
// Storage (service.go): one port per store. Runs is storage.PipelineRuns
// (storage/pipeline_runs.go, and the closing of incognito runs in
// storage/memory_export.go), Memories is storage.Memories
// (storage/memories.go, and /export and /incognito in
// storage/memory_export.go), Prompts is storage.Prompts
// (storage/prompts.go); Outbox and UserStore are storage.Outbox and
// storage.Users.
package memory
