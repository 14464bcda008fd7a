package memory

import (
	"context"
	"fmt"
	"time"

	"switchboard/domain"
)

// ExportEvery is how often a user may ask for an export: building it reads
// everything they have, and each sends two files. (The bot's texts say
// "once a minute".)
const ExportEvery = time.Minute

// Export is what /export sends a user: their memories, current and
// superseded, and their conversation, as the tables held them when the
// export was asked for (AsOf). Incognito exchanges are never in it.
type Export struct {
	User domain.User
	AsOf time.Time
	// Memories, oldest first.
	Memories []ExportedMemory
	// Conversation is the queries and answers, oldest first: the newest
	// whose texts fit ExportTextBudget. Omitted counts the older ones
	// left unread.
	Conversation []LogEntry
	Omitted      int
}

// ExportTextBudget bounds the conversation's text one export reads:
// Telegram's 50 MB, the most one file can carry. Read whole, years of a
// talkative user's chat would be held in memory only to be cut to that.
const ExportTextBudget = 50 << 20

// Empty reports whether there is nothing to send.
func (e Export) Empty() bool {
	return len(e.Memories) == 0 && len(e.Conversation) == 0 && e.Omitted == 0
}

// ExportedMemory is one summary with the time it stopped being true, if it
// was superseded (zero SupersededAt: current).
type ExportedMemory struct {
	Memory       Summary
	SupersededAt time.Time
	SupersededBy int64
}

// ExportRequest is what asking for an export did: queued its files, or
// found nothing to export, or found the user's last export too recent
// (RetryIn), or found this very command handled already (Repeated).
type ExportRequest struct {
	Queued, Empty, Repeated bool
	RetryIn                 time.Duration
}

// Incognito is a user's incognito state after a command: On, and whether
// the command changed it.
type Incognito struct {
	On, Changed bool
}

// RequestExport queues the user's export (tell: its files, rendered
// before; their content is built from the tables when they are sent, so
// no copy of the user's data waits in the outbox).
func (s *Service) RequestExport(ctx context.Context, userID int64, messageID int, tell []domain.Message) (ExportRequest, error) {
	req, err := s.deps.Memories.RequestExport(ctx, userID, messageID, ExportEvery, tell)
	if err != nil {
		return ExportRequest{}, fmt.Errorf("request export: %w", err)
	}
	return req, nil
}

// Export reads the export asked for at asOf.
func (s *Service) Export(ctx context.Context, userID int64, asOf time.Time) (Export, error) {
	e, err := s.deps.Memories.Export(ctx, userID, asOf, ExportTextBudget)
	if err != nil {
		return Export{}, fmt.Errorf("export: %w", err)
	}
	return e, nil
}

// SetIncognito turns the user's incognito on or off, or toggles it (set
// nil). Runs taken in while it is on answer without leaving memory.
func (s *Service) SetIncognito(ctx context.Context, userID int64, messageID int, set *bool) (Incognito, error) {
	st, err := s.deps.Memories.SetIncognito(ctx, userID, messageID, set)
	if err != nil {
		return Incognito{}, fmt.Errorf("set incognito: %w", err)
	}
	return st, nil
}
