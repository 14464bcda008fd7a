// Package llm is the one port through which every domain talks to a
// language model.
//
// Domains do not import langchaingo or know which provider runs; they
// declare the small interface they need over *Client, for example
//
//	type classifier interface {
//		JSON(ctx context.Context, req llm.Request, out any) error
//	}
//
// and get three operations: Text (free-form answer), JSON (JSON mode,
// decoded and optionally validated into the caller's type) and Embed.
// Behind them sits langchaingo's llms.Model with either Ollama or any
// OpenAI-compatible API (Config.Provider). For Ollama chat the model is our
// own small llms.Model (ollama.go), because langchaingo's Ollama client
// allocates a 512 KB buffer per call, which dominated the memory pipeline's
// CPU; embeddings and OpenAI use langchaingo's clients.
//
// # Why resilience lives here and not in the domains
//
// A model server is one shared, slow, failure-prone resource, and every
// domain would otherwise have to get the same three things right:
//
//   - Timeouts. Every call gets a deadline (Config.Timeout, overridable per
//     Request) so a wedged model cannot hold a worker forever, and the
//     resulting error is ErrTimeout whatever the provider's client reports.
//   - Concurrency. A local Ollama serves only a few requests in parallel and
//     queues the rest internally, where they still count against our
//     timeouts. At most Config.MaxConcurrency calls are in flight per
//     Client; further callers wait (bounded by their own ctx, not by the
//     call timeout, so queueing under load is not mistaken for a sick
//     model).
//   - A circuit breaker. When the model is down or overloaded, failing fast
//     beats piling up timeouts; and a single breaker lets a job queue ask
//     BreakerState before it even dequeues work. It counts timeouts, 5xx,
//     429, transport errors and empty answers. It does not count what says
//     nothing about the backend's health: invalid JSON or failed validation
//     (the model did answer; callers decide whether to retry), 4xx other
//     than 429 (the request was at fault), and the caller's own
//     cancellation.
//
// One Client therefore corresponds to one backend; create it once at
// startup and share it.
//
// # Errors
//
// Errors are wrapped with the operation and label ("llm json
// vacancy_relevance: ...") and can be tested with errors.Is against
// ErrBreakerOpen, ErrTimeout, ErrRateLimited (errors.As *RateLimitError for
// Retry-After), ErrInvalidJSON and ErrEmpty. A call cancelled by the caller
// returns an error matching the caller's context error.
//
// # Metrics
//
// Registered on the Registerer from WithRegistry (a private registry
// otherwise, so tests never collide): llm_calls_total{label,model,outcome},
// llm_call_duration_seconds{label,model} (time spent on the provider call,
// excluding queueing), llm_tokens_total{label,model,kind} (when the
// provider reports usage), llm_breaker_state (0 closed, 1 half-open, 2 open)
// and llm_in_flight. Several Clients may share a registry; they then share
// these series.
//
// # Provider URLs
//
// For "ollama" Config.URL is the server root (default
// http://127.0.0.1:11434). For "openai" it is the API base including its
// version path, used as is: http://host:port/v1 for vLLM, llama.cpp or
// LM Studio, https://api.openai.com/v1 (the default). Nothing is appended,
// because compatible APIs disagree on that path (/openai/v1, /api/v1, ...).
package llm
