package vacancy_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/domaintest"
	"switchboard/domain/vacancy"
	"switchboard/hh"
	"switchboard/hh/hhtest"
	"switchboard/internal/testkit"
	"switchboard/llm"
	"switchboard/llm/llmtest"
	"switchboard/storage"
	"switchboard/storage/storagetest"
)

// bundle is one test's world: a real database, the fake HH behind the real
// client, the scripted LLM behind the real client, and a notifier that
// records deliveries in place of Telegram.
type bundle struct {
	ctx   context.Context
	store *storage.Store
	hh    *hhtest.Server
	llm   *llmtest.Server
	llmc  *llm.Client
	reg   *prometheus.Registry
	sent  *recorder
	svc   *vacancy.Service
	cfg   vacancy.Config
	// breakerOpen is how long the LLM breaker stays open once tripped,
	// after breakerFailures failures in a row; llmCfg configures the
	// client (its concurrency, say).
	breakerOpen     time.Duration
	breakerFailures int
	llmCfg          llm.Config
	// hhCfg adjusts the HH client of each service (its breaker, say).
	hhCfg func(*hh.Config)
}

type option func(*bundle)

func withConfig(c vacancy.Config) option { return func(b *bundle) { b.cfg = c } }

func withBreakerOpenFor(d time.Duration) option { return func(b *bundle) { b.breakerOpen = d } }

// withLLM sets the LLM client's configuration and how many failures in a
// row open its breaker.
func withLLM(cfg llm.Config, breakerFailures int) option {
	return func(b *bundle) { b.llmCfg, b.breakerFailures = cfg, breakerFailures }
}

// withHHBreaker sets the HH client's breaker hold and its cap.
func withHHBreaker(openFor, maxOpen time.Duration) option {
	return func(b *bundle) {
		b.hhCfg = func(c *hh.Config) { c.BreakerOpenFor, c.BreakerMaxOpen = openFor, maxOpen }
	}
}

// withHH replaces the fake HH with one built with opts.
func withHH(opts ...hhtest.Option) option {
	return func(b *bundle) {
		b.hh.Close()
		b.hh = hhtest.New(opts...)
	}
}

func setup(t *testing.T, opts ...option) *bundle {
	t.Helper()
	b := &bundle{
		ctx:   context.Background(),
		store: storagetest.New(t),
		hh:    hhtest.New(),
		llm:   testkit.Closing(t, llmtest.New()),
		reg:   prometheus.NewRegistry(),
		sent:  &recorder{ids: map[int64]int{}},
		cfg:   vacancy.Config{ClaimLease: 30 * time.Second},

		breakerOpen:     time.Minute,
		breakerFailures: 3,
	}
	for _, o := range opts {
		o(b)
	}
	t.Cleanup(b.hh.Close)
	b.llmc = domaintest.LLM(t, b.llm, b.llmCfg, llm.WithBreaker(b.breakerFailures, b.breakerOpen))
	b.svc = b.newService(t)
	return b
}

// newService builds another Service over the same world, as a second
// replica would.
func (b *bundle) newService(t *testing.T) *vacancy.Service {
	t.Helper()
	return b.serviceWith(t, b.store.Matches())
}

