package vacancy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"switchboard/domain"
)

// Mode is how a user's relevant vacancies reach them.
type Mode string

const (
	// ModeInstant: a card per vacancy as soon as it is judged (the default).
	ModeInstant Mode = "instant"
	// ModeDigest: one message at each of the user's digest times listing
	// what was judged relevant since, best first; a card on request.
	ModeDigest Mode = "digest"
)

// Span is a stretch of the local day, in minutes after midnight: [From,
// To), crossing midnight when From > To. From == To is no span at all.
type Span struct{ From, To int }

// On reports whether the span covers any time.
func (q Span) On() bool { return q.From != q.To }

// contains reports whether the local minute m is within the span.
func (q Span) contains(m int) bool {
	switch {
	case !q.On():
		return false
	case q.From < q.To:
		return m >= q.From && m < q.To
	default:
		return m >= q.From || m < q.To
	}
}

// Rhythm is a user's pace: instant cards or digests, quiet hours and a
// daily cap, all in the user's time zone. Changes apply to vacancies
// judged after them; a card already held keeps its time.
type Rhythm struct {
	Mode Mode
	// DigestTimes are minutes after local midnight, ascending, at least one.
	DigestTimes []int
	// DigestSize is how many vacancies a digest's page lists.
	DigestSize int
	// Quiet hours: cards and digests due inside wait for their end.
	Quiet Span
	// DailyCap is how many cards a local day takes in instant mode (0:
	// no cap); the rest wait for the next day. Nothing is dropped.
	DailyCap int
}

// DefaultRhythm is the rhythm of a user who never changed it.
func DefaultRhythm() Rhythm {
	return Rhythm{Mode: ModeInstant, DigestTimes: []int{9 * 60, 18 * 60}, DigestSize: 5}
}

// The choices /settings offers; a press naming anything else is refused.
var (
	DigestTimePresets = []int{7 * 60, 9 * 60, 13 * 60, 18 * 60, 22 * 60}
	DigestSizePresets = []int{3, 5, 10}
	QuietPresets      = []Span{{22 * 60, 8 * 60}, {23 * 60, 7 * 60}}
	CapPresets        = []int{10, 20, 50}
)

// Knob names what one /settings press changes.
type Knob int

const (
	KnobMode  Knob = iota + 1 // value: 0 instant, 1 digest
	KnobTime                  // value: a DigestTimePresets entry, toggled
	KnobSize                  // value: a DigestSizePresets entry
	KnobQuiet                 // value: 0 off, else 1 + an index of QuietPresets
	KnobCap                   // value: 0 off, else a CapPresets entry
	// KnobTimeOn and KnobTimeOff (value: a DigestTimePresets entry) set
	// a digest time on or off, and a second press of the same changes
	// nothing: a press handled again after a crash, or pressed twice on a
	// message not yet edited, leaves what the first one set. KnobTime is
	// the toggle that /settings messages sent before them still carry.
	KnobTimeOn
	KnobTimeOff
)

// ErrBadKnob: a press naming a value /settings never offers (forged data).
var ErrBadKnob = errors.New("not a setting /settings offers")

// Tuned is r with the knob set to v: the one place a press becomes a
// rhythm, so every value that reaches the database is one on offer.
func (r Rhythm) Tuned(k Knob, v int) (Rhythm, error) {
	r.DigestTimes = slices.Clone(r.DigestTimes)
	switch k {
	case KnobMode:
		if v != 0 && v != 1 {
			return r, ErrBadKnob
		}
		r.Mode = map[int]Mode{0: ModeInstant, 1: ModeDigest}[v]
	case KnobTime, KnobTimeOn, KnobTimeOff:
		if !slices.Contains(DigestTimePresets, v) {
			return r, ErrBadKnob
		}
		i := slices.Index(r.DigestTimes, v)
		switch {
		case i >= 0 && k != KnobTimeOn:
			if len(r.DigestTimes) == 1 {
				return r, &domain.InputError{Key: "rhythm.error_last_time"}
			}
			r.DigestTimes = slices.Delete(r.DigestTimes, i, i+1)
		case i < 0 && k != KnobTimeOff:
			r.DigestTimes = append(r.DigestTimes, v)
			slices.Sort(r.DigestTimes)
		}
	case KnobSize:
		if !slices.Contains(DigestSizePresets, v) {
			return r, ErrBadKnob
		}
		r.DigestSize = v
	case KnobQuiet:
		if v < 0 || v > len(QuietPresets) {
			return r, ErrBadKnob
		}
		r.Quiet = Span{}
		if v > 0 {
			r.Quiet = QuietPresets[v-1]
		}
	case KnobCap:
		if v != 0 && !slices.Contains(CapPresets, v) {
			return r, ErrBadKnob
		}
		r.DailyCap = v
	default:
		return r, ErrBadKnob
	}
	return r, nil
}

// at is the instant of local minute m on t's local day, shifted by days.
// A minute a DST change skips comes out past the gap, as time.Date does.
func at(t time.Time, days, m int, loc *time.Location) time.Time {
	y, mo, d := t.In(loc).Date()
	return time.Date(y, mo, d+days, m/60, m%60, 0, 0, loc)
}

