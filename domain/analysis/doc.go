// Package analysis turns group-chat messages into task proposals that
// admins review (docs/ARCHITECTURE.md "Analysis runs").
//
//	pending ──/run_start──► running ──all batches──► completed ──/run_close──► closed
//	                          │                       (only when proposals_pending = 0)
//	                          └──any step fails──► failed (error_log: step, batch, error)
//
//	reviewed and cancelled exist in the enum; nothing enters them yet.
//
// At most one run is unclosed (pending, running, completed, reviewed) at a
// time. The executor of a running run holds a lease (claimed_until) that it
// renews; a run whose executor died is failed as "interrupted" when a
// replica finds its lease expired, so a new run can be opened. Its nine
// steps: set started_at; fetch the window's messages (those already
// proposed in an earlier run left out); prefilter (keywords, minimum
// length, @mentions); batch by chat and time proximity; per batch, LLM
// proposals as validated JSON (with the five most similar approved
// proposals of earlier runs as context when the run has rag); save the
// batch's proposals and counters atomically; progress; completed or failed.
//
// Nothing here talks to Telegram. What the admin chat is told (run events,
// and the run's board: its progress and a page of its proposals with their
// buttons, one message edited in place) is rendered by the Notifier into
// outbox messages that storage writes in the transaction of the state
// change causing them, so a proposal never exists without the board that
// shows it queued; the outbox delivers them. Reviews (a decision, a page
// turned, "approve all remaining" asked, confirmed or cancelled) are state
// changes of the run too, each rewriting the board.
//
// Storage: two ports (service.go), one per aggregate: Runs, the runs and
// their proposals, implemented by storage.Runs (storage/analysis_runs.go
// and storage/analysis_proposals.go), which is also the Publisher of run
// events (pg_notify), and Chats, the group chats and their messages,
// implemented by storage.GroupChats (storage/chat_messages.go).
package analysis