// serviceWith is newService over matches, a wrapper of the matches' store
// that plays some fault.
func (b *bundle) serviceWith(t *testing.T, matches vacancy.Matches) *vacancy.Service {
	t.Helper()
	cfg := hh.Config{URL: b.hh.URL(), UserAgent: "switchboard-test/1.0 (dev@example.com)", Log: slog.New(slog.DiscardHandler)}
	if b.hhCfg != nil {
		b.hhCfg(&cfg)
	}
	src, err := hh.New(cfg)
	require.NoError(t, err)
	t.Cleanup(src.Close)
	reg := b.reg
	if b.svc != nil {
		reg = prometheus.NewRegistry()
	}
	svc, err := vacancy.NewService(b.cfg, vacancy.Deps{
		Matches: matches, Profiles: b.store.Users(), Searches: b.store.Searches(), Applications: b.store.Applications(),
		Source: src, Notifier: b.sent, Registerer: reg, AboutData: storage.AboutData,
		LLM: llm.Port{Client: b.llmc, Label: "vacancy_relevance"},
		Log: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	return svc
}

// relevant scripts the LLM to judge every vacancy relevant with score 80.
func (b *bundle) relevant() *llmtest.Rule {
	return b.llm.On(llmtest.SystemContains("screen job vacancies")).Named("relevance").
		ReplyJSON(map[string]any{"is_relevant": true, "score": 80, "reasons": []string{"Go matches"}, "matched_skills": []string{"Go"}})
}

// setupRelevant is setup with the LLM judging every vacancy relevant:
// where most processing tests start.
func setupRelevant(t *testing.T) *bundle {
	t.Helper()
	b := setup(t)
	b.relevant()
	return b
}

func (b *bundle) user(t *testing.T, id int64, profile string) {
	t.Helper()
	_, err := b.store.Users().Upsert(b.ctx, domain.User{ID: id, FirstName: "U" + strconv.FormatInt(id, 10)})
	require.NoError(t, err)
	require.NoError(t, b.svc.SetProfile(b.ctx, id, profile))
}

func (b *bundle) search(t *testing.T, userID int64, text string) vacancy.Search {
	t.Helper()
	p, err := vacancy.ParseParams(text)
	require.NoError(t, err)
	s, added, err := b.svc.AddSearch(b.ctx, userID, p)
	require.NoError(t, err)
	b.svc.Begin(b.ctx, s, added)
	return s
}

// vacancies generates n vacancies titled "Golang developer <id>" with
// moderate experience, oldest first, ids from first.
func vacancies(n int, first int64, seed int64) []hhtest.Vacancy {
	// Published recently, like a live search: recovery and backfills look
	// at the last two days only.
	newest := time.Now().Add(-time.Hour).Truncate(time.Second)
	vs := hhtest.Generate(n, hhtest.GenOptions{Seed: seed, FirstID: first, Newest: newest})
	for i := range vs {
		vs[i].Name = "Golang developer " + vs[i].ID
		vs[i].Experience = hhtest.Between1And3
	}
	return vs
}

// status reads a match's status straight from the table.
func (b *bundle) status(t *testing.T, userID, vacancyID int64) vacancy.Status {
	t.Helper()
	var s string
	err := b.store.Pool().QueryRow(b.ctx, `SELECT status FROM vacancy_matches WHERE user_id = $1 AND vacancy_id = $2`,
		userID, vacancyID).Scan(&s)
	if err != nil {
		return "(none)"
	}
	return vacancy.Status(s)
}

func (b *bundle) counts(t *testing.T) map[vacancy.Status]int {
	t.Helper()
	return domaintest.Counts[vacancy.Status](t, b.ctx, b.store.Pool(), `SELECT status, count(*) FROM vacancy_matches GROUP BY status`)
}

func (b *bundle) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	_, err := b.store.Pool().Exec(b.ctx, q, args...)
	require.NoError(t, err)
}

// recorder stands in for the bot: it renders a card per match (recording
// what it was asked to render), and deliverOutbox plays the outbox's
// sender, delivering through the real outbox statements.
type recorder struct {
	mu       sync.Mutex
	rendered []vacancy.CardData
	ids      map[int64]int // deliveries per match
	last     []vacancy.CardData
	next     int
	news     []vacancy.FirstNews
	// refusals are the searches told HH refused them, in order.
	refusals []vacancy.Refusal
	// followUps are the reminders rendered, in order.
	followUps []vacancy.FollowUp
	// blank makes Card render nothing, as a renderer's bug would.
	blank bool
	// panicOn makes Card panic for that vacancy, as a renderer's bug
	// on one card would.
	panicOn int64
}

// SearchNews records the news and writes a note for it.
func (r *recorder) SearchNews(n vacancy.FirstNews) []domain.Message {
	domaintest.Record(&r.mu, &r.news, n)
	return []domain.Message{{ChatID: n.Search.UserID, Kind: domain.KindReply, Ref: n.Search.ID,
		Text: fmt.Sprintf("news of %q failed=%v", n.Search.Params.String(), n.Failed)}}
}

// SearchRefused records the refusal and writes a note for it.
func (r *recorder) SearchRefused(rf vacancy.Refusal) []domain.Message {
	domaintest.Record(&r.mu, &r.refusals, rf)
	return []domain.Message{{ChatID: rf.Search.UserID, Kind: domain.KindReply, Ref: rf.Search.ID,
		Text: fmt.Sprintf("%q refused by HH: %v", rf.Search.Params.String(), rf.Args)}}
}

// refused returns the refusals told so far.
func (r *recorder) refused() []vacancy.Refusal {
	return domaintest.Recorded(&r.mu, &r.refusals)
}

// told returns the news recorded so far.
func (r *recorder) told() []vacancy.FirstNews {
	return domaintest.Recorded(&r.mu, &r.news)
}

// FollowUp records the reminder and writes a note for it.
func (r *recorder) FollowUp(f vacancy.FollowUp) []domain.Message {
	domaintest.Record(&r.mu, &r.followUps, f)
	return []domain.Message{{ChatID: f.Application.Match.UserID, Kind: domain.KindReply, Ref: f.Application.Match.ID,
		Text: fmt.Sprintf("how did %q go? %s, %d days", f.Application.Vacancy.Title, f.Application.Match.Status, f.Days)}}
}

func (r *recorder) Card(d vacancy.CardData) []domain.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rendered = append(r.rendered, d)
	if d.Vacancy.ID == r.panicOn {
		panic(fmt.Sprintf("a renderer's bug on the card of vacancy %d", d.Vacancy.ID))
	}
	if r.blank {
		return nil
	}
	return []domain.Message{{ChatID: d.UserID, Kind: domain.KindVacancy, Ref: d.MatchID,
		Text: fmt.Sprintf("<b>%s</b>\nScore: %d/100", d.Vacancy.Title, d.Verdict.Score)}}
}

