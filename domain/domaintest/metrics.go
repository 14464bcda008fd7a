package domaintest

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// Counter is the value of counter name with the label values labels (in
// the order of their names), as g gathers it; 0 when it has no such series.
func Counter(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var vals []string
			for _, lp := range m.GetLabel() {
				vals = append(vals, lp.GetValue())
			}
			if strings.Join(vals, ",") == strings.Join(labels, ",") {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
