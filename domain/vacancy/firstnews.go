package vacancy

import "context"

// FirstNews is the first-news sweep: a search waiting on first matches
// that have all ended without a card is told "nothing new yet". The
// transitions that end them do this themselves; this catches what ended
// them otherwise (a SKIPPED match pruned past recovery, say). Each step is
// a conditional UPDATE naming the search's old state, so running it
// beside the workers or another replica tells each search once.
func (s *Service) FirstNews(ctx context.Context) error {
	return s.deps.Repo.SettleFirstNews(ctx, s.announce)
}
