// Package testkit holds the few helpers the tests and the fakes share: a
// fake closed with its test, a slice (or a slice of rows) mapped field by
// field, a buffer a logger may write into from several goroutines while
// the test reads it, a reader for one Prometheus series, a check of a
// recogniser of text, and what the HTTP fakes answer with alike (a body
// written, JSON as the services send it, a queue of injected faults). The
// fakes of the outside services live beside their clients (hh/hhtest,
// llm/llmtest, e2e/tgfake, e2e/ghfake). DefaultParallel sets how many of
// a package's tests wait side by side.
package testkit

import (
	"bytes"
	"flag"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Closing closes v when the test ends and returns it: a fake started for
// one test.
func Closing[T interface{ Close() }](t testing.TB, v T) T {
	t.Cleanup(v.Close)
	return v
}

// Map is f of each of xs, in order: the field a test compares, pulled out
// of what a call returned. An empty xs gives an empty, not nil, slice.
func Map[T, U any](xs []T, f func(T) U) []U {
	out := make([]U, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// MapRows is Map of each row of xss: a keyboard's buttons read row by
// row, a list of batches read batch by batch.
func MapRows[T, U any](xss [][]T, f func(T) U) [][]U {
	return Map(xss, func(xs []T) []U { return Map(xs, f) })
}

// Recognizes checks a recogniser of text, such as a command or a link
// found in a message: it finds each key of yes and reads its value from
// it, and finds nothing in any of no. Each failure names the text.
func Recognizes[T comparable](t testing.TB, recognize func(string) (T, bool), yes map[string]T, no []string) {
	t.Helper()
	for text, want := range yes {
		if got, ok := recognize(text); !ok {
			t.Errorf("%q: not recognised, want %v", text, want)
		} else if got != want {
			t.Errorf("%q: got %v, want %v", text, got, want)
		}
	}
	for _, text := range no {
		if got, ok := recognize(text); ok {
			t.Errorf("%q: recognised as %v, want nothing", text, got)
		}
	}
}

// SyncBuffer is a bytes.Buffer safe for concurrent Write and String.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Series returns the series of metric name with exactly these label
// values (nil labels: a metric without labels), or nil when g has none.
func Series(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatalf("testkit: gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
					continue metrics
				}
			}
			return m
		}
	}
	return nil
}

// DefaultParallel sets how many of a package's parallel tests run at once
// (go test's -parallel) to n unless the command line names it; call it
// from TestMain before m.Run. go test's default is the number of CPUs,
// which on a two-core CI host leaves tests that mostly wait on timers,
// fakes and PostgreSQL queued behind each other with the processor idle.
// Each caller says why its n leaves room for the packages beside it: the
// README's command runs three at once against one server's 100
// connections.
func DefaultParallel(n int) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
			panic(fmt.Sprintf("testkit: set -test.parallel: %v", err))
		}
	}
}
