package vacancy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"switchboard/domain"
)

// Search is one user's saved search.
type Search struct {
	ID        int64
	UserID    int64
	Params    Params
	Key       string
	CreatedAt time.Time
	// State is SearchActive or SearchRefused; Refused names the arguments
	// HH refused (HH's bad_argument values), for /searches. Only OfUser
	// reads them.
	State   SearchState
	Refused []string
}

// SearchState is a saved search's place: active (discovered on every
// fetch) or refused (HH refused its parameters: set aside, asked of HH no
// more, until the user saves it again). Each move is one conditional
// UPDATE naming the old state.
type SearchState string

const (
	SearchActive  SearchState = "active"
	SearchRefused SearchState = "refused"
)

// Refusal is what a user hears when HH refuses their search's parameters
// and the search is set aside.
type Refusal struct {
	Search Search
	Lang   string
	// Args are the parameters HH named (empty: it named none).
	Args []string
}

// Match is a (user, vacancy) pair moving through the status table.
type Match struct {
	ID          int64
	UserID      int64
	VacancyID   int64
	Status      Status
	PublishedAt time.Time
	Verdict     *Verdict // nil until judged
	SkipReason  string
	// Attempts counts the match's claims (a worker's, a paste's), whatever
	// each came to. Failures counts the turns that ran and failed (the
	// FailureReason of the latest), which Config.MaxFailures bounds; Waits
	// the turns given back unjudged (the WaitReason of the latest), which
	// nothing bounds: a wait is its cause's, not the match's.
	Attempts      int
	Failures      int
	FailureReason string
	Waits         int
	WaitReason    string
	ChatID        int64
	MessageID     int
	SentAt        time.Time
	CreatedAt     time.Time
	UpdatedAt     time.Time
	// ClaimToken identifies the worker's claim; changes by a worker name it
	// so a worker whose lease ran out cannot overwrite its successor's work.
	ClaimToken string
}

// Change is what a transition writes besides the status.
type Change struct {
	Verdict    *Verdict
	SkipReason string
	ChatID     int64
	MessageID  int
	SentAt     time.Time
	// Token, when set, must equal the match's claim token.
	Token string
	// Detail, when set, is the vacancy's detail just fetched from HH,
	// stored with the transition (one round trip for both).
	Detail *Vacancy
	// Card is the vacancy's card, rendered before the move and written to
	// the outbox with it, only if it happens. QUEUED → ANALYZED carries
	// it: the transition then also releases the claim, since the outbox
	// owns the delivery from there (the card's delivery hook moves the
	// match ANALYZED → SENT_TO_USER when Telegram accepts it).
	Card []domain.Message
	// Announce, set when the match is one a new search's first news waits
	// on (Claim.FirstNews), renders "nothing new yet": if the move ends
	// the last such match without a card, the note is written to the
	// outbox in the transition's transaction.
	Announce domain.Render[[]FirstNews]
	// PastedBy, when set, is the private message whose pasted link this
	// move's card answers: recorded on the match, so that message handled
	// again finds its card written (link.go).
	PastedBy int
	// Pace, on QUEUED → ANALYZED instead of Card, decides inside the
	// transition's transaction, from the user's rhythm read there, whether
	// the card goes now, held (quiet hours, the daily cap) or not at all
	// (the match waits for a digest); rhythm.go.
	Pace *Pace
}

// Claim is a claimed match with what processing it needs.
type Claim struct {
	Match   Match
	Vacancy Vacancy
	// DetailFetchedAt is when the vacancy's detail was last fetched (zero: never).
	DetailFetchedAt time.Time
	// DetailStale: the detail is missing or older than DetailFresh, by the
	// database's clock. DetailMine: this claim took the vacancy's fetch
	// lease, so this worker asks HH; stale and not mine means another
	// worker is asking, and the match waits for its answer.
	DetailStale, DetailMine bool
	User                    Recipient
	// FirstNews: the match was queued by the first discovery of a search
	// whose user has not heard its outcome yet, so ending it without a
	// card may be what tells them there is nothing new (Change.Announce).
	FirstNews bool
	// TookOver: the claim before this one ended without its worker closing
	// it (the worker died, or its lease ran out mid-turn); the claim counted
	// it as a wait, ReasonLeaseLost.
	TookOver bool
}

// Failure is a claimed match's turn that ran and failed, as Matches.Fail
// records it.
type Failure struct {
	// Reason is ReasonLLMError, ReasonInvalidJSON or ReasonHHUnavailable.
	Reason string
	// Max is the failures at which the match turns SKIPPED (Reason its
	// skip reason); below it the match is put back QUEUED, claimable
	// again after RetryAfter times its failures.
	Max        int
	RetryAfter time.Duration
	// Detail, when set, is the vacancy's detail fetched in the turn,
	// stored with it (ending the vacancy's fetch lease).
	Detail *Vacancy
}

