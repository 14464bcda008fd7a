package llmtest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"switchboard/llm/llmtest"
)

func TestRuleMatching(t *testing.T) {
	srv := llmtest.Start(t)
	srv.On(llmtest.SystemContains("archivist"), llmtest.PromptHasWords("go")).Named("archivist-go").Reply("A")
	srv.On(llmtest.SystemContains("archivist")).Named("archivist").Reply("B")
	srv.On(llmtest.Model("big")).Named("big").Reply("C")
	srv.On(llmtest.ProviderIs(llmtest.OpenAI), llmtest.PromptContains("VACANC")).Named("oa-vacancy").Reply("D")
	srv.On(llmtest.Any(llmtest.PromptContains("apple"), llmtest.PromptContains("pear")),
		llmtest.Not(llmtest.PromptContains("rotten"))).Named("fruit").Reply("E")

	ol, oa := ollamaLLM(t, srv, "small"), openaiLLM(t, srv, "small")
	ctx := context.Background()
	cases := []struct {
		name, system, prompt, want, rule string
		openai                           bool
	}{
		{"substring plus word", "You are the Archivist", "Is Go fun?", "A", "archivist-go", false},
		{"word, not substring", "you are the archivist", "going home", "B", "archivist", false},
		{"first match wins", "archivist", "go", "A", "archivist-go", false},
		{"provider gate", "", "new vacancies", "D", "oa-vacancy", true},
		{"any", "", "a pear", "E", "fruit", false},
		{"not", "", "apple", "E", "fruit", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var m llms.Model = ol
			if c.openai {
				m = oa
			}
			got, err := generate(ctx, m, c.system, c.prompt)
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
			reqs := srv.Requests()
			assert.Equal(t, c.rule, reqs[len(reqs)-1].Rule)
		})
	}

	// The ollama client cannot reach the openai-only rule.
	_, err := generate(ctx, ol, "", "new vacancies")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "llmtest: no rule matches ollama request")
	// Rotten apples match nothing either; the message says what came in.
	_, err = generate(ctx, oa, "sys", "rotten apple")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "500")
	assert.Contains(t, err.Error(), `prompt="rotten apple"`)

	big := ollamaLLM(t, srv, "big")
	got, err := generate(ctx, big, "", "anything")
	require.NoError(t, err)
	assert.Equal(t, "C", got)

	reqs := srv.Requests()
	last := reqs[len(reqs)-2]
	assert.Equal(t, "no_rule", last.Fault)
	assert.Empty(t, last.Rule)
	assert.Equal(t, 2, srv.Calls("archivist-go"))
	assert.Len(t, srv.RequestsFor("fruit"), 2)
}

func TestRepliesSequence(t *testing.T) {
	srv := llmtest.Start(t)
	srv.On().Named("seq").Replies("first", "second", "last")
	m := ollamaLLM(t, srv, "m")
	var got []string
	for range 5 {
		out, err := generate(context.Background(), m, "", "next")
		require.NoError(t, err)
		got = append(got, out)
	}
	assert.Equal(t, []string{"first", "second", "last", "last", "last"}, got)
}

func TestSequenceSkipsFaultedCalls(t *testing.T) {
	srv := llmtest.Start(t)
	srv.On().Replies("one", "two").FaultNext(1, llmtest.ServerError())
	m := openaiLLM(t, srv, "m")
	_, err := generate(context.Background(), m, "", "x")
	require.Error(t, err)
	out, err := generate(context.Background(), m, "", "x")
	require.NoError(t, err)
	assert.Equal(t, "one", out, "a faulted call does not consume a scripted reply")
}

func TestReplyFuncAndJSON(t *testing.T) {
	srv := llmtest.Start(t)
	srv.On(llmtest.Model("echo")).ReplyFunc(func(r llmtest.Request) string {
		return fmt.Sprintf("%s|%s|%d", r.Provider, r.Prompt, len(r.Messages))
	})
	srv.On().ReplyJSON(map[string]int{"score": 7})
	out, err := generate(context.Background(), openaiLLM(t, srv, "echo"), "s", "hello")
	require.NoError(t, err)
	assert.Equal(t, "openai|hello|2", out)
	out, err = generate(context.Background(), ollamaLLM(t, srv, "other"), "", "score?")
	require.NoError(t, err)
	assert.JSONEq(t, `{"score":7}`, out)
}

func TestDefaultRuleAndMissingReply(t *testing.T) {
	srv := llmtest.Start(t)
	srv.On(llmtest.PromptContains("scripted")).Named("no-reply")
	m := ollamaLLM(t, srv, "m")

	_, err := generate(context.Background(), m, "", "scripted")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `rule "no-reply" has no reply configured`)

	srv.Default().Reply("lenient")
	out, err := generate(context.Background(), m, "", "something else")
	require.NoError(t, err)
	assert.Equal(t, "lenient", out)
	assert.Equal(t, 1, srv.Calls("default"))
	assert.Equal(t, "no_reply", srv.RequestsFor("no-reply")[0].Fault)
}

func TestEmbedMatchers(t *testing.T) {
	srv := llmtest.Start(t)
	srv.On(llmtest.Embed(), llmtest.PromptContains("poison")).Named("embed-fail").Fault(llmtest.ServerError())
	srv.On(llmtest.Chat()).Reply("chat only")
	m := ollamaLLM(t, srv, "e")

	_, err := m.CreateEmbedding(context.Background(), []string{"fine", "poison pill"})
	require.Error(t, err)
	vecs, err := m.CreateEmbedding(context.Background(), []string{"fine"})
	require.NoError(t, err)
	assert.Len(t, vecs, 1)
	assert.Equal(t, 1, srv.Calls("embed-fail"))
	out, err := generate(context.Background(), m, "", "poison")
	require.NoError(t, err)
	assert.Equal(t, "chat only", out)
}

func TestResetAndRecording(t *testing.T) {
	srv := llmtest.Start(t)
	srv.On().Named("r").Reply("x")
	m := ollamaLLM(t, srv, "m")
	_, err := generate(context.Background(), m, "", "1")
	require.NoError(t, err)
	srv.Reset()
	assert.Empty(t, srv.Requests())
	assert.Zero(t, srv.Calls("r"))
	assert.Zero(t, srv.MaxInFlight())

	quiet := llmtest.Start(t, llmtest.WithoutRecording())
	quiet.On().Named("r").Reply("x")
	_, err = generate(context.Background(), ollamaLLM(t, quiet, "m"), "", "1")
	require.NoError(t, err)
	assert.Empty(t, quiet.Requests())
	assert.Equal(t, 1, quiet.Calls("r"), "counts survive WithoutRecording")
}

func TestStreamingAndAllMatchers(t *testing.T) {
	srv := llmtest.Start(t)
	srv.On(llmtest.All(llmtest.Streaming(), llmtest.ProviderIs(llmtest.OpenAI))).Named("oa-stream").Reply("streamed")
	srv.On().Named("rest").Reply("plain")
	m := openaiLLM(t, srv, "m")
	out, err := generate(context.Background(), m, "", "q",
		llms.WithStreamingFunc(func(context.Context, []byte) error { return nil }))
	require.NoError(t, err)
	assert.Equal(t, "streamed", out)
	out, err = generate(context.Background(), m, "", "q")
	require.NoError(t, err)
	assert.Equal(t, "plain", out)
}
