package vacancy

import (
	"context"
	"errors"
	"fmt"

	"switchboard/domain"
)

// Pasted is what pasting a vacancy's link did.
type Pasted int

const (
	// PastedCard: the vacancy's card was written to the outbox.
	PastedCard Pasted = iota + 1
	// PastedOnItsWay: a worker (or another paste) is judging the match
	// right now; its own card follows from there.
	PastedOnItsWay
)

// ErrLinkNoProfile: the user has no profile, so there is nothing to judge
// a pasted vacancy against.
var ErrLinkNoProfile = &domain.InputError{Key: "link.no_profile"}

// ErrNotJudged: the LLM could not judge the vacancy now (its breaker is
// open, it failed, it refuses the model or key, or its answer was invalid
// twice); nothing was kept, and a paste a minute later tries again.
var ErrNotJudged = errors.New("vacancy not judged now")

// pasteAttempts bounds Paste's rounds of reading the match and acting on
// it: each lost round means another actor moved the match meanwhile.
const pasteAttempts = 3

// Paste judges the vacancy whose link the user pasted against their
// profile at once and writes its card to the outbox, even when no search
// of theirs found it. They asked now, so neither their rhythm (digests,
// quiet hours, the cap), nor their ban words, hidden employers or
// seniority hold it back, and a verdict of not relevant gets its card too
// (its score and reasons say why): the match goes QUEUED → ANALYZED with
// the card in the same statement, as a worker's does, and the card's
// delivery makes it SENT_TO_USER, so its buttons work as any card's.
//
// A match the user has already with a verdict is shown again from it, as
// it stands (decided, applied, not suitable), without the LLM or HH. One
// without a verdict (NEW, QUEUED, SKIPPED) is claimed, judged and moved
// under the claim; one a live claim holds is being judged: PastedOnItsWay.
// Every write is conditional on the state read, so a paste racing a
// worker, recovery or another paste (on any replica) loses cleanly and
// looks again.
//
// messageID (0: unknown) is the private message that carried the link.
// Its card, however written, is written once: the card rides in the
// match's own statement, which cannot carry the update's outbox origin,
// so the match records the message (LinkedMatch.PastedBy), and the same
// message handled again (its replica died before the update's done-mark)
// finds its card written and writes nothing. Another message with the
// same link is a new question and gets the card again.
//
// Errors: ErrLinkNoProfile; ErrArchived, ErrHHBlocked or ErrUnavailable
// (wrapped) when HH does not give the vacancy; ErrNotJudged (wrapping the
// cause) when the LLM does not judge it; anything else is the database's.
func (s *Service) Paste(ctx context.Context, userID, vacancyID int64, messageID int) (Pasted, error) {
	// A verdict and detail got in a lost round are kept for the next one:
	// the LLM is asked once per paste at most.
	var j linkJudgement
	for range pasteAttempts {
		l, err := s.deps.Matches.Linked(ctx, userID, vacancyID, s.cfg.DetailFresh)
		if err != nil {
			return 0, fmt.Errorf("paste vacancy %d: %w", vacancyID, err)
		}
		var done bool
		var out Pasted
		switch st := l.Match.Status; {
		case l.Found && messageID != 0 && l.PastedBy == messageID:
			// This message's card is written: its update runs again.
			return PastedCard, nil
		case !l.Found:
			out, done, err = s.judgeLinked(ctx, userID, vacancyID, messageID, l, &j)
		case st == InArchive:
			return 0, fmt.Errorf("paste vacancy %d: match %d: %w", vacancyID, l.Match.ID, ErrArchived)
		case st == New || st == Queued || st == Skipped:
			if l.Claimed {
				// The worker's card answers this message: recorded, so
				// that the message handled again, when the worker has
				// written it, does not write a second.
				if messageID != 0 {
					if err := s.deps.Matches.MarkPasted(ctx, l.Match.ID, messageID); err != nil {
						return 0, fmt.Errorf("paste vacancy %d: %w", vacancyID, err)
					}
				}
				return PastedOnItsWay, nil
			}
			out, done, err = s.judgeLinked(ctx, userID, vacancyID, messageID, l, &j)
		case l.Match.Verdict != nil:
			out, done, err = s.showLinked(ctx, userID, messageID, l)
		default:
			// A decided match without a verdict (a row from before
			// verdicts were kept): nothing to show it from.
			return 0, fmt.Errorf("paste vacancy %d: match %d in %s has no verdict", vacancyID, l.Match.ID, st)
		}
		if err != nil || done {
			return out, err
		}
	}
	// Moved under us on every round: somebody is busy with it.
	return PastedOnItsWay, nil
}