// Recipient is the match's user as processing sees them.
type Recipient struct {
	ID      int64
	Lang    string
	Profile string
	// Exclusions keep vacancies from the user: discovery gives them
	// none they exclude, and a match queued before one was added is
	// dropped unjudged when claimed.
	Exclusions Exclusions
	// Liked are the user's applications and NotInterested the titles of
	// the vacancies they turned down (Config.TasteExamples of each): their
	// taste, for the relevance prompt. Liked come those that got an offer
	// first, then those that got an invitation, each kind newest first.
	Liked         []Liked
	NotInterested []string
	// Senior: one of the user's searches asks for more than six years of
	// experience, so such vacancies are not dropped for them.
	Senior bool
	// Paced: the user has set a rhythm of their own (/settings), which the
	// move to ANALYZED reads under its lock. Without one the card goes at
	// once, as DefaultRhythm says, with no read and no lock: a rhythm set
	// while the match was being judged applies from the next card.
	Paced bool
}

// Group is every search sharing one search_key: one discovery serves all
// their users.
type Group struct {
	Key    string
	Params Params
}

// Markers are discovery_state: how far a search_key has been swept.
type Markers struct {
	// LastSeenMaxID is the largest vacancy id ever seen; it only grows.
	LastSeenMaxID int64
	// LastCompleteSweepBeforeID is the deepest (smallest) id a run reached,
	// so that later runs keep sweeping down from there.
	LastCompleteSweepBeforeID int64
	UpdatedAt                 time.Time
}

// NewMatch is a match discovery creates in QUEUED.
type NewMatch struct {
	UserID    int64
	VacancyID int64
}

// Stats is what /vacancies shows a user.
type Stats struct {
	// Counts are the matches by status, but for the relevant ones routed
	// to the digests: ForDigest wait for the next digest, InDigest are
	// listed in one and not opened.
	Counts              map[Status]int
	ForDigest, InDigest int
	LastFetch           time.Time // zero: never
	QueueTotal          int       // everyone's
	// LLMDown: the model is not answering, its breaker open or probing
	// after failures (a probe out is not an answer yet), so the matches
	// wait QUEUED.
	LLMDown bool
	// LLMRefused: the provider refuses the model or key, so matches wait
	// QUEUED; LLMReason says what to fix (or, with the breaker open for
	// failures, why); empty while the LLM answers.
	LLMRefused bool
	LLMReason  string
	// HHBlocked: HH blocks our requests (captcha, forbidden, 429) and
	// its breaker holds them back; HHReason says how.
	HHBlocked bool
	HHReason  string
}

// SkippedMatch is a recovery candidate.
type SkippedMatch struct {
	Match Match
	// Vacancy holds what Exclusions.Excludes reads: title, snippet, employer
	// and the description (HTML, empty if never fetched).
	Vacancy    Vacancy
	Exclusions Exclusions
}

// ClaimOptions says which match Matches.Claim may take.
type ClaimOptions struct {
	ClaimLease time.Duration // how long the claim holds
	Taste      int           // taste examples of each kind
	// FreshOnly, while HH blocks us, passes over QUEUED matches whose
	// vacancy's detail is older than DetailFresh: only those judged
	// without HH are taken.
	FreshOnly   bool
	DetailFresh time.Duration
	// FetchLease is how long the fetch lease of the vacancy's detail, which a
	// claim may take, holds.
	FetchLease time.Duration
	// Claimer names the replica in its claim (storage.Liveness).
	Claimer string
}

// Searches is the users' saved searches, the search keys discovery
// serves (discovery.go), and what each user filters out of them: ban words
// and hidden employers (service.go); storage.Searches implements it.
type Searches interface {
	// Add saves a search with its backfill; for a key discovered before,
	// that is the search's first discovery, and announce's messages go to
	// the outbox with it.
	Add(ctx context.Context, s Search, backfill int, since time.Time, announce domain.Render[[]FirstNews]) (Search, bool, int, error)
	OfUser(ctx context.Context, userID int64) ([]Search, error)
	Delete(ctx context.Context, userID, id int64) (bool, error)
	// KeyGroups and KeyGroup read the keys of active searches: a refused
	// search is not discovered.
	KeyGroups(ctx context.Context) ([]Group, error)
	KeyGroup(ctx context.Context, key string) (Group, error)
	// SetAside moves the key's active searches to refused with HH's
	// argument names; a search still owed its first news counts as told.
	// tell's messages for the searches it moved go to the outbox in the
	// same transaction, so each user hears it once; n is how many moved.
	SetAside(ctx context.Context, key string, args []string, tell domain.Render[[]Refusal]) (n int, err error)
	BanWords(ctx context.Context, userID int64) ([]string, error)
	AddBanWord(ctx context.Context, userID int64, word string, max int) (bool, error)
	RemoveBanWord(ctx context.Context, userID int64, word string) (bool, error)
	// HideEmployer keeps the employer's vacancies from the user (false if
	// they were hidden already); at max hidden it adds nothing and says so
	// with ErrTooManyHidden. ShowEmployer undoes one by its id and names
	// it (false if it was not hidden); HiddenEmployers lists them by name.
	HideEmployer(ctx context.Context, userID int64, employer string, max int) (bool, error)
	ShowEmployer(ctx context.Context, userID, id int64) (string, bool, error)
	HiddenEmployers(ctx context.Context, userID int64) ([]HiddenEmployer, error)
}

