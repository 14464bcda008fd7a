package vacancy

import (
	"context"
	"time"

	"switchboard/domain"
)

// QueueChannel is notified when matches are queued, so every replica's
// workers wake at once instead of at their next sweep.
const QueueChannel = "vacancy_queue"

// LetterChannel is notified when a letter is asked for, so an idle letter
// worker on any replica drafts it at once.
const LetterChannel = "cover_letters"

// Schedule is how often each of the workflow's jobs runs.
type Schedule struct {
	Fetch, Queue, FirstNews, FollowUp, Digest, Recovery time.Duration
}

// Module is the vacancy workflow's jobs and loops (domain.Module); cover
// letters are a module of their own (Letters.Module).
func (s *Service) Module(every Schedule) domain.Module {
	return domain.Module{
		Name: "vacancies",
		Jobs: []domain.Job{
			{Name: "vacancy-fetch", Every: every.Fetch, Run: s.Fetch},
			// Workers run on every replica and wake on NOTIFY; this tick
			// is the guarantee behind the notifications.
			{Name: "vacancy-queue", Every: every.Queue, Run: func(context.Context) error { s.Wake(); return nil }},
			// A new search is discovered at once by the replica that saved
			// it; this tick tells its user the outcome if that replica
			// died, or once HH answers again after refusing us.
			{Name: "vacancy-first-news", Every: every.FirstNews, Run: s.FirstNews},
			// Reminders of applications without news, each sent once: the
			// statement that marks it reminded queues it.
			{Name: "vacancy-follow-up", Every: every.FollowUp, Run: s.FollowUps},
			// Digests at each user's digest times, and what a user back in
			// instant mode left waiting (rhythm.go).
			{Name: "vacancy-digest", Every: every.Digest, Run: s.Digests},
			{Name: "vacancy-recovery", Every: every.Recovery, Run: domain.Uncounted(s.Recover)},
		},
		Loops: []domain.Loop{
			func(ctx context.Context, _ domain.Listen) { s.Run(ctx) },
			domain.WakeOn(QueueChannel, s.Wake),
		},
	}
}

// Module is the cover letters' workers (domain.Module): they draft on
// every replica and wake when a letter is asked for.
func (l *Letters) Module() domain.Module {
	return domain.Module{
		Name: "cover letters",
		Loops: []domain.Loop{
			func(ctx context.Context, _ domain.Listen) { l.Run(ctx) },
			domain.WakeOn(LetterChannel, l.Wake),
		},
	}
}
