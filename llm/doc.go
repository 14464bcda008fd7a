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
// and get three operations: Text (free-form answer), JSON (decoded and
// optionally validated into the caller's type) and Embed. Chat goes through
// two small HTTP clients of our own (ollama.go, openai.go) selected by
// Config.Provider; embeddings through langchaingo's. The Ollama one exists
// because langchaingo's allocates a 512 KB buffer per call, which dominated
// the memory pipeline's CPU; both exist because each call must send what
// langchaingo's call options cannot carry (num_ctx, think, keep_alive, a
// per-call JSON schema) and read what it drops (done_reason /
// finish_reason, the reasoning fields, the HTTP status of a refusal).
//
// # Answers as models really give them
//
// Every answer, Text and JSON, goes through one extractor (extract.go),
// because real servers do not answer clean JSON:
//
//   - Reasoning is dropped: leading <think>…</think> blocks (empty ones
//     too), everything before a lone closing </think> (templates that put
//     the opening tag in the prompt), a UTF-8 BOM; the reasoning fields
//     servers split off (Ollama message.thinking, OpenAI-compatible
//     reasoning_content / reasoning) are never part of the answer. A Text
//     answer loses only these, so a user never sees the model think.
//   - For JSON: a ```json fence (with or without prose around it), prose
//     before the first '{' or '[', and anything after the first complete
//     value ("Note: …") are dropped; a value that is still not valid JSON
//     (single quotes, trailing commas, comments, Python constants) is fixed
//     by github.com/kaptinlin/jsonrepair. The value must be complete in
//     the answer: an unbalanced value is refused, never completed.
//   - Decoding coerces only what is unambiguous: a string holding a number
//     into a numeric field ("80" → 80), a whole number written as a float
//     into an integer field (80.0 → 80), "true"/"false" (any case) into a
//     boolean. A fraction into an integer field (a score of 79.6) is
//     refused, not rounded: an integer field says the domain wants whole
//     numbers, and rounding would guess (for an id it would point at
//     another message). The schema sent says "integer", so this is rare.
//     Then the target's own Validate runs.
//
// Still rejected, each with an error wrapping ErrInvalidJSON (so callers
// that retry or skip keep working) that names its cause: an answer cut off
// at the answer budget (done_reason / finish_reason "length", ErrTruncated,
// checked before any repair; the error names the setting to raise:
// LLM_MAX_TOKENS_JSON or the call's MaxTokens, and for Ollama LLM_NUM_CTX),
// an answer that is only reasoning (ErrReasoningOnly: empty content with
// the JSON in the reasoning field, or an unclosed <think>), an empty
// object {} for a target with required fields (fields without omitempty:
// zero values must not pass silently as an answer), prose without JSON,
// and whatever Validate refuses. Each repair an accepted answer needed is
// counted in llm_answer_repairs_total{model,kind} (think, bom, fence,
// prose, trailing, coerce_number, coerce_bool, jsonrepair), so an operator
// sees what their model needs.
//
// # What each request carries
//
// JSON calls ask for structured output with the target's JSON schema
// (SchemaFor: the type's own JSONSchema() if it has one, else derived by
// reflection: properties by encoding/json name, fields without omitempty
// required, no additional properties): Ollama in "format", OpenAI-compatible
// servers in response_format {type: json_schema, strict when the schema
// qualifies}. A server that answers such a request 400 is asked again once
// with json_object; if that is accepted the client remembers and asks for
// json_object from then on (a 400 for any other reason changes nothing).
//
// Ollama requests carry options.num_ctx = Config.NumCtx on every request
// to every model (DefaultNumCtx 16384: the memory assembler's 8000
// estimated tokens plus instructions, its answer and room for the
// estimate running low on Cyrillic text; never varied per call, because
// Ollama reloads the model whenever it changes), think = Config.Think
// (false by default, so a reasoning model spends the budget on the
// answer), and keep_alive when Config.KeepAlive is set. Every call has an
// answer budget (num_predict / max_tokens): Request.MaxTokens, else
// Config.MaxTokensJSON or Config.MaxTokensText.
//
// # A refused model is said plainly
//
// A 401, 403 or 404 from the provider (wrong key, model not found) is a
// *RefusedError matching ErrRefused, whose Reason names the fix
// (`model "qwen2.5:7b" not found: run "ollama pull qwen2.5:7b"`, `401:
// check LLM_API_KEY`). So is a spent quota or credit (OpenAI's 429
// insufficient_quota, OpenRouter's 402), which no wait brings back, unlike
// a rate limit; but not OpenRouter's 403 for an input its moderation
// flagged, which fails that call only, as another 4xx does. A refusal
// opens the breaker at once, not after consecutive failures; while open, calls fail fast with an error that
// matches both ErrBreakerOpen and the same RefusedError; after the open
// period one probe goes through, and a success closes it. Health reports
// the state and the reason, Refused (and Port.Refused) whether a refusal
// holds, and CheckModels asks the server what it serves (GET /api/tags,
// GET <base>/models) and returns each configured model it lacks with the
// fix; it never touches the breaker.
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
//     429, transport errors and empty answers; a refusal (401/403/404)
//     opens it at once. It does not count what says nothing about the
//     backend's health: invalid JSON or failed validation (the model did
//     answer; callers decide whether to retry), an answer that is only
//     reasoning, other 4xx (the request was at fault), and the caller's
//     own cancellation.
//
// One Client therefore corresponds to one backend; create it once at
// startup and share it.
//
// # Errors
//
// Errors are wrapped with the operation and label ("llm json
// vacancy_relevance: ...") and can be tested with errors.Is against
// ErrBreakerOpen, ErrTimeout, ErrRateLimited (errors.As *RateLimitError for
// Retry-After), ErrRefused (errors.As *RefusedError), ErrInvalidJSON (with
// ErrTruncated and ErrReasoningOnly among its causes) and ErrEmpty. A call cancelled by the caller
// returns an error matching the caller's context error. Each sentinel but
// ErrEmpty is also one of the domain's LLM error classes (ErrBreakerOpen
// matches domain.ErrLLMDown, ErrRateLimited domain.ErrLLMBusy, and so on),
// which is what the workflows test for: the ports pass errors on as they
// are.
//
// # Metrics
//
// Registered on the Registerer from WithRegistry (a private registry
// otherwise, so tests never collide): llm_calls_total{label,model,outcome},
// llm_call_duration_seconds{label,model} (time spent on the provider call,
// excluding queueing), llm_tokens_total{label,model,kind} (when the
// provider reports usage), llm_breaker_state (0 closed, 1 half-open, 2 open),
// llm_in_flight and llm_answer_repairs_total{model,kind}. The outcome label
// includes "refused" for a 401/403/404. Several Clients may share a registry; they then share
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