// Profiles is the users' profiles, which every judgement and letter reads
// (service.go, skills.go, letter.go); storage.Users implements it.
type Profiles interface {
	Profile(ctx context.Context, userID int64) (string, error)
	SetProfile(ctx context.Context, userID int64, profile string) error
}

// Matches is the matches' storage: a user's match of a vacancy through the
// status table, and what the matches are made of and from: the vacancies'
// details, discovery's runs, a new search's first news, the users' rhythms
// and digests; storage.Matches implements it.
type Matches interface {
	// Stats is /vacancies' counts (service.go).
	Stats(ctx context.Context, userID int64) (Stats, error)

	// The worker (worker.go). Claim claims the next match with its
	// vacancy and user, taste examples (up to taste of each) included: a
	// QUEUED match. An ANALYZED match is never claimed: its card is in the
	// outbox.
	Claim(ctx context.Context, o ClaimOptions) (Claim, bool, error)
	NextLeaseExpiry(ctx context.Context) (time.Time, bool, error)
	// PutBack ends a claim with the match still QUEUED and unjudged,
	// claimable again after after (by the database's clock); with a reason
	// the turn counts as a wait for it (Match.Waits), and without one
	// (a pasted link's claim, which is no turn of the queue's) as nothing.
	PutBack(ctx context.Context, id int64, token string, after time.Duration, reason string) error
	// Fail counts a failed turn (Match.Failures) and ends its claim, in one
	// conditional UPDATE naming QUEUED and the token: at f.Max failures
	// the match moves to SKIPPED with f.Reason, below it it stays QUEUED
	// for a retry. ok is false when the claim was no longer token's (and
	// nothing was counted).
	Fail(ctx context.Context, id int64, token string, f Failure) (m Match, ok bool, err error)
	// Delete deletes a QUEUED or SKIPPED match (a ban word; recovery too);
	// with announce, a new search whose first matches all ended so hears
	// its note in the same transaction.
	Delete(ctx context.Context, id int64, token string, announce domain.Render[[]FirstNews]) (bool, error)
	// SaveVacancyDetail stores a detail and ends the vacancy's fetch lease
	// (which Claim takes: one worker asks HH for a detail at a time);
	// ReleaseVacancyDetail ends it with nothing fetched.
	SaveVacancyDetail(ctx context.Context, v Vacancy) error
	ReleaseVacancyDetail(ctx context.Context, id int64) error
	// ArchiveVacancy moves every open match of the vacancy to IN_ARCHIVE
	// in one statement: how many left each status. A new search whose
	// first matches all ended so hears announce's note, in the same
	// transaction.
	ArchiveVacancy(ctx context.Context, id int64, announce domain.Render[[]FirstNews]) (map[Status]int, error)

	// The card's buttons (service.go) move a match; they, a digest's cards
	// (rhythm.go) and a letter's press (letter.go) read it.
	Transition(ctx context.Context, id int64, from, to Status, ch Change) (Match, bool, error)
	WithVacancy(ctx context.Context, id int64) (Match, Vacancy, error)

	// Skipped is recovery's scan of skipped matches (recovery.go).
	Skipped(ctx context.Context, since time.Time, afterID int64, limit int) ([]SkippedMatch, error)
	// Skills counts, over the user's matches judged relevant and created
	// since, the vacancies and those listing key skills, and the top
	// skills by the number of vacancies listing them (case folded), each
	// under the spelling most of them used (skills.go).
	Skills(ctx context.Context, userID int64, since time.Time, top int) (matched, withSkills int, skills []SkillCount, err error)

	// Discovery (discovery.go): what a search key has collected, and a
	// run's new matches.
	DiscoveryMarkers(ctx context.Context, key string) (Markers, error)
	UnseenVacancies(ctx context.Context, key string, ids []int64) (map[int64]bool, error)
	// SaveDiscovery saves a run and, for the key's searches not told of
	// their first discovery yet, writes announce's messages to the outbox
	// in the same transaction (each search is told once).
	SaveDiscovery(ctx context.Context, key string, found []Vacancy, hits []int64, m Markers,
		pick func([]Recipient) []NewMatch, announce domain.Render[[]FirstNews]) (int, error)

	// A new search's first news (firstnews.go, discovery.go).
	// FirstFetchFailed tells the key's searches that wait for their first
	// discovery, once, that it failed and will be retried.
	FirstFetchFailed(ctx context.Context, key string, announce domain.Render[[]FirstNews]) error
	// FirstNewsGroups lists the keys whose first discovery is owed: with a
	// search pending for longer than grace, or retrying.
	FirstNewsGroups(ctx context.Context, grace time.Duration) ([]Group, error)
	// SettleFirstNews writes announce's note for every search waiting on
	// first matches that all ended without a card.
	SettleFirstNews(ctx context.Context, announce domain.Render[[]FirstNews]) error

	// The users' rhythms and digests (rhythm.go).
	// Rhythm is the user's rhythm, DefaultRhythm if they never set one.
	Rhythm(ctx context.Context, userID int64) (Rhythm, error)
	// TuneRhythm changes the user's rhythm with tune under a lock on it,
	// returning what was stored.
	TuneRhythm(ctx context.Context, userID int64, tune func(Rhythm) (Rhythm, error)) (Rhythm, error)
	// DigestsWaiting lists the users with matches waiting for a digest.
	DigestsWaiting(ctx context.Context) ([]DigestWaiting, error)
	// WriteDigest records slot as handled for the user (only if later than
	// the last one) and, with matches judged by then waiting, lists them
	// in a new digest whose first page tell renders into the outbox, all
	// in one transaction. ok is false when the slot was handled already.
	WriteDigest(ctx context.Context, userID int64, slot time.Time, tell domain.Render[Digest]) (Digest, bool, error)
	// DigestPage reads one page of a digest (domain.ErrNotFound if none).
	DigestPage(ctx context.Context, id int64, page int) (Digest, error)
	// OpenDigestCard writes the card of a match a digest lists, once:
	// false when the match is not a listed one of the user's.
	OpenDigestCard(ctx context.Context, userID, matchID int64, card []domain.Message) (bool, error)

	// A vacancy whose link the user pasted (link.go).
	// Linked reads the user's match of the vacancy with the vacancy
	// (Found false: none), whether a live claim holds it and whether the
	// detail is older than detailFresh.
	Linked(ctx context.Context, userID, vacancyID int64, detailFresh time.Duration) (LinkedMatch, error)
	// Recipient reads the user as a judgement needs them: language,
	// profile and taste examples (up to taste of each kind).
	Recipient(ctx context.Context, userID int64, taste int) (Recipient, error)
	// ClaimLinked claims the user's match of v for judging now, for lease:
	// with from "" it creates it QUEUED (and v's row, if new); with from
	// QUEUED it claims it; with NEW or SKIPPED it takes it to QUEUED, the
	// steps recovery takes back to back, and claims it. ok is false when
	// the match exists already (from ""), is no longer in from, or a live
	// claim holds it.
	ClaimLinked(ctx context.Context, userID int64, v Vacancy, from Status, lease time.Duration) (Match, bool, error)
	// ShowCard writes a card of a match that is still in status, with no
	// change of status, recording pastedBy (0: none), the message that
	// asked for it; false when it is not in status, or when pastedBy is
	// the message whose paste wrote its card already.
	ShowCard(ctx context.Context, id int64, status Status, pastedBy int, card []domain.Message) (bool, error)
	// MarkPasted records pastedBy as the message that asked for match id's
	// card while a worker judges it (the worker's card answers it).
	MarkPasted(ctx context.Context, id int64, pastedBy int) error
}

