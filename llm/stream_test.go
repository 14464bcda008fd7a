package llm_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"switchboard/llm"
	"switchboard/llm/llmtest"
)

// partials records what a streamed call showed, in order.
type partials struct {
	mu   sync.Mutex
	seen []string
}

func (p *partials) add(s string) { p.mu.Lock(); p.seen = append(p.seen, s); p.mu.Unlock() }

func (p *partials) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

func TestTextStreamsWhenAskedForPartials(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := newServer(t)
		const answer = "Lviv is **lovely** in spring.\n\nTake the train."
		srv.On(llmtest.SystemContains("mentor")).Named("mentor").Reply(answer).ChunkDelay(5 * time.Millisecond)
		c, reg := newClient(t, srv, provider, nil)

		var p partials
		out, err := c.Text(context.Background(), llm.Request{System: "mentor", Prompt: "Where?", Label: "memory_responder", Partial: p.add})
		require.NoError(t, err)
		assert.Equal(t, answer, out, "a streamed answer is the same answer")

		r := srv.RequestsFor("mentor")[0]
		assert.True(t, r.Stream, "the request asked for a stream")
		seen := p.all()
		require.Greater(t, len(seen), 3, "the answer arrived in pieces: %q", seen)
		for i := 1; i < len(seen); i++ {
			assert.True(t, len(seen[i]) > len(seen[i-1]) && seen[i][:len(seen[i-1])] == seen[i-1],
				"each partial extends the one before: %q then %q", seen[i-1], seen[i])
		}
		assert.Equal(t, answer, seen[len(seen)-1])
		assertCalls(t, reg, "memory_responder", "small", map[string]float64{"ok": 1})
		if provider == llm.ProviderOpenAI {
			assert.Positive(t, metricValue(t, reg, "llm_tokens_total",
				map[string]string{"label": "memory_responder", "model": "small", "kind": "completion"}),
				"the usage chunk was asked for and counted")
		}
	})
}

func TestStreamHidesReasoning(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := newServer(t)
		// A model that writes its reasoning inline, and one whose server
		// splits it off (Ollama's thinking, OpenAI's reasoning_content).
		srv.On(llmtest.PromptContains("inline")).Reply("<think>the user wants a city</think>Lviv.").ChunkDelay(time.Millisecond)
		srv.On(llmtest.PromptContains("split")).Reply("Kyiv.").Thinking("pondering the map").ChunkDelay(time.Millisecond)
		c, _ := newClient(t, srv, provider, nil)

		for prompt, want := range map[string]string{"inline": "Lviv.", "split": "Kyiv."} {
			var p partials
			out, err := c.Text(context.Background(), llm.Request{Prompt: prompt, Partial: p.add})
			require.NoError(t, err)
			assert.Equal(t, want, out)
			for _, s := range p.all() {
				assert.NotContains(t, s, "think", "no reasoning is ever shown")
				assert.NotContains(t, s, "pondering")
				assert.NotEmpty(t, s)
			}
			assert.Equal(t, want, p.all()[len(p.all())-1])
		}
	})
}

func TestStreamCutOffIsAnErrorNotAnAnswer(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := newServer(t)
		srv.On(llmtest.Chat()).Reply("one two three four five six").Fault(llmtest.StreamCut())
		c, _ := newClient(t, srv, provider, nil)

		var p partials
		_, err := c.Text(context.Background(), llm.Request{Prompt: "hi", Partial: p.add})
		require.Error(t, err, "half an answer is not an answer")
		assert.NotEmpty(t, p.all(), "its first half was shown while it came")
		assert.False(t, errors.Is(err, llm.ErrInvalidJSON))
	})
}

func TestStreamRefusedLikeAWholeAnswer(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := newServer(t)
		srv.On(llmtest.Chat()).Reply("never").Fault(llmtest.RateLimit(time.Second))
		c, _ := newClient(t, srv, provider, nil)
		_, err := c.Text(context.Background(), llm.Request{Prompt: "hi", Partial: func(string) { t.Error("nothing to show") }})
		require.ErrorIs(t, err, llm.ErrRateLimited)
	})
}
