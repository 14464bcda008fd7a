package domain

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// A metric registered twice on one registry is shared; one that clashes
// with another kind under its name is an error; no registry registers
// nothing.
func TestRegistrarSharesAndReportsClashes(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "things_total", Help: "Things."}

	first := NewRegistrar(reg)
	a := Register(first, prometheus.NewCounter(opts))
	second := NewRegistrar(reg)
	b := Register(second, prometheus.NewCounter(opts))
	require.NoError(t, first.Err())
	require.NoError(t, second.Err())
	require.Same(t, a, b)

	clash := NewRegistrar(reg)
	Register(clash, prometheus.NewGauge(prometheus.GaugeOpts{Name: "things_total", Help: "Other."}))
	require.Error(t, clash.Err())

	none := NewRegistrar(nil)
	c := Register(none, prometheus.NewCounter(opts))
	require.NoError(t, none.Err())
	require.NotSame(t, a, c)
}

// NewMetrics hands back what build made on the registry, or an error naming
// the package whose metrics clash.
func TestNewMetricsNamesTheClash(t *testing.T) {
	reg := prometheus.NewRegistry()
	build := func(r *Registrar) prometheus.Counter { return r.Counter("things_total", "Things.") }
	c, err := NewMetrics(reg, "things", build)
	require.NoError(t, err)
	again, err := NewMetrics(reg, "things", build)
	require.NoError(t, err)
	require.Same(t, c, again)

	_, err = NewMetrics(reg, "other", func(r *Registrar) prometheus.Gauge { return r.Gauge("things_total", "Other.") })
	require.ErrorContains(t, err, "other metrics: ")
}