// deliveries are the cards Telegram accepted, in order.
func (r *recorder) deliveries() []vacancy.CardData {
	return domaintest.Recorded(&r.mu, &r.last)
}

func (r *recorder) duplicates() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for id, n := range r.ids {
		if n > 1 {
			out = append(out, fmt.Sprintf("match %d delivered %d times", id, n))
		}
	}
	return out
}

// deliverOutbox delivers every pending outbox row as a sender whose
// Telegram always accepts would, through the store's claim and delivery
// statements (which make a carded match SENT_TO_USER), and returns how
// many it delivered.
func (b *bundle) deliverOutbox(t *testing.T) int {
	t.Helper()
	n, err := b.deliverOnce(b.ctx)
	require.NoError(t, err)
	return n
}

func (b *bundle) deliverOnce(ctx context.Context) (int, error) {
	n := 0
	for {
		rows, err := b.store.Outbox().Claim(ctx, "", 100, 30*time.Second)
		if err != nil || len(rows) == 0 {
			return n, err
		}
		for _, row := range rows {
			r := b.sent
			r.mu.Lock()
			r.next++
			msgID := r.next
			if row.Kind == domain.KindVacancy {
				r.ids[row.Ref]++
				for _, d := range r.rendered {
					if d.MatchID == row.Ref {
						r.last = append(r.last, d)
						break
					}
				}
			}
			r.mu.Unlock()
			ok, err := b.store.Outbox().Delivered(ctx, row, msgID)
			if err != nil {
				return n, err
			}
			if !ok {
				return n, fmt.Errorf("outbox row %d: claim lost", row.ID)
			}
			n++
		}
	}
}

// runSender delivers the outbox every few milliseconds until ctx ends, as
// the app's senders would next to the workers.
func (b *bundle) runSender(t *testing.T, ctx context.Context) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := b.deliverOnce(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("deliver outbox: %v", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// cards counts a match's outbox rows of kind vacancy, by state.
func (b *bundle) cards(t *testing.T, matchID int64) map[string]int {
	t.Helper()
	return domaintest.Counts[string](t, b.ctx, b.store.Pool(),
		`SELECT state, count(*) FROM outbox WHERE kind = 'vacancy' AND ref = $1 GROUP BY state`, matchID)
}

func (b *bundle) matchID(t *testing.T, userID, vacancyID int64) int64 {
	t.Helper()
	var id int64
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT id FROM vacancy_matches WHERE user_id = $1 AND vacancy_id = $2`,
		userID, vacancyID).Scan(&id))
	return id
}

func id(v hhtest.Vacancy) int64 {
	n, err := strconv.ParseInt(v.ID, 10, 64)
	if err != nil {
		panic(err)
	}
	return n
}
