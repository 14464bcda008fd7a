package vacancy

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// FirstNewsGrace is how long a new search is left to the replica that
// saved it, which runs its first discovery at once (AddSearch, Run), before
// the first-news sweep runs it: past it, that replica did not (it died, or
// a burst overflowed its queue of fresh keys).
const FirstNewsGrace = 20 * time.Second

// FirstNews is the first-news sweep (job vacancy-first-news, every
// FIRST_NEWS_INTERVAL, one replica per tick): a new search's user hears
// its outcome whichever replica saved it and however long HH blocked us.
//
//   - A search waiting on first matches that have all ended without a
//     card is told "nothing new yet" (the transitions that end them do
//     this themselves; this catches the rest).
//   - A key with a search pending past FirstNewsGrace, or retrying, is
//     discovered, which tells the outcome (cards, or "nothing new yet"; a
//     search HH refuses for its parameters is set aside and its users are
//     told which one, and it is never picked again).
//     While HH blocks us nothing is asked of it: the pending searches are
//     told, once, that it will be retried, and are discovered by a later
//     tick once HH answers again.
//
// Every step is a conditional UPDATE naming the search's old state, so
// running it beside the fetch, the workers or another replica tells each
// search each thing once.
func (s *Service) FirstNews(ctx context.Context) error {
	var errs []error
	if err := s.deps.Matches.SettleFirstNews(ctx, s.announce); err != nil {
		errs = append(errs, err)
	}
	groups, err := s.deps.Matches.FirstNewsGroups(ctx, FirstNewsGrace)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("first news: %w", err))...)
	}
	refused := s.deps.Source.Holding()
	queued := 0
	for _, g := range groups {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		if refused {
			if err := s.deps.Matches.FirstFetchFailed(ctx, g.Key, s.announce); err != nil {
				errs = append(errs, fmt.Errorf("first news of %s: %w", g.Key[:12], err))
			}
			continue
		}
		run, err := s.Discover(ctx, g)
		queued += run.Queued
		switch {
		case errors.Is(err, ErrHHBlocked):
			// Discover told this key's pending searches; the rest are
			// told without asking HH again.
			refused = true
		case errors.Is(err, ErrSearchRefused):
			// HH refused the search's parameters: Discover set it aside
			// and told its users; no later tick asks HH for it.
		case err != nil:
			errs = append(errs, fmt.Errorf("first news of %s: %w", g.Key[:12], err))
		}
	}
	if queued > 0 {
		s.Wake()
	}
	return errors.Join(errs...)
}
