package vacancy

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// HH's paging limits: at most 100 per page, and (page+1)*per_page ≤ 2000.
const (
	MaxPerPage = 100
	MaxDepth   = 2000
)

// Run is one discovery run's summary for one search_key.
type Run struct {
	Key    string
	Pages  int
	Seen   int // items examined
	Unseen int // new to this search_key, collected
	Queued int // matches created
	// Dropped counts collected vacancies no user got: experience over six
	// years, or every user's ban words in the title or snippet.
	Dropped int
	// End tells why paging stopped: "limit", "end" or "depth".
	End     string
	Markers Markers
}

// DuplicateShare is the share of examined items this search had seen before.
func (r Run) DuplicateShare() float64 {
	if r.Seen == 0 {
		return 0
	}
	return float64(r.Seen-r.Unseen) / float64(r.Seen)
}

// Fetch runs discovery for every distinct search_key. One key's failure
// does not stop the others; the errors are joined.
func (s *Service) Fetch(ctx context.Context) error {
	if s.deps.Source.Holding() {
		// HH refuses us: asking would only meet the breaker. The tick is
		// skipped, not failed; the HH state is on /status.
		_, why := s.deps.Source.Refused()
		s.log.Warn("vacancy fetch skipped: HH refuses our requests", "reason", why)
		return nil
	}
	groups, err := s.deps.Repo.SearchGroups(ctx)
	if err != nil {
		return fmt.Errorf("fetch: list searches: %w", err)
	}
	var errs []error
	queued := 0
	for _, g := range groups {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		run, err := s.Discover(ctx, g)
		queued += run.Queued
		if errors.Is(err, ErrHHRefused) {
			// What was collected is saved; the other searches wait for
			// the next tick after HH lets us in again.
			s.log.Warn("vacancy fetch stopped: HH refuses our requests", "err", err)
			break
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("search %s: %w", g.Key[:12], err))
		}
	}
	if queued > 0 {
		s.Wake()
	}
	return errors.Join(errs...)
}

// FetchKey runs discovery for one search_key now (a search just saved).
func (s *Service) FetchKey(ctx context.Context, key string) (Run, error) {
	g, err := s.deps.Repo.SearchGroup(ctx, key)
	if err != nil {
		return Run{}, fmt.Errorf("fetch %s: %w", key[:12], err)
	}
	run, err := s.Discover(ctx, g)
	if run.Queued > 0 {
		s.Wake()
	}
	return run, err
}

// Discover pages one search newest first, collecting vacancies this
// search_key has not seen until FetchLimit are collected, the results end,
// or HH's depth limit is reached. Because every run starts at the top and
// counts only what is unseen, a vacancy published between runs is found by
// the next one and a backlog deeper than one run is worked down over the
// following runs. What was collected is saved even when a later page fails.
func (s *Service) Discover(ctx context.Context, g Group) (Run, error) {
	run := Run{Key: g.Key}
	old, err := s.deps.Repo.Markers(ctx, g.Key)
	if err != nil {
		return run, fmt.Errorf("markers: %w", err)
	}
	per := s.cfg.PerPage
	var found []Vacancy
	var hits []int64
	maxID, minID := int64(0), int64(0)
	var pageErr error
paging:
	for page := 0; ; page++ {
		if (page+1)*per > MaxDepth {
			run.End = "depth"
			break
		}
		p, err := s.deps.Source.Search(ctx, g.Params, page, per)
		if err != nil {
			pageErr = fmt.Errorf("search page %d: %w", page, err)
			break
		}
		run.Pages++
		ids := make([]int64, len(p.Items))
		for i, v := range p.Items {
			ids[i] = v.ID
		}
		unseen, err := s.deps.Repo.Unseen(ctx, g.Key, ids)
		if err != nil {
			pageErr = fmt.Errorf("check seen: %w", err)
			break
		}
		for _, v := range p.Items {
			run.Seen++
			maxID = max(maxID, v.ID)
			if minID == 0 || v.ID < minID {
				minID = v.ID
			}
			if !unseen[v.ID] {
				continue
			}
			unseen[v.ID] = false // a page may repeat an item while HH reshuffles
			found = append(found, v)
			hits = append(hits, v.ID)
			if len(found) >= s.cfg.FetchLimit {
				run.End = "limit"
				break paging
			}
		}
		if len(p.Items) < per || page+1 >= p.Pages {
			run.End = "end"
			if p.Found > (page+1)*per {
				run.End = "depth" // HH serves no deeper page
			}
			break
		}
	}
	run.Unseen = len(found)

	m := Markers{LastSeenMaxID: max(old.LastSeenMaxID, maxID), LastCompleteSweepBeforeID: old.LastCompleteSweepBeforeID}
	if minID > 0 && (m.LastCompleteSweepBeforeID == 0 || minID < m.LastCompleteSweepBeforeID) {
		m.LastCompleteSweepBeforeID = minID
	}
	run.Markers = m

	// Who gets what is decided inside the save, against the users who
	// follow the key at that moment (see Repository.SaveDiscovery).
	pick := func(users []Recipient) []NewMatch {
		var matches []NewMatch
		run.Dropped = 0
		for _, v := range found {
			// Unless the search asks for it: every follower of a key
			// has its parameters.
			if v.Experience == MoreThan6 && !g.Params.Has("experience", MoreThan6) {
				run.Dropped++
				continue
			}
			got := false
			for _, u := range users {
				if NewBans(u.BanWords).Match(v.Title, v.Snippet) != "" {
					continue
				}
				matches = append(matches, NewMatch{UserID: u.ID, VacancyID: v.ID})
				got = true
			}
			if !got {
				run.Dropped++
			}
		}
		return matches
	}
	if run.Pages > 0 {
		// Saved even after a failed page: what was collected stays collected,
		// and the markers only move as far as this run really went.
		save := ctx
		if ctx.Err() != nil {
			var cancel context.CancelFunc
			save, cancel = context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
		}
		n, err := s.deps.Repo.SaveDiscovery(save, g.Key, found, hits, m, pick, s.announce)
		if err != nil {
			return run, errors.Join(pageErr, fmt.Errorf("save discovery: %w", err))
		}
		run.Queued = n
	}
	if run.Pages == 0 && pageErr != nil && ctx.Err() == nil {
		// Nothing to save: a user waiting for the search's first
		// discovery hears it will be retried, not silence.
		if err := s.deps.Repo.FirstFetchFailed(ctx, g.Key, s.announce); err != nil {
			s.log.Error("tell a failed first fetch", "search_key", g.Key, "err", err)
		}
	}
	s.m.discovered.Add(float64(run.Unseen))
	s.m.queued.Add(float64(run.Queued))
	s.log.Info("discovery run",
		"search_key", g.Key, "pages", run.Pages, "examined", run.Seen, "unseen", run.Unseen,
		"duplicate_share", fmt.Sprintf("%.2f", run.DuplicateShare()), "queued", run.Queued, "dropped", run.Dropped,
		"end", run.End, "last_seen_max_id", m.LastSeenMaxID, "last_complete_sweep_before_id", m.LastCompleteSweepBeforeID,
		"err", pageErr)
	return run, pageErr
}