// linkJudgement is what a paste got from HH and the LLM, kept across its
// rounds.
type linkJudgement struct {
	vacancy Vacancy
	fresh   *Vacancy // the detail fetched now, stored with the move
	verdict *Verdict
}

// showLinked writes the card of a match that has a verdict again, as it
// stands: awaiting a decision (ANALYZED, SENT_TO_USER) with the card's
// buttons, or decided with what a press leaves on it, recording messageID
// as the paste that wrote it. done is false when the match moved
// meanwhile (or that message's card was written meanwhile: the next round
// reads so).
func (s *Service) showLinked(ctx context.Context, userID int64, messageID int, l LinkedMatch) (Pasted, bool, error) {
	m := l.Match
	u, err := s.deps.Matches.Recipient(ctx, userID, 0)
	if err != nil {
		return 0, false, fmt.Errorf("show match %d: %w", m.ID, err)
	}
	d := CardData{MatchID: m.ID, UserID: userID, Lang: u.Lang, Vacancy: l.Vacancy, Verdict: *m.Verdict}
	if m.Status != Analyzed && m.Status != SentToUser {
		d.Status = m.Status
	}
	card := s.deps.Notifier.Card(d)
	if len(card) == 0 {
		return 0, false, fmt.Errorf("show match %d: no card rendered", m.ID)
	}
	ok, err := s.deps.Matches.ShowCard(ctx, m.ID, m.Status, messageID, card)
	if err != nil {
		return 0, false, err
	}
	return PastedCard, ok, nil
}

// judgeLinked judges a vacancy the user has no verdict on (l.Found
// false: no match of it; else a NEW, QUEUED or SKIPPED one) and writes its
// card with the move to ANALYZED, recording messageID as the paste that
// wrote it, under a claim of its own so no worker judges it meanwhile.
// done is false when the match moved or was claimed before the claim.
func (s *Service) judgeLinked(ctx context.Context, userID, vacancyID int64, messageID int, l LinkedMatch, j *linkJudgement) (Pasted, bool, error) {
	var from Status
	if l.Found {
		from = l.Match.Status
	}
	u, err := s.deps.Matches.Recipient(ctx, userID, s.cfg.TasteExamples)
	if err != nil {
		return 0, false, fmt.Errorf("judge linked vacancy %d: %w", vacancyID, err)
	}
	if u.Profile == "" {
		return 0, false, ErrLinkNoProfile
	}
	if j.verdict == nil && (s.deps.LLM.Open() || s.deps.LLM.Refused()) {
		// Not worth asking HH: the model would not be asked.
		return 0, false, fmt.Errorf("%w: the LLM's breaker is open or it refuses us", ErrNotJudged)
	}
	if j.vacancy.ID == 0 {
		if l.Found && !l.DetailStale {
			// Another user's match (or this one's last try) fetched it
			// within DetailFresh.
			j.vacancy = l.Vacancy
		} else if err := s.fetchLinked(ctx, vacancyID, l.Found, j); err != nil {
			return 0, false, err
		}
	}

	m, ok, err := s.deps.Matches.ClaimLinked(ctx, userID, j.vacancy, from, s.cfg.ClaimLease)
	if err != nil || !ok {
		return 0, false, err
	}
	giveUp := func() { s.giveUpLinked(ctx, m, from) }

	if j.verdict == nil {
		verdict, err := s.judge(ctx, u, j.vacancy)
		if err != nil {
			giveUp()
			if ctx.Err() != nil {
				return 0, false, fmt.Errorf("judge linked vacancy %d: %w", j.vacancy.ID, err)
			}
			return 0, false, fmt.Errorf("%w: vacancy %d: %w", ErrNotJudged, j.vacancy.ID, err)
		}
		j.verdict = &verdict
	}
	card := s.deps.Notifier.Card(CardData{MatchID: m.ID, UserID: userID, Lang: u.Lang, Vacancy: j.vacancy, Verdict: *j.verdict})
	if len(card) == 0 {
		giveUp()
		return 0, false, fmt.Errorf("judge linked vacancy %d: no card rendered", j.vacancy.ID)
	}
	// The judgement is paid for: record it even if the user's request is
	// gone. Not paced: the user asked now.
	rctx, cancel := detached(ctx)
	defer cancel()
	_, moved, err := s.transition(rctx, m, Analyzed, Change{Verdict: j.verdict, Token: m.ClaimToken, Detail: j.fresh, Card: card, PastedBy: messageID})
	if err != nil {
		giveUp()
		return 0, false, err
	}
	if !moved {
		// The claim ran out and somebody else holds the match now.
		return PastedOnItsWay, true, nil
	}
	return PastedCard, true, nil
}

