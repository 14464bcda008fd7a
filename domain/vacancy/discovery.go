package vacancy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"switchboard/domain"
)

// HH's paging limits: at most 100 per page, and (page+1)*per_page ≤ 2000.
const (
	MaxPerPage = 100
	MaxDepth   = 2000
)

// Discovery is what one Discover call did for one search_key.
type Discovery struct {
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
func (r Discovery) DuplicateShare() float64 {
	if r.Seen == 0 {
		return 0
	}
	return float64(r.Seen-r.Unseen) / float64(r.Seen)
}

// Fetch runs discovery for every distinct search_key. One key's failure
// does not stop the others; the errors are joined.
func (s *Service) Fetch(ctx context.Context) error {
	if s.deps.Source.Holding() {
		// HH blocks us: asking would only meet the breaker. The tick is
		// skipped, not failed; the HH state is on /status.
		_, why := s.deps.Source.Blocked()
		s.log.Warn("vacancy fetch skipped: HH refuses our requests", "reason", why)
		return nil
	}
	groups, err := s.deps.Searches.KeyGroups(ctx)
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
		var run Discovery
		var err error
		// A panic on one search's pages (an HH answer of a shape nobody
		// foresaw) fails that search as HH failing would, not the tick:
		// the scheduler would recover it, but the searches after it would
		// never be fetched.
		if perr := s.m.panics.Contain(s.log, "vacancy_discovery", g.Key, func() { run, err = s.Discover(ctx, g) }); perr != nil {
			err = perr
		}
		queued += run.Queued
		if errors.Is(err, ErrHHBlocked) {
			// What was collected is saved; the other searches wait for
			// the next tick after HH lets us in again.
			s.log.Warn("vacancy fetch stopped: HH refuses our requests", "err", err)
			break
		}
		// A refused search was set aside and told: handled, not the
		// tick's failure.
		if err != nil && !errors.Is(err, ErrSearchRefused) {
			errs = append(errs, fmt.Errorf("search %s: %w", g.Key[:12], err))
		}
	}
	if queued > 0 {
		s.Wake()
	}
	return errors.Join(errs...)
}

// setAside moves the key's active searches to refused and tells their
// users, in their language, which of the search's parameters HH refused.
func (s *Service) setAside(ctx context.Context, key string, args []string) error {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
	}
	tell := func(rs []Refusal) []domain.Message {
		var out []domain.Message
		for _, r := range rs {
			out = append(out, s.deps.Notifier.SearchRefused(r)...)
		}
		return out
	}
	n, err := s.deps.Searches.SetAside(ctx, key, args, tell)
	if err != nil {
		return err
	}
	s.m.refused.Add(float64(n))
	s.log.Warn("search set aside: HH refuses its parameters", "search_key", key, "args", args, "searches", n)
	return nil
}