// minuteOf is t's minute of the local day.
func minuteOf(t time.Time, loc *time.Location) int {
	l := t.In(loc)
	return l.Hour()*60 + l.Minute()
}

// Awake is the first moment at or after t outside quiet hours: t itself,
// or the end of the quiet hours it falls in.
func (r Rhythm) Awake(t time.Time, loc *time.Location) time.Time {
	if !r.Quiet.contains(minuteOf(t, loc)) {
		return t
	}
	for days := 0; ; days++ {
		if end := at(t, days, r.Quiet.To, loc); end.After(t) {
			return end
		}
	}
}

// CardAt is when a card judged at now may go in instant mode: now, or the
// end of quiet hours, or — when the day already has DailyCap cards —
// the next local day's first waking moment with room. cards are when the
// user's cards went or will go, those from the start of now's local day
// on (earlier ones are ignored).
func (r Rhythm) CardAt(now time.Time, loc *time.Location, cards []time.Time) time.Time {
	t := r.Awake(now, loc)
	if r.DailyCap <= 0 {
		return t
	}
	for {
		start, end := at(t, 0, 0, loc), at(t, 1, 0, loc)
		n := 0
		for _, c := range cards {
			if !c.Before(start) && c.Before(end) {
				n++
			}
		}
		if n < r.DailyCap {
			return t
		}
		// Finite: each day skipped holds DailyCap of the cards.
		t = r.Awake(end, loc)
	}
}

// digestTimes are the digest slots of the local days from..to around t,
// each moved out of quiet hours.
func (r Rhythm) digestTimes(t time.Time, loc *time.Location, from, to int) []time.Time {
	var out []time.Time
	for d := from; d <= to; d++ {
		for _, m := range r.DigestTimes {
			out = append(out, r.Awake(at(t, d, m, loc), loc))
		}
	}
	return out
}

// DigestSlot is the latest digest time at or before now (a time inside
// quiet hours moved to their end), zero if none in the last two days.
// A digest is owed for it when the slot is later than the last one
// handled and vacancies judged by then wait.
func (r Rhythm) DigestSlot(now time.Time, loc *time.Location) time.Time {
	var best time.Time
	for _, t := range r.digestTimes(now, loc, -2, 0) {
		if !t.After(now) && t.After(best) {
			best = t
		}
	}
	return best
}

// NextDigest is the first digest time after now.
func (r Rhythm) NextDigest(now time.Time, loc *time.Location) time.Time {
	var best time.Time
	for _, t := range r.digestTimes(now, loc, 0, 2) {
		if t.After(now) && (best.IsZero() || t.Before(best)) {
			best = t
		}
	}
	return best
}

// Pacing is what a relevant vacancy's way to its user is decided from,
// read in the transaction that makes the match ANALYZED, under a lock on
// the user's rhythm, so two matches judged at once count each other.
type Pacing struct {
	User   domain.User
	Rhythm Rhythm
	// Cards are when the user's cards went or will go, from Change.Pace's
	// Since on; read only when the rhythm has a daily cap.
	Cards []time.Time
}

// Paced is the decision: the match waits for a digest (Digest, no card),
// or its card goes at At (the time it counts under the cap; the card's
// messages are held until then when it is later than now).
type Paced struct {
	Digest bool
	At     time.Time
	Card   []domain.Message
	// held: the card waits (quiet hours, the cap), for the metric.
	held bool
}

// Pace is a relevant match's move to ANALYZED as the worker hands it over:
// Decide runs inside the transition's transaction with the user's Pacing.
type Pace struct {
	// Since bounds Pacing.Cards: the earliest start of the user's day.
	Since time.Time
	// Decide is pure: the repository calls it before the move, so that
	// the move writes where the card is in its own UPDATE.
	Decide func(Pacing) Paced
	// Moved is called once the move went through with what Decide said.
	Moved func(Paced)
}

// heldLane is the outbox lane of cards held until at: out of the chat's
// main lane, whose head would otherwise hold the user's replies behind
// it, and one lane per moment, so a card held to a later moment never
// holds one due earlier.
func heldLane(at time.Time) string { return "held:" + strconv.FormatInt(at.Unix(), 10) }

// pace is the worker's Pace for a relevant match and its rendered card.
func (s *Service) pace(card []domain.Message) *Pace {
	now := s.deps.CalendarClock.Now()
	return &Pace{Since: now.Add(-48 * time.Hour), Decide: func(p Pacing) Paced {
		// Read now again: the transaction may have waited for the lock.
		now := s.deps.CalendarClock.Now()
		if p.Rhythm.Mode == ModeDigest {
			return Paced{Digest: true, At: now}
		}
		when := p.Rhythm.CardAt(now, s.deps.Notifier.Zone(p.User), p.Cards)
		wait := when.Sub(now)
		if wait <= 0 {
			return Paced{At: now, Card: card}
		}
		held := make([]domain.Message, len(card))
		for i, m := range card {
			m.Delay, m.Lane = wait, heldLane(when)
			held[i] = m
		}
		return Paced{At: when, Card: held, held: true}
	}, Moved: func(p Paced) {
		if p.held {
			s.m.held.Inc()
		}
	}}
}

