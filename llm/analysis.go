package llm

import (
	"context"
	"errors"
	"fmt"
)

// AnalysisPort implements analysis.LLM: proposals as validated JSON from
// the cheap model, and embeddings for the RAG context.
type AnalysisPort struct {
	Client *Client
	// Invalid is the domain's ErrInvalidAnswer, wrapped with ErrInvalidJSON
	// when an answer fails to decode or validate.
	Invalid error
}

// JSON asks for a JSON answer decoded (and validated) into out.
func (p AnalysisPort) JSON(ctx context.Context, system, prompt string, out any) error {
	err := p.Client.JSON(ctx, Request{System: system, Prompt: prompt, Label: "analysis_proposals"}, out)
	if err != nil && p.Invalid != nil && errors.Is(err, ErrInvalidJSON) {
		return fmt.Errorf("%w: %w", p.Invalid, err)
	}
	return err
}

// Embed returns one vector per text.
func (p AnalysisPort) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return p.Client.Embed(ctx, texts)
}