// FetchKey runs discovery for one search_key now (a search just saved).
func (s *Service) FetchKey(ctx context.Context, key string) (Discovery, error) {
	g, err := s.deps.Searches.KeyGroup(ctx, key)
	if err != nil {
		return Discovery{}, fmt.Errorf("fetch %s: %w", key[:12], err)
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
func (s *Service) Discover(ctx context.Context, g Group) (Discovery, error) {
	run := Discovery{Key: g.Key}
	old, err := s.deps.Matches.DiscoveryMarkers(ctx, g.Key)
	if err != nil {
		return run, fmt.Errorf("markers: %w", err)
	}
	sw, pageErr := s.sweep(ctx, g, &run)
	run.Unseen = len(sw.found)
	m := sw.markers(old)
	run.Markers = m
	if run.Pages > 0 {
		// Saved even after a failed page: what was collected stays collected,
		// and the markers only move as far as this run really went.
		if run.Queued, err = s.saveSweep(ctx, g, sw, m, &run); err != nil {
			return run, errors.Join(pageErr, fmt.Errorf("save discovery: %w", err))
		}
	}
	var refusal *SearchRefusal
	switch {
	case errors.As(pageErr, &refusal):
		// The search itself is wrong: asking again would be refused again,
		// so it is set aside and its users are told which parameter, once.
		if err := s.setAside(ctx, g.Key, refusal.Args); err != nil {
			// Not the refusal any more: the tick fails and a later one
			// asks HH again, whose refusal sets it aside then.
			return run, fmt.Errorf("%v; set aside: %w", pageErr, err)
		}
	case run.Pages == 0 && pageErr != nil && ctx.Err() == nil:
		// Nothing to save: a user waiting for the search's first
		// discovery hears it will be retried, not silence.
		if err := s.deps.Matches.FirstFetchFailed(ctx, g.Key, s.announce); err != nil {
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

// swept is what one run's paging collected: the unseen vacancies (hits are
// their ids) and the range of ids it examined.
type swept struct {
	found        []Vacancy
	hits         []int64
	minID, maxID int64
}

// markers moves the key's markers as far as this run went: the largest id
// only grows, the smallest swept only shrinks.
func (sw swept) markers(old Markers) Markers {
	m := Markers{LastSeenMaxID: max(old.LastSeenMaxID, sw.maxID), LastCompleteSweepBeforeID: old.LastCompleteSweepBeforeID}
	if sw.minID > 0 && (m.LastCompleteSweepBeforeID == 0 || sw.minID < m.LastCompleteSweepBeforeID) {
		m.LastCompleteSweepBeforeID = sw.minID
	}
	return m
}

// sweep pages the search newest first until FetchLimit unseen vacancies are
// collected, the results end or HH's depth limit is reached, counting pages
// and examined items into run and setting run.End. The error is the page
// that failed; what was collected before it is returned with it.
func (s *Service) sweep(ctx context.Context, g Group, run *Discovery) (swept, error) {
	per := s.cfg.PerPage
	var sw swept
	for page := 0; ; page++ {
		if (page+1)*per > MaxDepth {
			run.End = "depth"
			return sw, nil
		}
		p, err := s.deps.Source.Search(ctx, g.Params, page, per)
		if err != nil {
			return sw, fmt.Errorf("search page %d: %w", page, err)
		}
		run.Pages++
		if full, err := s.collectPage(ctx, g.Key, p.Items, &sw, run); err != nil {
			return sw, err
		} else if full {
			run.End = "limit"
			return sw, nil
		}
		if len(p.Items) < per || page+1 >= p.Pages {
			run.End = "end"
			if p.Found > (page+1)*per {
				run.End = "depth" // HH serves no deeper page
			}
			return sw, nil
		}
	}
}

// collectPage adds a page's items unseen by the key to sw and tells whether
// FetchLimit is reached.
func (s *Service) collectPage(ctx context.Context, key string, items []Vacancy, sw *swept, run *Discovery) (bool, error) {
	ids := make([]int64, len(items))
	for i, v := range items {
		ids[i] = v.ID
	}
	unseen, err := s.deps.Matches.UnseenVacancies(ctx, key, ids)
	if err != nil {
		return false, fmt.Errorf("check seen: %w", err)
	}
	for _, v := range items {
		run.Seen++
		sw.maxID = max(sw.maxID, v.ID)
		if sw.minID == 0 || v.ID < sw.minID {
			sw.minID = v.ID
		}
		if !unseen[v.ID] {
			continue
		}
		unseen[v.ID] = false // a page may repeat an item while HH reshuffles
		sw.found = append(sw.found, v)
		sw.hits = append(sw.hits, v.ID)
		if len(sw.found) >= s.cfg.FetchLimit {
			return true, nil
		}
	}
	return false, nil
}

// saveSweep saves what the run collected with its markers and returns how
// many matches were queued. It saves after the run's context is cancelled
// too, within a bounded time.
func (s *Service) saveSweep(ctx context.Context, g Group, sw swept, m Markers, run *Discovery) (int, error) {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
	}
	// Who gets what is decided inside the save, against the users who
	// follow the key at that moment (see Matches.SaveDiscovery).
	pick := func(users []Recipient) []NewMatch {
		matches, dropped := pickMatches(g, sw.found, users)
		run.Dropped = dropped
		return matches
	}
	return s.deps.Matches.SaveDiscovery(ctx, g.Key, sw.found, sw.hits, m, pick, s.announce)
}

// pickMatches gives each vacancy to the users who do not exclude it,
// and counts the vacancies nobody got.
func pickMatches(g Group, found []Vacancy, users []Recipient) (matches []NewMatch, dropped int) {
	for _, v := range found {
		// Unless the search asks for it: every follower of a key
		// has its parameters.
		if v.Experience == MoreThan6 && !g.Params.Has("experience", MoreThan6) {
			dropped++
			continue
		}
		got := false
		for _, u := range users {
			if u.Exclusions.Excludes(v) != "" {
				continue
			}
			matches = append(matches, NewMatch{UserID: u.ID, VacancyID: v.ID})
			got = true
		}
		if !got {
			dropped++
		}
	}
	return matches, dropped
}
