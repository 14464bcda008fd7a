package llm

import (
	"context"
	"errors"
	"fmt"

	"switchboard/domain/memory"
)

// MemoryPort implements memory.LLM: the memory chat's calls with their own
// model, temperature, token and time limits, and the client's errors told
// apart as the pipeline's error table needs (invalid JSON, timeout, rate
// limit, anything else).
type MemoryPort struct{ Client *Client }

var _ memory.LLM = MemoryPort{}

// Text returns the model's answer.
func (p MemoryPort) Text(ctx context.Context, c memory.Call) (string, error) {
	s, err := p.Client.Text(ctx, c)
	return s, classifyForMemory(err)
}

// JSON decodes the model's JSON answer into out.
func (p MemoryPort) JSON(ctx context.Context, c memory.Call, out any) error {
	return classifyForMemory(p.Client.JSON(ctx, c, out))
}

func classifyForMemory(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrInvalidJSON):
		return fmt.Errorf("%w: %w", memory.ErrInvalidAnswer, err)
	case errors.Is(err, ErrTimeout):
		return fmt.Errorf("%w: %w", memory.ErrTimeout, err)
	case errors.Is(err, ErrRateLimited):
		return fmt.Errorf("%w: %w", memory.ErrRateLimited, err)
	case errors.Is(err, ErrRefused):
		return fmt.Errorf("%w: %w", memory.ErrLLMRefused, err)
	case errors.Is(err, ErrBreakerOpen):
		return fmt.Errorf("%w: %w", memory.ErrLLMDown, err)
	}
	return err
}