// giveUpLinked ends a paste's claim of m, not judged: a match the paste
// created (from is "") goes, since a link pasted is a question, not a
// search, and a failure leaves nothing for the workers; one that was there
// before goes back as it was claimed.
func (s *Service) giveUpLinked(ctx context.Context, m Match, from Status) {
	rctx, cancel := detached(ctx)
	defer cancel()
	if from == "" {
		if _, err := s.deps.Matches.Delete(rctx, m.ID, m.ClaimToken, nil); err != nil {
			s.log.Error("delete a linked match not judged", "match", m.ID, "err", err)
		}
		return
	}
	// No wait counted: a paste is the user's question, not a turn of the
	// queue's.
	if err := s.deps.Matches.PutBack(rctx, m.ID, m.ClaimToken, 0, ""); err != nil {
		s.log.Error("release a linked match not judged", "match", m.ID, "err", err)
	}
	s.Wake()
}

// fetchLinked asks HH for the vacancy's detail. A vacancy HH no longer
// serves takes every open match of it (any user's, as a worker's fetch
// does) to IN_ARCHIVE when it has any (known).
func (s *Service) fetchLinked(ctx context.Context, vacancyID int64, known bool, j *linkJudgement) error {
	d, err := s.deps.Source.Vacancy(ctx, vacancyID)
	switch {
	case err == nil:
		j.vacancy, j.fresh = d, &d
		return nil
	case errors.Is(err, ErrArchived):
		if known {
			rctx, cancel := detached(ctx)
			defer cancel()
			moved, aerr := s.deps.Matches.ArchiveVacancy(rctx, vacancyID, s.announce)
			if aerr != nil {
				s.log.Error("archive vacancy", "vacancy", vacancyID, "err", aerr)
			}
			for from, n := range moved {
				s.m.transitions.WithLabelValues(string(from), string(InArchive)).Add(float64(n))
			}
		}
		return fmt.Errorf("linked vacancy %d: %w", vacancyID, err)
	case errors.Is(err, ErrHHBlocked), errors.Is(err, ErrUnavailable):
		return fmt.Errorf("linked vacancy %d: %w", vacancyID, err)
	}
	// Anything else HH did (a body we cannot read, a cancelled request)
	// is, to the user, HH not answering.
	return fmt.Errorf("linked vacancy %d: %w: %w", vacancyID, ErrUnavailable, err)
}
