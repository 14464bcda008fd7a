package domain

import (
	"fmt"
	"slices"
)

// Transitions is a workflow's table of allowed state changes: for each
// state, the states it may move to. The table itself lives in its
// workflow; this is the one way each of them checks it, so that a change the
// table refuses reads the same everywhere and wraps the workflow's own
// sentinel error.
type Transitions[S ~string] struct {
	next map[S][]S
	err  error
	what string
}

// NewTransitions wraps a table. Check's error wraps err and names the
// change "what from → to" (what may be empty, for a workflow with one
// table).
func NewTransitions[S ~string](err error, what string, next map[S][]S) Transitions[S] {
	if what != "" {
		what += " "
	}
	return Transitions[S]{next: next, err: err, what: what}
}

// Can reports whether the table allows from → to.
func (t Transitions[S]) Can(from, to S) bool { return slices.Contains(t.next[from], to) }

// Check returns nil for a change the table allows, else the workflow's
// sentinel error wrapped with the change.
func (t Transitions[S]) Check(from, to S) error {
	if !t.Can(from, to) {
		return fmt.Errorf("%w: %s%s → %s", t.err, t.what, from, to)
	}
	return nil
}

// Final reports whether nothing leaves s.
func (t Transitions[S]) Final(s S) bool { return len(t.next[s]) == 0 }
