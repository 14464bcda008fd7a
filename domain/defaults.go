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

// RegisterMetric registers *c on reg. Where an identical collector is
// registered there already (a second service, client or scheduler on one
// registry), *c becomes that one, so both share the series instead of
// failing. Every package registers its metrics through it.
func RegisterMetric[C prometheus.Collector](reg prometheus.Registerer, c *C) error {
	err := reg.Register(*c)
	if err == nil {
		return nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			*c = existing
			return nil
		}
	}
	return err
}
