package llm

import "context"

// Port adapts a Client to the small LLM interfaces the domain packages
// declare (system and user prompt in, validated JSON out, breaker state),
// so the domain never imports this package. Its errors are the client's,
// which are already the domain's LLM error classes (domain.ErrLLMDown and
// the rest, see classed).
type Port struct {
	Client *Client
	// Label names the calls in metrics and logs ("vacancy_relevance").
	Label string
	// Strong uses the final-answer model.
	Strong bool
}

// JSON asks for a JSON answer decoded into out (see Client.JSON).
func (p Port) JSON(ctx context.Context, system, prompt string, out any) error {
	return p.Client.JSON(ctx, Request{System: system, Prompt: prompt, Label: p.Label, Strong: p.Strong}, out)
}

// Open reports whether the circuit breaker is refusing calls.
func (p Port) Open() bool { return p.Client.BreakerState() == BreakerOpen }

// Refused reports whether the provider refuses the model or the key (a
// 401/403/404 opened the breaker and no probe has succeeded since): a
// misconfiguration, not an outage, so work should wait for the fix rather
// than count as failed. Client.Health says what to fix.
func (p Port) Refused() bool { return p.Client.Refused() }

// Health reports whether a refusal holds the breaker (open or probing)
// and why calls are refused or failing (see Client.Health); the reason is
// a refusal's fix ("run ollama pull …") when there is one.
func (p Port) Health() (bool, string) {
	if rf := p.Client.Refusal(); rf != nil {
		return true, rf.Reason
	}
	return false, p.Client.Health().Reason
}
