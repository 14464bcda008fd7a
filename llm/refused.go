package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"switchboard/domain"
)

// ErrRefused: the provider refused the call in a way no retry fixes (HTTP
// 401, 403 or 404: a wrong key, a model the server does not have; a 402
// or a 429 insufficient_quota: the account's quota or credit spent). See
// RefusedError. It is a domain.ErrLLMRefused.
var ErrRefused error = &classed{"llm: refused by the provider", domain.ErrLLMRefused}

// RefusedError is returned when the provider answers 401, 403 or 404, or
// says the account's quota or credit is spent (402, 429
// insufficient_quota). It matches ErrRefused. A 403 for one input a
// moderation flagged is no refusal: it fails that call only. A refusal
// opens the circuit breaker at once: every further call would be refused the same way until someone acts, so
// calls fail fast with this same error until the breaker's open period
// has passed and a probe finds the model (or key) fixed.
type RefusedError struct {
	Status int    // the HTTP status
	Model  string // the model the refused call asked for
	// Reason says what is wrong and how to fix it, e.g.
	// `model "qwen2.5:7b" not found: run "ollama pull qwen2.5:7b"`.
	Reason string
	// said is the server's own message, for the log.
	said string
}

func (e *RefusedError) Error() string {
	s := "llm: refused (HTTP " + fmt.Sprint(e.Status) + "): " + e.Reason
	if e.said != "" {
		s += " (server said: " + e.said + ")"
	}
	return s
}

// Is makes errors.Is(err, ErrRefused) hold, and so its class's.
func (e *RefusedError) Is(target error) bool {
	return target == ErrRefused || errors.Is(ErrRefused, target)
}

// refusalFor builds the RefusedError for a 401/403/404, with the fix for
// this provider.
func refusalFor(provider string, status int, model, said string) *RefusedError {
	e := &RefusedError{Status: status, Model: model, said: serverSaid(said, 200)}
	switch {
	case status == http.StatusUnauthorized:
		e.Reason = "401: check LLM_API_KEY"
	case status == http.StatusForbidden:
		e.Reason = fmt.Sprintf("403: the key may not use model %q: check LLM_API_KEY and the key's access", model)
	case status == http.StatusPaymentRequired || status == http.StatusTooManyRequests:
		e.Reason = fmt.Sprintf("%d: the quota or credit of LLM_API_KEY's account is spent: check its plan and billing", status)
	case provider == ProviderOllama && strings.Contains(said, "not found"):
		e.Reason = fmt.Sprintf("model %q not found: run \"ollama pull %s\"", model, model)
	case provider == ProviderOllama:
		e.Reason = fmt.Sprintf("HTTP 404 for model %q: check LLM_URL (the Ollama server root) and run \"ollama pull %s\"", model, model)
	default:
		e.Reason = fmt.Sprintf("model %q not found: check LLM_MODEL / LLM_STRONG_MODEL / LLM_EMBED_MODEL against the server's GET /v1/models, and LLM_URL", model)
	}
	return e
}

// Refused reports whether a refusal (HTTP 401, 403 or 404) holds the
// breaker open: calls fail fast with the RefusedError. Once the open
// period is over (half-open) it reports false, so that whoever waits on it
// makes the probe call that finds out whether the fix is in; Health still
// names the refusal until a call succeeds.
func (c *Client) Refused() bool {
	if c.BreakerState() != BreakerOpen {
		return false
	}
	c.stMu.Lock()
	defer c.stMu.Unlock()
	return c.refusal != nil
}

// Refusal is the refusal that holds the breaker open or probing (nil
// when none does): unlike Refused it stays set through the half-open
// probes, until a call succeeds.
func (c *Client) Refusal() *RefusedError {
	if c.BreakerState() == BreakerClosed {
		return nil
	}
	c.stMu.Lock()
	defer c.stMu.Unlock()
	return c.refusal
}

// Answered reports whether a call has succeeded since the client was
// built: what proves, to a replica that did not see a refusal begin, that
// it is over.
func (c *Client) Answered() bool { return c.answered.Load() }

// Health is the client's state as an operator should see it.
type Health struct {
	State BreakerState
	// Reason is empty while healthy; with a refusal it is the
	// RefusedError's text (what to fix), otherwise it says the breaker is
	// open (or probing) after failures and names the last one.
	Reason string
	// Since is when the breaker entered State.
	Since time.Time
}

