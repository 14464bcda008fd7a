package llmtest_test

import (
	"context"
	"testing"

	"github.com/tmc/langchaingo/llms"

	"switchboard/llm/llmtest"
)

// The benchmarks measure the whole loop through langchaingo's clients, the
// way a domain benchmark would use the server; WithoutRecording keeps memory
// flat over millions of iterations.

func benchChat(b *testing.B, p llmtest.Provider, stream bool) {
	srv := llmtest.Start(b, llmtest.WithoutRecording())
	for i := range 10 {
		srv.On(llmtest.SystemContains("nonmatching-" + string(rune('a'+i)))).Reply("no")
	}
	srv.On(llmtest.SystemContains("archivist"), llmtest.PromptHasWords("file")).Named("hit").
		Reply(`{"category":"invoice","confidence":0.93}`)
	m := models(b, srv, "m")[p]
	var opts []llms.CallOption
	if stream {
		opts = append(opts, llms.WithStreamingFunc(func(context.Context, []byte) error { return nil }))
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := generate(context.Background(), m, "You are an archivist.", "Classify this file", opts...); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	if got := srv.Calls("hit"); got < b.N {
		b.Fatalf("served %d of %d", got, b.N)
	}
}

func BenchmarkOllamaChat(b *testing.B)       { benchChat(b, llmtest.Ollama, false) }
func BenchmarkOllamaChatStream(b *testing.B) { benchChat(b, llmtest.Ollama, true) }
func BenchmarkOpenAIChat(b *testing.B)       { benchChat(b, llmtest.OpenAI, false) }
func BenchmarkOpenAIChatStream(b *testing.B) { benchChat(b, llmtest.OpenAI, true) }

func BenchmarkEmbedding(b *testing.B) {
	const text = "Senior Go developer for a distributed systems team, remote within the EU"
	b.ReportAllocs()
	for b.Loop() {
		llmtest.Embedding(text, llmtest.DefaultEmbeddingDim)
	}
}