// DigestWaiting is a user whose matches wait for a digest.
type DigestWaiting struct {
	User   domain.User
	Rhythm Rhythm
	// Last is the latest slot handled (zero: none).
	Last time.Time
}

// Digest is one digest message: a page of the matches it lists.
type Digest struct {
	ID     int64
	UserID int64
	Lang   string
	Slot   time.Time
	// Total is how many matches the digest lists; Page (from 0) of Size
	// of them are Items, best score first.
	Total, Page, Size int
	Items             []DigestItem
}

// Pages is how many pages the digest has.
func (d Digest) Pages() int { return max(1, (d.Total+d.Size-1)/max(d.Size, 1)) }

// DigestItem is one vacancy of a digest.
type DigestItem struct {
	MatchID int64
	Status  Status
	Score   int
	Vacancy Vacancy
}

// Rhythm is the user's rhythm (/settings).
func (s *Service) Rhythm(ctx context.Context, userID int64) (Rhythm, error) {
	return s.deps.Matches.Rhythm(ctx, userID)
}

// Tune changes one knob of the user's rhythm (a /settings press).
func (s *Service) Tune(ctx context.Context, userID int64, k Knob, v int) (Rhythm, error) {
	return s.deps.Matches.TuneRhythm(ctx, userID, func(r Rhythm) (Rhythm, error) {
		return r.Tuned(k, v)
	})
}

// NextDigest is when the user's next digest is due, in their zone (zero
// in instant mode).
func (s *Service) NextDigest(u domain.User, r Rhythm) time.Time {
	if r.Mode != ModeDigest {
		return time.Time{}
	}
	return r.NextDigest(s.deps.CalendarClock.Now(), s.deps.Notifier.Zone(u))
}

// Digests writes the digests due now (the vacancy-digest job): for each
// user with matches waiting, the latest digest slot in their zone, if not
// handled yet; a user back in instant mode gets what still waits at once,
// outside quiet hours. Safe on several replicas and twice: a slot is
// recorded once (WriteDigest).
func (s *Service) Digests(ctx context.Context) error {
	due, err := s.deps.Matches.DigestsWaiting(ctx)
	if err != nil {
		return fmt.Errorf("digests: %w", err)
	}
	var errs []error
	for _, w := range due {
		now := s.deps.CalendarClock.Now()
		loc := s.deps.Notifier.Zone(w.User)
		slot := w.Rhythm.DigestSlot(now, loc)
		if w.Rhythm.Mode != ModeDigest {
			if slot = w.Rhythm.Awake(now, loc); slot.After(now) {
				continue
			}
		}
		if slot.IsZero() || !slot.After(w.Last) {
			continue
		}
		lang := w.User.Lang()
		d, ok, err := s.deps.Matches.WriteDigest(ctx, w.User.ID, slot.Truncate(time.Second), func(d Digest) []domain.Message {
			d.Lang = lang
			return s.deps.Notifier.Digest(d)
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("digest of user %d: %w", w.User.ID, err))
			continue
		}
		if ok && d.Total > 0 {
			s.m.digests.Inc()
			s.log.Info("vacancy digest written", "user", w.User.ID, "digest", d.ID, "matches", d.Total, "slot", slot)
		}
	}
	return errors.Join(errs...)
}

// DigestPage is one page of one of the user's digests.
func (s *Service) DigestPage(ctx context.Context, userID, digestID int64, page int) (Digest, error) {
	d, err := s.deps.Matches.DigestPage(ctx, digestID, max(page, 0))
	if err != nil {
		return Digest{}, fmt.Errorf("digest %d: %w", digestID, err)
	}
	if d.UserID != userID {
		return Digest{}, ErrForbidden
	}
	return d, nil
}

// ErrCardSent: the digest's vacancy already has its card in the chat.
var ErrCardSent = errors.New("the vacancy's card was sent already")

// OpenCard writes the full card of a vacancy one of the user's digests
// lists (the digest's button), once. Its delivery makes the match
// SENT_TO_USER as any card's does.
func (s *Service) OpenCard(ctx context.Context, u domain.User, matchID int64) error {
	m, v, err := s.deps.Matches.WithVacancy(ctx, matchID)
	if err != nil {
		return fmt.Errorf("open card: %w", err)
	}
	if m.UserID != u.ID {
		return ErrForbidden
	}
	if m.Status != Analyzed || m.Verdict == nil {
		return ErrCardSent
	}
	card := s.deps.Notifier.Card(CardData{MatchID: m.ID, UserID: m.UserID, Lang: u.Lang(), Vacancy: v, Verdict: *m.Verdict})
	if len(card) == 0 {
		return fmt.Errorf("open card: match %d: no card rendered", m.ID)
	}
	ok, err := s.deps.Matches.OpenDigestCard(ctx, u.ID, m.ID, card)
	if err != nil {
		return fmt.Errorf("open card: %w", err)
	}
	if !ok {
		return ErrCardSent
	}
	return nil
}