// Health reports the breaker's state and why it is not closed.
func (c *Client) Health() Health {
	st := c.BreakerState()
	c.stMu.Lock()
	h := Health{State: st, Since: c.stateSince}
	refusal, last := c.refusal, c.lastFailure
	c.stMu.Unlock()
	switch {
	case st == BreakerClosed:
	case refusal != nil:
		h.Reason = refusal.Error()
	case st == BreakerOpen:
		h.Reason = "circuit breaker open after repeated failures"
		if last != "" {
			h.Reason += "; last: " + last
		}
	default:
		h.Reason = "circuit breaker half-open: probing the model server after failures"
		if last != "" {
			h.Reason += "; last: " + last
		}
	}
	return h
}

// MissingModel is a configured model the server does not serve.
type MissingModel struct {
	Model string
	// Setting is the variable that names it (LLM_MODEL, LLM_STRONG_MODEL,
	// LLM_EMBED_MODEL).
	Setting string
	// Fix says what to do, e.g. `ollama pull qwen2.5:7b`.
	Fix string
}

// CheckModels asks the server which models it serves (Ollama GET
// /api/tags, OpenAI-compatible GET <base>/models) and returns each
// configured model it lacks, with the fix. It does not touch the breaker:
// it is for the start-up log and status pages; a call to a missing model
// refuses and opens the breaker by itself. A 401/403/404 from the listing
// is returned as a *RefusedError.
func (c *Client) CheckModels(ctx context.Context) ([]MissingModel, error) {
	served, err := c.servedModels(ctx)
	if err != nil {
		return nil, fmt.Errorf("llm check models: %w", err)
	}
	type want struct{ model, setting string }
	wants := []want{{c.cfg.Model, "LLM_MODEL"}}
	if c.cfg.StrongModel != c.cfg.Model {
		wants = append(wants, want{c.cfg.StrongModel, "LLM_STRONG_MODEL"})
	}
	if c.cfg.EmbedModel != "" {
		wants = append(wants, want{c.cfg.EmbedModel, "LLM_EMBED_MODEL"})
	}
	var missing []MissingModel
	for _, w := range wants {
		if c.serves(served, w.model) {
			continue
		}
		m := MissingModel{Model: w.model, Setting: w.setting}
		if c.cfg.Provider == ProviderOllama {
			m.Fix = "ollama pull " + w.model
		} else {
			shown := served
			if len(shown) > 10 {
				shown = append(shown[:10:10], "…")
			}
			m.Fix = fmt.Sprintf("the server does not serve %q: set %s to one it serves (%s)", w.model, w.setting, strings.Join(shown, ", "))
		}
		missing = append(missing, m)
	}
	return missing, nil
}

// serves matches a configured name against the listing. Ollama lists
// "name:tag" and treats a name without a tag as ":latest".
func (c *Client) serves(served []string, model string) bool {
	if slices.Contains(served, model) {
		return true
	}
	if c.cfg.Provider == ProviderOllama {
		norm := func(s string) string {
			if !strings.Contains(s, ":") {
				return s + ":latest"
			}
			return s
		}
		for _, s := range served {
			if norm(s) == norm(model) {
				return true
			}
		}
	}
	return false
}

func (c *Client) servedModels(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	var endpoint string
	if c.cfg.Provider == ProviderOllama {
		u, err := url.Parse(c.cfg.URL)
		if err != nil {
			return nil, err
		}
		endpoint = u.JoinPath("api", "tags").String()
	} else {
		endpoint = c.cfg.URL + "/models"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if c.cfg.Provider == ProviderOpenAI {
		req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := readBody(resp, "model listing")
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, refusalFor(c.cfg.Provider, resp.StatusCode, c.cfg.Model, openaiErrorText(raw))
	case resp.StatusCode >= 400:
		return nil, fmt.Errorf("model listing %s: HTTP %d: %s", endpoint, resp.StatusCode, serverSaid(strings.TrimSpace(string(raw)), 200))
	}
	var list struct {
		Models []struct {
			Name  string `json:"name"`
			Model string `json:"model"`
		} `json:"models"`
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("model listing: %w", err)
	}
	var out []string
	for _, m := range list.Models {
		out = append(out, m.Name)
		if m.Model != "" && m.Model != m.Name {
			out = append(out, m.Model)
		}
	}
	for _, d := range list.Data {
		out = append(out, d.ID)
	}
	return out, nil
}
