package dispatch

// The distribution step's rules. A step (Orders.NextOffer) runs in
// one transaction holding the order's row; storage reads the facts below
// and writes what these functions decide, each write a conditional
// statement naming the old state. Kept pure so that every branch (round
// escalation, busy masters, owed orders, the unassignable report) is tested
// without a database.

import (
	"math"
	"time"
)

// maxPicks bounds the picks one step retries after its insert found the
// master taken; past it the order is left waiting for the recheck.
const maxPicks = 3

// StepFacts is what a step reads of its order once it holds the row.
type StepFacts struct {
	// Open: the order has an open offer (SENT or VIEWED).
	Open bool
	// OfferedInRound1: some master was offered the order in round 1.
	OfferedInRound1 bool
	// Parked: the order is owed a step that the end of its own offers
	// will not bring (orders.parked): a step found a master busy with
	// another order's offer (the end of some offer brings it), or, after
	// the unassignable report, a master who may take it came or a step
	// found the city closed.
	Parked bool
}

// Owed is whether the order is owed a distribution step: it has no open
// offer, and it was not reported unassignable since its last offer ended,
// or it is parked. An offer clears the report, and no offer of the
// order ends while it has none open, so a report stands for every offer
// before it; nothing has to mark an order when its offer expires or is
// declined, and those writes, one per offer, touch no row of orders.
func (f StepFacts) Owed(o Order) bool {
	return !f.Open && (o.Unassignable.IsZero() || f.Parked)
}

// Pick is one search for a candidate in a round.
type Pick struct {
	// Master is the free candidate best ranked (RankOf) and, among
	// equals, idle longest; zero if none.
	Master int64
	// Busy: no free candidate, but a master the round has not reached
	// yet is locked by another transaction or busy with another order's
	// offer, so the round is not over.
	Busy bool
}

// StepPlan is what a step writes and reports.
type StepPlan struct {
	Outcome Outcome
	// Round is the order's round after the step.
	Round int
	// Master is whom to offer the order (Outcome Offered).
	Master int64
	// Park: the order is marked parked (StepFacts.Parked).
	Park bool
	// MarkUnassignable: unassignable_at is set (if not yet) and the
	// parked mark cleared, the order reported or re-settled as
	// unassignable.
	MarkUnassignable bool
	// Settle: the new offer settles the order: its round becomes Round,
	// the unassignable and parked marks are cleared.
	Settle bool
}

// Admit decides whether a step goes on once storage has tried to lock the
// order (locked false: another transaction holds it, and the order is
// left to that transaction). done true ends the step with plan.
func Admit(o Order, locked bool, gate Gate) (plan StepPlan, done bool) {
	switch {
	case !locked:
		return StepPlan{Outcome: Busy, Round: o.Round}, true
	case o.State != Searching:
		return StepPlan{Outcome: NotSearching, Round: o.Round}, true
	case !gate.Allows(o.City):
		// Outside the city's working hours: still owed a step, which the
		// first recheck after opening takes; one reported unassignable is
		// parked for it.
		return StepPlan{Outcome: AfterHours, Round: o.Round, Park: !o.Unassignable.IsZero()}, true
	}
	return StepPlan{}, false
}

// Hold decides whether an admitted order with these facts is left alone:
// with an open offer it is Busy, and the offer's end leaves it owed again.
func Hold(o Order, f StepFacts) (plan StepPlan, done bool) {
	if !f.Open {
		return StepPlan{}, false
	}
	return StepPlan{Outcome: Busy, Round: o.Round}, true
}

// Escalate decides whether a pick that found nobody in round moves the
// order on: with nobody left in round 1 after someone was offered it
// there, round 2 is picked from.
func Escalate(round int, f StepFacts, p Pick) (next int, again bool) {
	if p.Master == 0 && !p.Busy && round == 1 && f.OfferedInRound1 {
		return 2, true
	}
	return round, false
}

// Decide turns the pick of attempt (0 first) in round into the step's
// writes: an offer to the candidate, Busy (the order parked, so that the
// end of some master's offer, or the recheck, looks at it), or, with
// nobody left, the unassignable report (once; a step on an order already
// reported settles it again only if it was parked).
func Decide(o Order, f StepFacts, round int, p Pick, attempt int) StepPlan {
	reported := !o.Unassignable.IsZero()
	switch {
	case p.Busy || attempt == maxPicks:
		return StepPlan{Outcome: Busy, Round: o.Round, Park: !f.Parked}
	case p.Master != 0:
		return StepPlan{Outcome: Offered, Round: round, Master: p.Master,
			Settle: round != o.Round || reported || f.Parked}
	}
	plan := StepPlan{Outcome: StillUnassignable, Round: round}
	if !reported {
		plan.Outcome = Unassignable
	}
	plan.MarkUnassignable = !reported || f.Parked
	return plan
}

// Ratings order the candidates of a step: among the masters a step may
// offer the order to (place, skill, free, not yet offered it in the
// round), the highest rank goes first, and within a rank the one idle
// longest, so masters of a like record still take turns. storage's pick
// follows RankOf in SQL, these constants passed as its parameters.
const (
	// MinRatings is how many ratings within RatingWindow a master's
	// average needs to count: one or two customers' moods are not a
	// record.
	MinRatings = 3
	// RatingWindow is how far back ratings count, so the record is of the
	// master's work now, and a master who improved is not held to old
	// ratings for ever.
	RatingWindow = 90 * 24 * time.Hour
	// RatingStep buckets averages to half stars: 4.6 and 4.8 are the same
	// record to a customer, and if the exact average ranked them, the
	// 4.8 master would take every order while free and the round-robin
	// would only ever run among exact ties.
	RatingStep = 0.5
	// UnratedRank is the rank of a master short of MinRatings: that of a
	// good master (4.0, the bucket of averages from 3.75 to under 4.25),
	// neither preferred over masters their customers rated better nor
	// buried below those rated worse. Ranked below every rated master, a
	// newcomer would get an order only when every rated one was busy, and
	// so would seldom collect the ratings that end it; ranked at 5, any
	// unrated master would go before a proven one.
	UnratedRank = 4.0
)

// RankOf is a master's rank among candidates from their average stars and
// how many ratings it is of, both over the last RatingWindow: the average
// rounded to a RatingStep (half away from zero, as PostgreSQL rounds a
// numeric), or UnratedRank with fewer than MinRatings ratings.
func RankOf(avg float64, count int) float64 {
	if count < MinRatings {
		return UnratedRank
	}
	return math.Round(avg/RatingStep) * RatingStep
}