// LLM is the model as this workflow needs it.
type LLM interface {
	// JSON asks for a JSON answer and decodes it into out, calling
	// out.Validate if it has one. Its errors are the domain's LLM classes:
	// domain.ErrLLMInvalidAnswer for a malformed or invalid answer,
	// ErrLLMRefused for a call refused for the model or key, ErrLLMDown
	// for one the breaker turned away unrun, ErrLLMBusy for one
	// rate-limited.
	JSON(ctx context.Context, system, prompt string, out any) error
	// Open reports whether the circuit breaker is refusing calls: the
	// workers then claim nothing, and the matches wait QUEUED.
	Open() bool
	// Refused reports whether the provider refuses the model or the key
	// (model not found, 401/403): a misconfiguration, not an outage, so
	// matches wait QUEUED for the fix instead of turning SKIPPED.
	Refused() bool
	// Health says whether a refusal of the model or key holds (the
	// breaker open or probing) and why calls are refused or failing (""
	// while healthy): /vacancies shows it.
	Health() (refused bool, reason string)
}

// CardData is what a vacancy card is rendered from.
type CardData struct {
	MatchID int64
	UserID  int64
	Lang    string
	Vacancy Vacancy
	Verdict Verdict
	// Status is the match's when its card is shown again (a pasted link
	// of a vacancy the user decided on): the card then shows the decision
	// as a press leaves it. Empty, ANALYZED or SENT_TO_USER: awaiting it.
	Status Status
}

// FirstNews is what a user hears of a new search's first discovery.
type FirstNews struct {
	Search Search
	Lang   string
	// Queued is how many matches the discovery gave the user: their cards
	// follow. Failed: HH did not answer; discovery retries.
	Queued int
	Failed bool
}

