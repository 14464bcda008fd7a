package llm

import (
	"fmt"
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
	r := domain.NewRegistrar(reg)
	m := &metrics{
		calls: domain.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llm_calls_total",
			Help: "LLM calls by caller label, model and outcome.",
		}, []string{"label", "model", "outcome"})),
		duration: domain.Register(r, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "llm_call_duration_seconds",
			Help: "Time spent in the provider call, excluding waiting for a concurrency slot.",
			// From a cached embedding to a long generation on a local model.
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120},
		}, []string{"label", "model"})),
		tokens: domain.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llm_tokens_total",
			Help: "Tokens reported by the provider, by kind (prompt, completion).",
		}, []string{"label", "model", "kind"})),
		breaker: domain.Register(r, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "llm_breaker_state",
			Help: "Circuit breaker state: 0 closed, 1 half-open, 2 open.",
		})),
		inFlight: domain.Register(r, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "llm_in_flight",
			Help: "LLM calls currently being executed against the provider.",
		})),
		repairs: domain.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llm_answer_repairs_total",
			Help: "Accepted answers that needed a repair, by model and kind (think, bom, fence, prose, trailing, coerce_number, coerce_bool, jsonrepair).",
		}, []string{"model", "kind"})),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("llm metrics: %w", err)
	}
	return m, nil
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
