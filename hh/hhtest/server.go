package hhtest

import (
	"cmp"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"switchboard/internal/testkit"
)

// Server is a fake api.hh.ru serving GET /vacancies and GET /vacancies/{id}
// from an in-memory catalogue. All methods are safe for concurrent use,
// including while requests are in flight.
type Server struct {
	ts        *httptest.Server
	render    renderer
	done      chan struct{} // closed by Close so that delayed handlers give up
	closeOnce sync.Once

	// Fixed by New.
	strictUA bool
	uaPrefix string
	hook     func(*http.Request)

	catMu   sync.RWMutex
	entries []*entry // active and archived, newest first
	byID    map[string]*entry
	gen     *generator
	maxID   int64     // largest numeric id ever added; Publish continues from it
	latest  time.Time // latest published_at ever added

	captcha captcha
	oauth   oauth

	mu          sync.Mutex // guards faults, latency and the request log
	faults      testkit.Faults[Fault]
	latency     [numEndpoints]time.Duration
	notFound    map[string]bool
	log         []Request
	logChanged  chan struct{} // closed and replaced on every log append
	searchCalls int
	detailCalls map[string]int
}

// entry is a catalogue vacancy plus what search needs precomputed, so that a
// request over a large catalogue does not lower-case every text again.
type entry struct {
	v        Vacancy
	idNum    int64
	numeric  bool
	name     string // lower-cased
	req      string // lower-cased requirement, reused for highlighting
	resp     string // lower-cased responsibility
	snippet  string // req + "\n" + resp
	desc     string // lower-cased description without tags, plus snippet
	employer string // lower-cased employer name
}

func newEntry(v Vacancy) *entry {
	e := &entry{v: v}
	e.idNum, e.numeric = idNumber(v.ID)
	e.name = strings.ToLower(v.Name)
	e.req = strings.ToLower(v.Requirement)
	e.resp = strings.ToLower(v.Responsibility)
	e.snippet = e.req + "\n" + e.resp
	e.desc = strings.ToLower(stripTags(v.Description)) + "\n" + e.snippet
	e.employer = strings.ToLower(v.Employer.Name)
	return e
}

// compareNewest orders newest first: by published_at, then by larger id, as
// HH's ids grow with time. Non-numeric (hand-made) ids sort after numeric
// ones on ties, by string.
func compareNewest(a, b *entry) int {
	if c := b.v.PublishedAt.Compare(a.v.PublishedAt); c != 0 {
		return c
	}
	switch {
	case a.numeric && b.numeric:
		return cmp.Compare(b.idNum, a.idNum)
	case a.numeric != b.numeric:
		if a.numeric {
			return -1
		}
		return 1
	}
	return strings.Compare(b.v.ID, a.v.ID)
}

// Option configures New.
type Option func(*Server)

// WithVacancies seeds the catalogue, as Add does.
func WithVacancies(vs ...Vacancy) Option {
	return func(s *Server) { s.add(vs) }
}

// WithSeed seeds the generator behind PublishN (default 1).
func WithSeed(seed int64) Option {
	return func(s *Server) { s.gen = newGenerator(GenOptions{Seed: seed}.withDefaults()) }
}

// StrictUserAgent refuses, besides a missing User-Agent, Go's default
// "Go-http-client/..." with 400 bad_user_agent/blacklisted. HH itself would
// accept it, but a client that sends it has forgotten to set its own UA,
// which HH's rules require (name, version and contact e-mail).
func StrictUserAgent() Option {
	return func(s *Server) { s.strictUA = true }
}

// RequireUserAgent implies StrictUserAgent and also refuses every user agent
// (HH-User-Agent if sent, else User-Agent) that does not start with prefix.
func RequireUserAgent(prefix string) Option {
	return func(s *Server) {
		s.strictUA = true
		s.uaPrefix = prefix
	}
}

// WithLatency delays every request by d, as SetLatency(d, AnyEndpoint).
func WithLatency(d time.Duration) Option {
	return func(s *Server) { s.latency[AnyEndpoint] = d }
}

// OnRequest installs fn, called synchronously for every request after it is
// counted and before latency, faults and validation apply. Tests use it to
// learn that a request has reached the server (e.g. to cancel it then) or to
// hold requests back; fn must return for the request to proceed.
func OnRequest(fn func(*http.Request)) Option {
	return func(s *Server) { s.hook = fn }
}

// Start starts a fake HH API that is closed when the test ends.
func Start(t testing.TB, opts ...Option) *Server { return testkit.Closing(t, New(opts...)) }

// New starts a fake HH API on 127.0.0.1. Close it when done.
func New(opts ...Option) *Server {
	s := &Server{
		done:        make(chan struct{}),
		byID:        map[string]*entry{},
		gen:         newGenerator(GenOptions{Seed: 1}.withDefaults()),
		maxID:       DefaultFirstID - 1,
		latest:      DefaultNewest,
		notFound:    map[string]bool{},
		logChanged:  make(chan struct{}),
		detailCalls: map[string]int{},
	}
	// Vacancy "url" fields point at the fake itself so that a client can
	// follow them, hence the listener must exist before options add data.
	s.ts = httptest.NewUnstartedServer(http.HandlerFunc(s.serveHTTP))
	s.render = renderer{api: "http://" + s.ts.Listener.Addr().String()}
	for _, o := range opts {
		o(s)
	}
	s.ts.Start()
	return s
}

