package domain

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults fills in what a workflow service's caller left nil: the real
// clock, slog's default logger, and a metrics registry of the service's own
// (so that tests can build many services without registering a metric
// twice). Every workflow's NewService calls it on its Deps, through Prepare.
func Defaults(clock *clockwork.Clock, log **slog.Logger, reg *prometheus.Registerer) {
	if *clock == nil {
		*clock = clockwork.NewRealClock()
	}
	if *log == nil {
		*log = slog.Default()
	}
	if *reg == nil {
		*reg = prometheus.NewRegistry()
	}
}

// Prepare is the opening every workflow's NewService shares once it has
// checked the collaborators it requires: the others left nil get their
// defaults (Defaults), the workflow's metrics are built with build on its
// registry (NewMetrics, the error naming the workflow), and the log it
// returns is the workflow's own, every line carrying the workflow as its
// "component".
func Prepare[M any](workflow string, clock *clockwork.Clock, log **slog.Logger, reg *prometheus.Registerer, build func(r *Registrar) M) (M, *slog.Logger, error) {
	Defaults(clock, log, reg)
	m, err := NewMetrics(*reg, workflow, build)
	if err != nil {
		return m, nil, err
	}
	return m, (*log).With("component", workflow), nil
}

// Registrar builds and registers a package's metrics (see NewMetrics):
// &metrics{runs: r.CounterVec("x_runs_total", "Runs.", "state")}. With a nil
// Registerer it registers nothing.
type Registrar struct {
	reg prometheus.Registerer
	err error
}

// NewRegistrar returns a Registrar for reg.
func NewRegistrar(reg prometheus.Registerer) *Registrar { return &Registrar{reg: reg} }

// Err is every registration's failure, joined.
func (r *Registrar) Err() error { return r.err }

// NewMetrics builds a package's metrics with build on a Registrar for reg.
// Its error names the package, for a service that several packages' metrics
// share a registry with.
func NewMetrics[M any](reg prometheus.Registerer, pkg string, build func(r *Registrar) M) (M, error) {
	r := NewRegistrar(reg)
	m := build(r)
	if err := r.Err(); err != nil {
		var zero M
		return zero, fmt.Errorf("%s metrics: %w", pkg, err)
	}
	return m, nil
}

// Register registers c on r's registry and returns it. Where an identical
// collector is registered there already (a second service, client or
// scheduler on one registry) it returns that one, so both share the series
// instead of failing.
func Register[C prometheus.Collector](r *Registrar, c C) C {
	if r.reg == nil {
		return c
	}
	err := r.reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	r.err = errors.Join(r.err, err)
	return c
}

// Counter registers a counter.
func (r *Registrar) Counter(name, help string) prometheus.Counter {
	return Register(r, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
}

// CounterVec registers a counter with labels.
func (r *Registrar) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
}

// Gauge registers a gauge.
func (r *Registrar) Gauge(name, help string) prometheus.Gauge {
	return Register(r, prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help}))
}

// Histogram registers a histogram with buckets.
func (r *Registrar) Histogram(name, help string, buckets []float64) prometheus.Histogram {
	return Register(r, prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}))
}

// HistogramVec registers a histogram with buckets and labels.
func (r *Registrar) HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return Register(r, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels))
}

// OrDefault sets *v to def where it is zero or negative: a setting the
// operator left out. Every service's Config.withDefaults fills its numbers
// this way.
func OrDefault[T ~int | ~int64 | ~float64](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}
