package analysis

import (
	"errors"

	"switchboard/domain"
)

// State is where a run is.
type State string

// Run states (docs/ARCHITECTURE.md "Analysis runs").
const (
	Pending   State = "pending"
	Running   State = "running"
	Completed State = "completed"
	Reviewed  State = "reviewed"
	Closed    State = "closed"
	Failed    State = "failed"
	Cancelled State = "cancelled"
)

// States lists every state in workflow order.
var States = []State{Pending, Running, Completed, Reviewed, Closed, Failed, Cancelled}

// Unclosed are the states that block a new run.
var Unclosed = []State{Pending, Running, Completed, Reviewed}

var transitions = domain.NewTransitions(ErrIllegalTransition, "", map[State][]State{
	Pending:   {Running},
	Running:   {Completed, Failed},
	Completed: {Closed},
})

// ErrIllegalTransition is returned for a change the table does not allow.
var ErrIllegalTransition = errors.New("illegal analysis run transition")

// CanTransition reports whether the table allows from → to.
func CanTransition(from, to State) bool { return transitions.Can(from, to) }

func checkTransition(from, to State) error { return transitions.Check(from, to) }

// Decision is a proposal's review state.
type Decision string

// Proposal decisions.
const (
	Undecided Decision = "pending"
	Approved  Decision = "approved"
	Rejected  Decision = "rejected"
)
