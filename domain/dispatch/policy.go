package dispatch

// The distribution step's rules. A step (Repository.NextOffer) runs in
// one transaction holding the order's row; storage reads the facts below
// and writes what these functions decide, each write a conditional
// statement naming the old state. Kept pure so that every branch (round
// escalation, busy and waiting masters, the unassignable report) is tested
// without a database.

// maxPicks bounds the picks one step retries after its insert found the
// master taken; past it the order is left waiting for the recheck.
const maxPicks = 3

// StepFacts is what a step reads of its order once it holds the row.
type StepFacts struct {
	// Open: the order has an open offer (SENT or VIEWED).
	Open bool
	// OfferedInRound1: some master was offered the order in round 1.
	OfferedInRound1 bool
	// Waiting is orders.waiting: the order is owed a step.
	Waiting bool
}

// Pick is one search for a candidate in a round.
type Pick struct {
	// Master is the free candidate idle longest; zero if none.
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
	// SetWaiting: orders.waiting becomes Waiting.
	SetWaiting, Waiting bool
	// MarkUnassignable: unassignable_at is set (if not yet) and waiting
	// cleared, the order reported or re-settled as unassignable.
	MarkUnassignable bool
	// Settle: the new offer settles the order: its round becomes Round,
	// the unassignable and waiting marks are cleared.
	Settle bool
}

// Admit decides whether a step goes on once storage has tried to lock the
// order (locked false: another transaction holds it, and its waiting mark
// is left to that transaction). done true ends the step with plan.
func Admit(o Order, locked bool, gate Gate) (plan StepPlan, done bool) {
	switch {
	case !locked:
		return StepPlan{Outcome: Busy, Round: o.Round}, true
	case o.State != Searching:
		return StepPlan{Outcome: NotSearching, Round: o.Round}, true
	case !gate.Allows(o.City):
		// Outside the city's working hours: still owed a step, which the
		// first recheck after opening takes.
		return StepPlan{Outcome: AfterHours, Round: o.Round, SetWaiting: true, Waiting: true}, true
	}
	return StepPlan{}, false
}

// Hold decides whether an admitted order with these facts is left alone:
// with an open offer it is Busy, and the offer's end marks it again.
func Hold(o Order, f StepFacts) (plan StepPlan, done bool) {
	if !f.Open {
		return StepPlan{}, false
	}
	return StepPlan{Outcome: Busy, Round: o.Round, SetWaiting: f.Waiting, Waiting: false}, true
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
// writes: an offer to the candidate, Busy (the order marked waiting so
// that the end of some master's offer, or the recheck, looks at it), or,
// with nobody left, the unassignable report (once; a step on an order
// already reported settles it again only if it was marked waiting).
func Decide(o Order, f StepFacts, round int, p Pick, attempt int) StepPlan {
	switch {
	case p.Busy || attempt == maxPicks:
		return StepPlan{Outcome: Busy, Round: o.Round, SetWaiting: !f.Waiting, Waiting: true}
	case p.Master != 0:
		return StepPlan{Outcome: Offered, Round: round, Master: p.Master,
			Settle: round != o.Round || !o.Unassignable.IsZero() || f.Waiting}
	}
	plan := StepPlan{Outcome: StillUnassignable, Round: round}
	if o.Unassignable.IsZero() {
		plan.Outcome = Unassignable
	}
	plan.MarkUnassignable = o.Unassignable.IsZero() || f.Waiting
	return plan
}