// Notifier renders vacancy cards; the bot implements it. It sends nothing:
// the card is written to the outbox with the match's QUEUED → ANALYZED
// transition, and the outbox's senders deliver it (a failed send is
// retried there; a recipient who blocked the bot has the card dropped and
// the match stays ANALYZED).
type Notifier interface {
	// Card is the vacancy's message to the user (domain.KindVacancy, Ref
	// the match, ChatID the user) with its Applied / Not interested / Open
	// buttons; nil if it cannot be rendered.
	Card(d CardData) []domain.Message
	// SearchNews tells the user of a new search's first discovery that
	// brought nothing new (or failed, n.Failed), and that the search is
	// watched.
	SearchNews(n FirstNews) []domain.Message
	// SearchRefused tells the user that HH refused their search's
	// parameters (which ones), that it is set aside, and how to fix it.
	SearchRefused(r Refusal) []domain.Message
	// FollowUp asks the user how an application went, with the buttons of
	// its next steps; written to the outbox with the record that it was
	// sent (pipeline.go).
	FollowUp(f FollowUp) []domain.Message
	// Digest is a digest's message (domain.KindDigest, Ref the digest):
	// a page of its vacancies with a button each for the card.
	Digest(d Digest) []domain.Message
	// Zone is the time zone the user reads times in, which their quiet
	// hours and digest times are in.
	Zone(u domain.User) *time.Location
}

// Config tunes the workflow; zero values take the defaults.
type Config struct {
	// FetchLimit is VACANCY_FETCH_LIMIT: unseen vacancies one discovery
	// run collects per search_key.
	FetchLimit int
	// PerPage is HH's page size for discovery (at most 100).
	PerPage int
	// RecoveryWindow is VACANCY_RECOVERY_WINDOW.
	RecoveryWindow time.Duration
	// ClaimLease is how long a worker holds a match; it must outlast one
	// processing (HH detail, two LLM attempts, writing the card).
	ClaimLease time.Duration
	// MaxFailures is how many of a match's turns may fail (the LLM's error
	// or invalid answer, HH's error for the vacancy) before it is SKIPPED,
	// for recovery; a failed turn below it is retried after RetryAfter
	// times the failures so far. Turns given back unjudged (waits) never
	// count: a model down for a day fails no match.
	MaxFailures int
	RetryAfter  time.Duration
	// Claimer names this replica in its claims (storage.Liveness): once it
	// is seen dead they are claimable again at once, not after ClaimLease.
	Claimer string
	// Workers is how many matches one replica processes at once; see
	// WorkersFor. The LLM client bounds calls in flight itself.
	Workers int
	// TasteExamples is how many recent Applied and Not interested titles
	// go into the prompt as examples of the user's taste.
	TasteExamples int
	// DetailFresh skips the HH detail request when another user's match
	// fetched it this recently.
	DetailFresh time.Duration
	// SweepInterval wakes idle workers even without a signal (QUEUE_INTERVAL).
	SweepInterval time.Duration
	// FollowUp is APPLICATION_FOLLOW_UP: how long an application waits
	// without news before a reminder asks how it went.
	FollowUp time.Duration
}

// WorkersFor is the worker count for an LLM concurrency: two workers per
// LLM slot, so that while one waits for the model the other fetches HH or
// writes PostgreSQL, and no slot idles while its worker does those.
func WorkersFor(llmConcurrency int) int { return 2 * max(1, llmConcurrency) }

// DefaultMaxFailures is Config.MaxFailures unless set.
const DefaultMaxFailures = 3

// DefaultTasteExamples is Config.TasteExamples unless set; the prune job
// keeps that many of each user's latest decisions of each kind.
const DefaultTasteExamples = 5

func (c Config) withDefaults() Config {
	domain.OrDefault(&c.FetchLimit, 100)
	if c.PerPage <= 0 || c.PerPage > MaxPerPage {
		c.PerPage = MaxPerPage
	}
	domain.OrDefault(&c.RecoveryWindow, 48*time.Hour)
	domain.OrDefault(&c.ClaimLease, 2*time.Minute)
	domain.OrDefault(&c.MaxFailures, DefaultMaxFailures)
	domain.OrDefault(&c.RetryAfter, 15*time.Second)
	domain.OrDefault(&c.Workers, 2)
	domain.OrDefault(&c.TasteExamples, DefaultTasteExamples)
	domain.OrDefault(&c.DetailFresh, time.Hour)
	domain.OrDefault(&c.SweepInterval, 10*time.Minute)
	domain.OrDefault(&c.FollowUp, DefaultFollowUp)
	return c
}

// Deps are the workflow's collaborators.
type Deps struct {
	Matches      Matches
	Profiles     Profiles
	Searches     Searches
	Applications Applications
	Source       Source
	LLM          LLM
	Notifier     Notifier
	Clock        clockwork.Clock
	Log          *slog.Logger
	Registerer   prometheus.Registerer

	// CalendarClock is the clock of the people's calendar: when an
	// application was reported and a follow-up is due (pipeline.go), quiet
	// hours, the daily cap and digest times (rhythm.go). CLOCK_START's
	// clock, so a test can restart the binary a week later or just before
	// a digest; the workers' leases and waits stay on Clock and the
	// database's now(). Nil: Clock.
	CalendarClock clockwork.Clock

	// AboutData reports whether a storage error is the database refusing
	// what was written (storage.AboutData): a match whose turn wrote such
	// a thing is set aside (ReasonRefused) rather than retried. Nil: no
	// error is taken to be about the data.
	AboutData func(error) bool
}

