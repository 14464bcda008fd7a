package llm

import (
	"context"
	"errors"
	"fmt"
)

// Port adapts a Client to the small LLM interfaces the domain packages
// declare (system and user prompt in, validated JSON out, breaker state),
// so the domain never imports this package. Invalid, when set, is the
// domain's own "bad answer" error: an answer that fails to decode or
// validate is returned wrapping both it and ErrInvalidJSON.
type Port struct {
	Client *Client
	// Label names the calls in metrics and logs ("vacancy_relevance").
	Label string
	// Strong uses the final-answer model.
	Strong  bool
	Invalid error
	// Refusal, when set, is the domain's "model or key refused" error: a
	// call refused for that (ErrRefused) is returned wrapping it too.
	Refusal error
	// Busy, when set, is the domain's "not now" error: a call the provider
	// rate-limited (ErrRateLimited) is returned wrapping it too, so that
	// work can wait instead of counting the call as its own failure; so is
	// one the breaker turned away, unless Down is set.
	Busy error
	// Down, when set, is the domain's "the model is down" error: a call
	// the breaker turned away unrun (ErrBreakerOpen: it opened while the
	// call queued for a slot, or it is probing with its one probe out) is
	// returned wrapping it too. The error says so where it happens: the
	// breaker's state read after the call may have moved on.
	Down error
}

// JSON asks for a JSON answer decoded into out (see Client.JSON).
func (p Port) JSON(ctx context.Context, system, prompt string, out any) error {
	err := p.Client.JSON(ctx, Request{System: system, Prompt: prompt, Label: p.Label, Strong: p.Strong}, out)
	if err != nil && p.Invalid != nil && errors.Is(err, ErrInvalidJSON) {
		return fmt.Errorf("%w: %w", p.Invalid, err)
	}
	if err != nil && p.Refusal != nil && errors.Is(err, ErrRefused) {
		return fmt.Errorf("%w: %w", p.Refusal, err)
	}
	if err != nil && p.Down != nil && errors.Is(err, ErrBreakerOpen) {
		return fmt.Errorf("%w: %w", p.Down, err)
	}
	if err != nil && p.Busy != nil && (errors.Is(err, ErrBreakerOpen) || errors.Is(err, ErrRateLimited)) {
		return fmt.Errorf("%w: %w", p.Busy, err)
	}
	return err
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
