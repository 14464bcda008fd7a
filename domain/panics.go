package domain

import (
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// PanicError is a panic recovered while one item was handled (a match, a
// stage, an outbox row): that item's failure, as its workflow fails it.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Panics keeps a panic to the one item whose handling raised it. A
// long-running loop that let it through would take the process down, and
// the item, claimed again after the restart, would take it down again: a
// crash loop that stops every workflow for every user over one odd LLM
// answer or one HH vacancy of a shape nobody foresaw. Every loop that works
// through items contains each one with Contain: the workflows' workers, the
// outbox's senders, the inbox's updates and the jobs' runs.
type Panics struct {
	// total is panics_total{where}; nil counts nothing.
	total *prometheus.CounterVec
}

// NewPanics registers panics_total on r. Every package registers the same
// counter, so a registry shared by them (the app's) has one series per
// place that contains panics, whichever package it is in.
func NewPanics(r *Registrar) Panics {
	return Panics{total: r.CounterVec("panics_total",
		"Panics contained to the one item whose handling raised it (the item failed, the loop went on), by where.", "where")}
}

// Contain runs fn, the handling of one item. A panic in it is recovered,
// logged at error level with the stack, where it happened and the item (nil:
// not known there), counted, and returned as a *PanicError for the caller to
// fail the item the way its workflow fails one; nil when fn returned.
// Recover around one item, never around a loop, so the loop goes on.
func (p Panics) Contain(log *slog.Logger, where string, item any, fn func()) (err error) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		pe := &PanicError{Value: v, Stack: debug.Stack()}
		if log == nil {
			log = slog.Default()
		}
		log.Error("panic contained to one item", "where", where, "item", item, "panic", fmt.Sprint(v), "stack", string(pe.Stack))
		if p.total != nil {
			p.total.WithLabelValues(where).Inc()
		}
		err = pe
	}()
	fn()
	return nil
}