// URL is the API root, e.g. "http://127.0.0.1:34567"; requests go to
// URL()+"/vacancies".
func (s *Server) URL() string { return s.ts.URL }

// Client returns an HTTP client for the server whose idle connections are
// closed by Close, so tests using it do not leak transport goroutines.
func (s *Server) Client() *http.Client { return s.ts.Client() }

// Close releases delayed requests and shuts the server down, waiting for
// in-flight handlers. It is safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.ts.Close()
	})
}

// Add puts hand-made vacancies into the catalogue as given, replacing any
// with the same ID. An empty ID gets the next free id and a zero
// PublishedAt gets a time after everything published so far; other missing
// fields get defaults (area Moscow, noExperience, fullDay, full).
func (s *Server) Add(vs ...Vacancy) {
	s.catMu.Lock()
	defer s.catMu.Unlock()
	s.add(vs)
}

func (s *Server) add(vs []Vacancy) {
	for _, v := range vs {
		v = v.clone()
		if v.ID == "" {
			s.maxID++
			v.ID = itoa64(s.maxID)
		}
		if v.PublishedAt.IsZero() {
			v.PublishedAt = s.latest.Add(time.Minute).In(msk)
		}
		v.normalize()
		s.put(newEntry(v))
	}
	slices.SortStableFunc(s.entries, compareNewest)
}

// put inserts or replaces e; the caller re-sorts.
func (s *Server) put(e *entry) {
	if old, ok := s.byID[e.v.ID]; ok {
		i := slices.Index(s.entries, old)
		s.entries[i] = e
	} else {
		s.entries = append(s.entries, e)
	}
	s.byID[e.v.ID] = e
	if e.numeric && e.idNum > s.maxID {
		s.maxID = e.idNum
	}
	if e.v.PublishedAt.After(s.latest) {
		s.latest = e.v.PublishedAt
	}
}

// Publish adds vacancies as brand-new postings: each gets a fresh id larger
// than any seen and a published_at one minute after the newest so far (later
// arguments are newer), so they appear at the top of page 0. The vacancies'
// own ID, PublishedAt and CreatedAt are ignored. It returns what was stored.
func (s *Server) Publish(vs ...Vacancy) []Vacancy {
	s.catMu.Lock()
	defer s.catMu.Unlock()
	out := make([]Vacancy, 0, len(vs))
	for _, v := range vs {
		v = v.clone()
		s.maxID++
		v.ID = itoa64(s.maxID)
		v.PublishedAt = s.latest.Add(time.Minute).In(msk)
		v.CreatedAt = time.Time{}
		v.normalize()
		s.put(newEntry(v))
		out = append(out, v.clone())
	}
	slices.SortStableFunc(s.entries, compareNewest)
	return out
}

// PublishN generates n vacancies (deterministically, see WithSeed) and
// publishes them newer than everything so far. It returns them oldest first.
func (s *Server) PublishN(n int) []Vacancy {
	s.catMu.Lock()
	defer s.catMu.Unlock()
	out := make([]Vacancy, 0, max(n, 0))
	for range n {
		s.maxID++
		v := s.gen.vacancy(s.maxID, s.latest.Add(time.Minute+s.gen.gap()))
		s.put(newEntry(v))
		out = append(out, v.clone())
	}
	slices.SortStableFunc(s.entries, compareNewest)
	return out
}

// Archive makes the vacancies disappear from search and answer 404 on
// detail. Unknown ids are ignored.
func (s *Server) Archive(ids ...string) {
	s.catMu.Lock()
	defer s.catMu.Unlock()
	for _, id := range ids {
		if e, ok := s.byID[id]; ok {
			// Kept in the catalogue (not deleted) so that Vacancy(id) can
			// still show what the client was refused.
			e.v.Archived = true
		}
	}
}

// Vacancies returns the active (not archived) catalogue, newest first.
func (s *Server) Vacancies() []Vacancy {
	s.catMu.RLock()
	defer s.catMu.RUnlock()
	out := make([]Vacancy, 0, len(s.entries))
	for _, e := range s.entries {
		if !e.v.Archived {
			out = append(out, e.v.clone())
		}
	}
	return out
}

// Vacancy returns the catalogue vacancy with the id, archived or not.
func (s *Server) Vacancy(id string) (Vacancy, bool) {
	s.catMu.RLock()
	defer s.catMu.RUnlock()
	e, ok := s.byID[id]
	if !ok {
		return Vacancy{}, false
	}
	return e.v.clone(), true
}

// Len is the number of active vacancies, i.e. "found" of an unfiltered search.
func (s *Server) Len() int {
	s.catMu.RLock()
	defer s.catMu.RUnlock()
	n := 0
	for _, e := range s.entries {
		if !e.v.Archived {
			n++
		}
	}
	return n
}
