package llmtest

import (
	"math"
	"strings"
	"time"
	"unicode"
)

// Provider identifies which API a request arrived on.
type Provider string

const (
	Ollama Provider = "ollama"
	OpenAI Provider = "openai"
)

// Kind separates generation from embedding requests.
type Kind string

const (
	KindChat  Kind = "chat"
	KindEmbed Kind = "embed"
)

// Message is one chat message as the client sent it.
type Message struct {
	Role    string
	Content string
}

// Request is the server's record of one chat or embedding request. Values
// handed to matchers and reply funcs, and returned by Requests, share their
// slices; treat them as read-only.
type Request struct {
	Provider Provider
	Kind     Kind
	Endpoint string // URL path, e.g. "/api/chat"
	Model    string

	Messages []Message
	System   string   // all system messages, joined by "\n"
	Prompt   string   // the last user message; for embeddings the inputs joined by "\n"
	Input    []string // embedding inputs

	JSON        bool     // JSON output requested (Ollama format, OpenAI response_format)
	Format      string   // Ollama: "json" or the raw schema; OpenAI: response_format.type
	Stream      bool     // the client asked for a streamed answer
	Temperature *float64 // as sent, nil if absent
	MaxTokens   int      // Ollama num_predict, OpenAI max_completion_tokens or max_tokens
	// Schema is the JSON schema asked for: Ollama's format object (also in
	// Format), OpenAI's response_format.json_schema (name, strict, schema)
	// as sent; "" without one.
	Schema string
	// Ollama-only settings, as sent: options.num_ctx (0 if absent), think
	// (nil if absent) and keep_alive (its raw JSON, "" if absent).
	NumCtx    int
	Think     *bool
	KeepAlive string

	// Rule is the name of the rule that served the request, "" if none did.
	Rule string
	// Fault names what the server did instead of answering normally: an
	// injected fault (see Fault.String) or one of its own refusals,
	// "no_rule", "no_reply" (the rule has no reply configured) or
	// "unauthorized". Empty when the request was answered.
	Fault string
	Time  time.Time

	// Lowercased views computed on first use by matchers, so many rules
	// matching on the same request do not redo the work.
	sysLower   *string
	promLower  *string
	promTokens map[string]struct{}
}

func (r *Request) systemLower() string {
	if r.sysLower == nil {
		s := strings.ToLower(r.System)
		r.sysLower = &s
	}
	return *r.sysLower
}

func (r *Request) promptLower() string {
	if r.promLower == nil {
		s := strings.ToLower(r.Prompt)
		r.promLower = &s
	}
	return *r.promLower
}

func (r *Request) promptWords() map[string]struct{} {
	if r.promTokens == nil {
		r.promTokens = make(map[string]struct{})
		forEachWord(r.promptLower(), func(w string) { r.promTokens[w] = struct{}{} })
	}
	return r.promTokens
}

// fillDerived sets System and Prompt from Messages.
func (r *Request) fillDerived() {
	var sys []string
	for _, m := range r.Messages {
		switch m.Role {
		case "system":
			sys = append(sys, m.Content)
		case "user":
			r.Prompt = m.Content
		}
	}
	r.System = strings.Join(sys, "\n")
}

// forEachWord calls fn for each maximal run of letters and digits in s.
// Callers lowercase s first; fn receives substrings of s, so no allocation.
func forEachWord(s string, fn func(string)) {
	start := -1
	for i, c := range s {
		word := unicode.IsLetter(c) || unicode.IsDigit(c)
		switch {
		case word && start < 0:
			start = i
		case !word && start >= 0:
			fn(s[start:i])
			start = -1
		}
	}
	if start >= 0 {
		fn(s[start:])
	}
}

func countWords(s string) int {
	n := 0
	forEachWord(s, func(string) { n++ })
	return n
}

// Embedding returns the vector the server answers for text: a signed
// hashed bag of words (lowercased letter/digit runs, FNV-1a into dim
// buckets), L2-normalised. Texts sharing words therefore have a higher
// cosine similarity than texts that share none, which is enough for
// similarity and deduplication tests to be meaningful. A text without words
// maps to the first unit vector rather than the zero vector, so cosine
// similarity is always defined.
func Embedding(text string, dim int) []float32 {
	if dim <= 0 {
		dim = DefaultEmbeddingDim
	}
	v := make([]float32, dim)
	n := 0
	forEachWord(strings.ToLower(text), func(w string) {
		h := fnv1a(w)
		sign := float32(1)
		if h>>63 == 1 {
			sign = -1
		}
		v[h%uint64(dim)] += sign
		n++
	})
	if n == 0 {
		v[0] = 1
		return v
	}
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		// Every word cancelled out in the same bucket: still return a
		// unit vector.
		v[0] = 1
		return v
	}
	inv := float32(1 / math.Sqrt(sum))
	for i := range v {
		v[i] *= inv
	}
	return v
}

func fnv1a(s string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime
	}
	return h
}

// Chunks splits a reply the way the server streams it: one chunk per word,
// each keeping the whitespace that follows it, so the chunks concatenate
// back to s exactly.
func Chunks(s string) []string {
	var out []string
	start := 0
	inSpace := false
	for i, c := range s {
		sp := unicode.IsSpace(c)
		if inSpace && !sp {
			out = append(out, s[start:i])
			start = i
		}
		inSpace = sp
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