// Service runs the vacancy workflow: the user-facing operations the bot
// calls, discovery, the queue workers and recovery.
type Service struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
	m    *metrics
	// queue is the match queue's worker loops (worker.go: ProcessNext).
	queue *domain.Workers
	// fresh carries search_keys saved for the first time, so Run discovers
	// them at once rather than at the next fetch tick.
	fresh chan string
}

// NewService builds the workflow. It starts nothing; see Run.
func NewService(cfg Config, deps Deps) (*Service, error) {
	if deps.Matches == nil || deps.Profiles == nil || deps.Searches == nil || deps.Applications == nil ||
		deps.Source == nil || deps.LLM == nil || deps.Notifier == nil {
		return nil, errors.New("vacancy: Matches, Profiles, Searches, Applications, Source, LLM and Notifier are required")
	}
	m, log, err := domain.Prepare("vacancy", &deps.Clock, &deps.Log, &deps.Registerer, newMetrics)
	if err != nil {
		return nil, err
	}
	deps.CalendarClock = cmp.Or(deps.CalendarClock, deps.Clock)
	s := &Service{cfg: cfg.withDefaults(), deps: deps, log: log, m: m, fresh: make(chan string, 64)}
	s.queue = &domain.Workers{
		Name: "vacancy queue", Next: s.ProcessNext, Expiry: deps.Matches.NextLeaseExpiry,
		Sweep: s.cfg.SweepInterval, Clock: deps.Clock, Log: s.log, Panics: m.panics,
		Hold: func(idle bool) time.Duration {
			switch {
			case !idle && (deps.LLM.Refused() || deps.LLM.Open()):
				// Nothing to judge with: leave the matches QUEUED (claiming
				// them would only put them back, each a wait) until the
				// model is there or its breaker lets a probe through.
				return refusedWait
			case idle && deps.Source.Holding():
				// HH blocks us: what waits for a detail is not claimable
				// now; look again when the breaker may let a probe out.
				return refusedWait
			}
			return 0
		},
	}
	return s, nil
}

// Limits on user input.
const MaxProfile = 4000

// ErrForbidden: the presser is not the match's owner.
var ErrForbidden = errors.New("not your vacancy")

// ErrAlreadyDecided: the match is not awaiting the user's decision (a
// second press, or a press after another status was reported).
var ErrAlreadyDecided = errors.New("vacancy already decided")

// ErrNotUndoable: the match is not Not interested (any more), so there is
// nothing to undo.
var ErrNotUndoable = errors.New("nothing to undo")

// inputError refuses the input with key, naming the limit the key is about.
func inputError(key string) *domain.InputError {
	limits := map[string]int{
		"profile.error_too_long": MaxProfile,
		"ban.error_too_long":     MaxBanWordLen,
		"ban.error_too_many":     MaxBanWords,
		"hide.error_too_many":    MaxHiddenEmployers,
	}
	return &domain.InputError{Key: key, Args: map[string]any{"Max": limits[key]}}
}

// Profile returns the user's profile ("" if none).
func (s *Service) Profile(ctx context.Context, userID int64) (string, error) {
	return s.deps.Profiles.Profile(ctx, userID)
}

// SetUserProfile stores the profile the LLM judges relevance against.
func (s *Service) SetProfile(ctx context.Context, userID int64, profile string) error {
	profile = strings.TrimSpace(profile)
	if utf8.RuneCountInString(profile) > MaxProfile {
		return inputError("profile.error_too_long")
	}
	return s.deps.Profiles.SetProfile(ctx, userID, profile)
}

// Added is what saving a search did.
type Added struct {
	// Created is false when the user already had this search.
	Created bool
	// NothingNew: the key was already discovered and none of its recent
	// vacancies is new for the user. The search's first news is recorded
	// as told, and the reply to /search must say it: a separate note would
	// be queued in the save's transaction, ahead of that reply.
	NothingNew bool
	// Queued is how many recent vacancies of a followed key were queued
	// for the user (Begin wakes the workers for them).
	Queued int
}

// AddSearch saves a search. A search_key someone already follows brings
// the user its recent vacancies; a new one is discovered right away. Both
// start when the caller calls Begin. Saving again a search HH refused
// brings it back (Created): HH is asked again.
func (s *Service) AddSearch(ctx context.Context, userID int64, p Params) (Search, Added, error) {
	since := s.deps.Clock.Now().Add(-s.cfg.RecoveryWindow)
	var added Added
	inReply := func(news []FirstNews) []domain.Message {
		for _, n := range news {
			added.NothingNew = added.NothingNew || !n.Failed && n.Queued == 0
		}
		return nil
	}
	sr, created, queued, err := s.deps.Searches.Add(ctx, Search{UserID: userID, Params: p, Key: p.Key()}, s.cfg.FetchLimit, since, inReply)
	added.Created, added.Queued = created, queued
	return sr, added, err
}

