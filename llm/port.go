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
}

// JSON asks for a JSON answer decoded into out (see Client.JSON).
func (p Port) JSON(ctx context.Context, system, prompt string, out any) error {
	err := p.Client.JSON(ctx, Request{System: system, Prompt: prompt, Label: p.Label, Strong: p.Strong}, out)
	if err != nil && p.Invalid != nil && errors.Is(err, ErrInvalidJSON) {
		return fmt.Errorf("%w: %w", p.Invalid, err)
	}
	return err
}

// Open reports whether the circuit breaker is refusing calls.
func (p Port) Open() bool { return p.Client.BreakerState() == BreakerOpen }
