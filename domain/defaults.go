package domain

import (
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
