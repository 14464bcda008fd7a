package llm

import "context"

// AnalysisPort implements analysis.LLM: proposals as validated JSON from
// the cheap model, and embeddings for the RAG context.
type AnalysisPort struct{ Client *Client }

// JSON asks for a JSON answer decoded (and validated) into out; an answer
// that is not is a domain.ErrLLMInvalidAnswer.
func (p AnalysisPort) JSON(ctx context.Context, system, prompt string, out any) error {
	return p.Client.JSON(ctx, Request{System: system, Prompt: prompt, Label: "analysis_proposals"}, out)
}

// Embed returns one vector per text.
func (p AnalysisPort) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return p.Client.Embed(ctx, texts)
}
