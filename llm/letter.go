package llm

import (
	"context"
	"errors"
	"fmt"

	"switchboard/domain"
	"switchboard/domain/vacancy"
)

// LetterPort implements vacancy.LetterLLM: cover letters as text, with the
// tokens the provider counted, a little randomness so that "another
// version" is one, and the client's errors told apart as the letters need.
type LetterPort struct{ Client *Client }

var _ vacancy.LetterLLM = LetterPort{}

// letterTokens bounds a letter's answer: three short paragraphs are a few
// hundred tokens in any of the languages, with room for a verbose model.
const letterTokens = 1024

// letterTemperature varies the wording between versions while keeping it
// sober.
const letterTemperature = 0.7

// Letter asks for the letter.
func (p LetterPort) Letter(ctx context.Context, system, prompt string) (vacancy.Written, error) {
	text, use, err := p.Client.TextUsage(ctx, Request{System: system, Prompt: prompt, Label: "cover_letter",
		Temperature: letterTemperature, MaxTokens: letterTokens})
	w := vacancy.Written{Text: text, TokensIn: use.Prompt, TokensOut: use.Completion}
	switch {
	case err == nil:
		return w, nil
	case errors.Is(err, ErrEmpty):
		// A letter of nothing is an invalid answer; the client cannot
		// say so for every caller (see ErrEmpty).
		return w, fmt.Errorf("%w: %w", domain.ErrLLMInvalidAnswer, err)
	}
	return w, err
}