// Begin starts the work on a search AddSearch created: the workers wake
// for the matches it queued, and a key nobody followed before is
// discovered at once. It is the caller's to call after its reply is
// queued, so that the user reads "Saved" before any card or note of the
// search; a replica that dies in between leaves the key to the fetch and
// first-news ticks.
func (s *Service) Begin(ctx context.Context, sr Search, added Added) {
	if !added.Created {
		return
	}
	if added.Queued > 0 {
		s.Wake()
	}
	if m, err := s.deps.Matches.DiscoveryMarkers(ctx, sr.Key); err == nil && m.UpdatedAt.IsZero() {
		select {
		case s.fresh <- sr.Key:
		default: // a burst of new searches: the fetch tick catches the rest
		}
	}
}

// announce renders the first news that needs words: a first discovery that
// queued nothing for the user, or failed. Cards are news enough.
func (s *Service) announce(news []FirstNews) []domain.Message {
	n := s.deps.Notifier
	var out []domain.Message
	for _, fn := range news {
		if fn.Failed || fn.Queued == 0 {
			out = append(out, n.SearchNews(fn)...)
		}
	}
	return out
}

// Searches lists the user's searches.
func (s *Service) Searches(ctx context.Context, userID int64) ([]Search, error) {
	return s.deps.Searches.OfUser(ctx, userID)
}

// DeleteSearch removes one of the user's searches; another user's id is
// reported as not found.
func (s *Service) DeleteSearch(ctx context.Context, userID, id int64) (bool, error) {
	return s.deps.Searches.Delete(ctx, userID, id)
}

// Ban adds an exclusion word or phrase; it returns the normalized form and
// whether it was new.
func (s *Service) Ban(ctx context.Context, userID int64, raw string) (string, bool, error) {
	norm := NormalizeBanWord(raw)
	if key := validBanWord(raw, norm); key != "" {
		return "", false, inputError(key)
	}
	added, err := s.deps.Searches.AddBanWord(ctx, userID, norm, MaxBanWords)
	if err != nil {
		return "", false, err
	}
	return norm, added, nil
}

// Unban removes an exclusion word; false if the user had no such word.
func (s *Service) Unban(ctx context.Context, userID int64, raw string) (string, bool, error) {
	norm := NormalizeBanWord(raw)
	if norm == "" {
		return "", false, inputError("ban.error_empty")
	}
	ok, err := s.deps.Searches.RemoveBanWord(ctx, userID, norm)
	return norm, ok, err
}

// Bans lists the user's exclusion words.
func (s *Service) Bans(ctx context.Context, userID int64) ([]string, error) {
	return s.deps.Searches.BanWords(ctx, userID)
}

// HiddenEmployer is an employer a user hid, with the id its button names.
type HiddenEmployer struct {
	ID   int64
	Name string
}

// MaxHiddenEmployers bounds one user's hidden employers: /bans lists each
// with a button that shows it again.
const MaxHiddenEmployers = 50

// HideEmployer hides the employer of a vacancy the user was shown: none of
// its vacancies, found later or still queued, reaches them again. The card
// pressed is the first of them: one still awaiting the user's answer is
// marked Not interested. hidden is false when the employer was hidden
// already. Only the match's owner may; a vacancy with no employer named
// gives ErrNoEmployer.
func (s *Service) HideEmployer(ctx context.Context, userID, matchID int64) (m Match, v Vacancy, hidden bool, err error) {
	m, v, err = s.deps.Matches.WithVacancy(ctx, matchID)
	if err != nil {
		return m, v, false, fmt.Errorf("hide employer: %w", err)
	}
	if m.UserID != userID {
		return m, v, false, ErrForbidden
	}
	if strings.TrimSpace(v.Employer) == "" {
		return m, v, false, ErrNoEmployer
	}
	// Kept as Exclusions compare it: a name past what the table holds is
	// clipped on both sides.
	if hidden, err = s.deps.Searches.HideEmployer(ctx, userID, EmployerName(v.Employer), MaxHiddenEmployers); err != nil {
		return m, v, false, err
	}
	if m.Status != SentToUser && m.Status != Analyzed {
		return m, v, hidden, nil
	}
	dm, dv, err := s.Decide(ctx, userID, matchID, NotInterested)
	switch {
	case err == nil:
		return dm, dv, hidden, nil
	case errors.Is(err, ErrAlreadyDecided):
		// Another press decided it a moment ago: the hiding stands.
		return dm, v, hidden, nil
	default:
		return m, v, hidden, err
	}
}

// ShowEmployer undoes a hiding by its id (only the user's own); the name,
// and false if it was not hidden (any more).
func (s *Service) ShowEmployer(ctx context.Context, userID, id int64) (string, bool, error) {
	return s.deps.Searches.ShowEmployer(ctx, userID, id)
}

// HiddenEmployers lists the employers the user hid, by name.
func (s *Service) HiddenEmployers(ctx context.Context, userID int64) ([]HiddenEmployer, error) {
	return s.deps.Searches.HiddenEmployers(ctx, userID)
}

