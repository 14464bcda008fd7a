// Package llmtest is a scripted LLM server for tests and benchmarks.
//
// It speaks the Ollama and OpenAI HTTP APIs exactly as langchaingo v0.1.14's
// clients call them, so code under test runs its real client stack (request
// marshalling, NDJSON/SSE parsing, error decoding) against a local
// 127.0.0.1 listener instead of a mock. A test scripts the "model" with
// rules:
//
//	srv := llmtest.New()
//	defer srv.Close()
//	srv.On(llmtest.SystemContains("archivist")).Named("archivist").Reply(`{"ok":true}`)
//	srv.On(llmtest.PromptHasWords("golang", "vacancy")).Replies("yes", "no")
//	srv.On(llmtest.Model("slow")).Latency(time.Second).Reply("eventually")
//
//	llm, _ := ollama.New(ollama.WithServerURL(srv.OllamaURL()), ollama.WithModel("m"))
//	llm, _ := openai.New(openai.WithBaseURL(srv.OpenAIURL()), openai.WithToken("k"))
//
// Rules are tried in the order they were added; the first whose matchers all
// hold serves the request. A chat request no rule matches gets HTTP 500 with
// "llmtest: no rule matches ..." in the provider's error shape, so a test
// that forgot to script a prompt fails loudly instead of passing on an empty
// answer; Server.Default changes that. Embedding requests need no rule: the
// vectors are derived from the text (see Embedding), though rules may match
// them to add latency, faults or a name to count.
//
// Endpoints served:
//
//	Ollama: POST /api/chat   (single JSON object, or NDJSON when "stream": true)
//	        POST /api/embed  (input: string or []string)
//	        GET  /api/tags   (the models ServeModels set)
//	OpenAI: POST /v1/chat/completions  (JSON, or SSE "data:" chunks + [DONE])
//	        POST /v1/embeddings
//	        GET  /v1/models  (the models ServeModels set)
//
// By default any model is served and the listings are empty; after
// ServeModels (or WithModels) only the listed models are, and a request for
// another gets 404 "model not found" in the provider's shape, as a server
// that lacks the model answers. RefuseJSONSchema makes the OpenAI endpoint
// answer 400 to response_format json_schema, like servers without
// structured outputs.
//
// Beyond the reply, a rule can answer as a model that hit its answer
// budget (CutAt: the reply cut, done_reason / finish_reason "length") and
// send reasoning in the field servers split it into (Thinking: Ollama
// message.thinking, OpenAI-compatible reasoning_content), or decline as
// an OpenAI model under structured outputs does (Refusal: content null,
// message.refusal). The record keeps,
// per request, what a deployment tunes: MaxTokens (num_predict /
// max_tokens), Format and Schema (Ollama format, OpenAI response_format),
// and Ollama's NumCtx, Think and KeepAlive.
//
// Ollama itself treats a missing "stream" field as true. langchaingo omits the
// field for non-streaming calls (it is tagged omitempty) and parses either
// form, so this server treats a missing field as false: that keeps the
// record's Stream flag meaning "the caller asked for streaming".
// langchaingo v0.1.14 never calls the legacy /api/embeddings endpoint, so it
// is not served.
//
// Faults (HTTP errors, 429 with Retry-After, empty bodies, empty or non-JSON
// content, hangs, a stream cut short, and the refusals a status alone
// does not tell apart: OpenAI's 429 insufficient_quota, OpenRouter's 402
// for credits spent and its 403 for an input its moderation flagged) can
// be attached to a rule, to a rule's next N calls, or to
// the server's next N calls. Every chat and embedding request is recorded
// (see Request) for assertions.
//
// The server is safe for concurrent use and cheap per call: rules are read
// through an atomic snapshot, and no lock is held while a request waits out
// its latency, so it can sustain benchmark loads of thousands of calls per
// second. Waiting (latency, chunk delays, hangs) always ends when the client
// goes away or the server closes, so a client that times out leaks no
// handler goroutine.
package llmtest
