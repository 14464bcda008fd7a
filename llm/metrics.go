package llm

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"switchboard/domain"
)

type metrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	tokens   *prometheus.CounterVec
	breaker  prometheus.Gauge
	inFlight prometheus.Gauge
	repairs  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	return domain.NewMetrics(reg, "llm", func(r *domain.Registrar) *metrics {
		return &metrics{
			calls: r.CounterVec("llm_calls_total",
				"LLM calls by caller label, model and outcome.", "label", "model", "outcome"),
			// From a cached embedding to a long generation on a local model.
			duration: r.HistogramVec("llm_call_duration_seconds",
				"Time spent in the provider call, excluding waiting for a concurrency slot.",
				[]float64{0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120}, "label", "model"),
			tokens: r.CounterVec("llm_tokens_total",
				"Tokens reported by the provider, by kind (prompt, completion).", "label", "model", "kind"),
			breaker:  r.Gauge("llm_breaker_state", "Circuit breaker state: 0 closed, 1 half-open, 2 open."),
			inFlight: r.Gauge("llm_in_flight", "LLM calls currently being executed against the provider."),
			repairs: r.CounterVec("llm_answer_repairs_total",
				"Accepted answers that needed a repair, by model and kind (think, bom, fence, prose, trailing, coerce_number, coerce_bool, jsonrepair).", "model", "kind"),
		}
	})
}

func breakerGaugeValue(s gobreaker.State) float64 {
	switch s {
	case gobreaker.StateHalfOpen:
		return 1
	case gobreaker.StateOpen:
		return 2
	}
	return 0
}

// addRepairs counts one accepted answer's repairs, each kind once.
func (m *metrics) addRepairs(model string, rep repairs) {
	for i, k := range rep {
		if !slices.Contains(rep[:i], k) {
			m.repairs.WithLabelValues(model, k).Inc()
		}
	}
}

// addTokenCounts records the usage a chat answer reported (zero: none).
func (m *metrics) addTokenCounts(label, model string, prompt, completion int) {
	if prompt > 0 {
		m.tokens.WithLabelValues(label, model, "prompt").Add(float64(prompt))
	}
	if completion > 0 {
		m.tokens.WithLabelValues(label, model, "completion").Add(float64(completion))
	}
}
