package dispatch

import (
	"cmp"
	"context"
	"time"

	"switchboard/domain"
)

// Schedule is how often each of the workflow's jobs runs.
type Schedule struct {
	Distribution, Watchdog, Commission, Autoclose time.Duration
	// Late is how often visit windows are checked for a master who has
	// not arrived (0: every minute).
	Late time.Duration
}

// Module is dispatch's jobs, its timer and distributor (Run), and what an
// offer Telegram refuses for good does: it is declined at once and the
// order moves on (domain.Module).
func (s *Service) Module(every Schedule) domain.Module {
	return domain.Module{
		Name: "dispatch",
		Jobs: []domain.Job{
			{Name: "dispatch-distribution", Every: every.Distribution, Run: s.Distribute},
			// Each replica's timer expires offers as they fall due; this
			// tick is the seed's watchdog, the guarantee behind the timers.
			{Name: "dispatch-watchdog", Every: every.Watchdog, Run: domain.Uncounted(s.Expire)},
			{Name: "dispatch-commission", Every: every.Commission, Run: domain.Uncounted(s.Commission)},
			{Name: "dispatch-autoclose", Every: every.Autoclose, Run: domain.Uncounted(s.Autoclose)},
			{Name: "dispatch-late", Every: cmp.Or(every.Late, time.Minute), Run: domain.Uncounted(s.Late)},
		},
		Loops: []domain.Loop{s.Run},
		Drops: map[string]func(context.Context, int64){domain.KindOffer: s.Undeliverable},
	}
}