// Stats is what /vacancies shows.
func (s *Service) Stats(ctx context.Context, userID int64) (Stats, error) {
	st, err := s.deps.Matches.Stats(ctx, userID)
	if err != nil {
		return Stats{}, err
	}
	st.LLMRefused, st.LLMReason = s.deps.LLM.Health()
	// Health names a reason while the breaker is open or probing, not
	// only while it refuses calls outright (Open).
	st.LLMDown = s.deps.LLM.Open() || st.LLMReason != ""
	st.HHBlocked, st.HHReason = s.deps.Source.Blocked()
	return st, nil
}

// Decide records the user's button: SENT_TO_USER → APPLIED or
// NOT_INTERESTED. Only the owner may decide, and only once.
func (s *Service) Decide(ctx context.Context, userID, matchID int64, to Status) (Match, Vacancy, error) {
	if to != Applied && to != NotInterested {
		return Match{}, Vacancy{}, fmt.Errorf("decide: %w: %s", ErrIllegalTransition, to)
	}
	m, v, err := s.deps.Matches.WithVacancy(ctx, matchID)
	// The card reaches the user a moment before the outbox's sender
	// records the delivery (ANALYZED → SENT_TO_USER); a quick press waits
	// for that instead of bouncing.
	for wait := 0; err == nil && m.Status == Analyzed && m.UserID == userID && wait < 20; wait++ {
		t := s.deps.Clock.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return m, v, ctx.Err()
		case <-t.Chan():
		}
		m, v, err = s.deps.Matches.WithVacancy(ctx, matchID)
	}
	if err != nil {
		return Match{}, Vacancy{}, fmt.Errorf("decide: %w", err)
	}
	if err := ownedIn(m, userID, SentToUser, ErrAlreadyDecided); err != nil {
		return m, v, err
	}
	var moved Match
	var ok bool
	if to == Applied {
		// Applying starts the pipeline: its times come with the move.
		var a Application
		a, ok, err = s.move(ctx, m, to)
		moved = a.Match
	} else {
		moved, ok, err = s.transition(ctx, m, to, Change{})
	}
	if err != nil {
		return m, v, fmt.Errorf("decide: %w", err)
	}
	if !ok {
		// Someone (a double press racing this one) moved it first.
		return m, v, ErrAlreadyDecided
	}
	return moved, v, nil
}

// Undo takes back the user's Not interested (a mis-tap, or a change of
// mind): the match is SENT_TO_USER again, its card awaiting a decision,
// and its title no longer teaches the model what the user skips. Only the
// match's owner may; a match in any other status, or one a racing press
// moved first, is ErrNotUndoable. An employer hidden from the card stays
// hidden (/bans shows it again).
func (s *Service) Undo(ctx context.Context, userID, matchID int64) (Match, Vacancy, error) {
	m, v, err := s.deps.Matches.WithVacancy(ctx, matchID)
	if err != nil {
		return Match{}, Vacancy{}, fmt.Errorf("undo: %w", err)
	}
	if err := ownedIn(m, userID, NotInterested, ErrNotUndoable); err != nil {
		return m, v, err
	}
	moved, ok, err := s.transition(ctx, m, SentToUser, Change{})
	if err != nil {
		return m, v, fmt.Errorf("undo: %w", err)
	}
	if !ok {
		return m, v, ErrNotUndoable
	}
	return moved, v, nil
}

// ownedIn is the check both of a card's decisions (Decide, and Undo its
// inverse) make before they move the match, so that they refuse alike:
// the presser must own it (else ErrForbidden) and it must be in status
// want (else refused, the decision's own "nothing to do").
func ownedIn(m Match, userID int64, want Status, refused error) error {
	if m.UserID != userID {
		return ErrForbidden
	}
	if m.Status != want {
		return refused
	}
	return nil
}

// transition is the one way a match changes status: the table is checked
// first, then one conditional UPDATE names the old status.
func (s *Service) transition(ctx context.Context, m Match, to Status, ch Change) (Match, bool, error) {
	if err := checkTransition(m.Status, to); err != nil {
		s.log.Error("refused vacancy transition", "match", m.ID, "from", m.Status, "to", to)
		return m, false, err
	}
	moved, ok, err := s.deps.Matches.Transition(ctx, m.ID, m.Status, to, ch)
	if err != nil {
		return m, false, fmt.Errorf("match %d %s → %s: %w", m.ID, m.Status, to, err)
	}
	if ok {
		s.m.transitions.WithLabelValues(string(m.Status), string(to)).Inc()
	}
	return moved, ok, nil
}

// Wake tells idle workers there is queued work (after a fetch, a
// recovery, or a notification from another replica).
func (s *Service) Wake() { s.queue.Wake() }

// ErrTooManyBans: the user is at MaxBanWords.
var ErrTooManyBans = inputError("ban.error_too_many")

// ErrTooManyHidden: the user hides MaxHiddenEmployers employers already.
var ErrTooManyHidden = inputError("hide.error_too_many")

// ErrNoEmployer: the vacancy names no employer (HH hides some), so there is
// nobody to hide.
var ErrNoEmployer = errors.New("vacancy names no employer")
