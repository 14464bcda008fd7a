package domain

import (
	"errors"
	"log/slog"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults fills in what a workflow service's caller left nil: the real
// clock, slog's default logger, and a metrics registry of the service's own
// (so that tests can build many services without registering a metric
// twice). Every workflow's NewService calls it on its Deps.
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

// Registrar registers a package's metrics as they are built:
// m := &metrics{runs: domain.Register(r, prometheus.NewCounterVec(…))}, then
// r.Err(). With a nil Registerer it registers nothing.
type Registrar struct {
	reg prometheus.Registerer
	err error
}

// NewRegistrar returns a Registrar for reg.
func NewRegistrar(reg prometheus.Registerer) *Registrar { return &Registrar{reg: reg} }

// Err is every registration's failure, joined.
func (r *Registrar) Err() error { return r.err }

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
