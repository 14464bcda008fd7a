package llm_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/llm"
	"switchboard/llm/llmtest"
)

// classes are the domain's LLM error classes; a failure matches its own
// and no other (but the turned-away refusal, see below).
var classes = []error{domain.ErrLLMInvalidAnswer, domain.ErrLLMTimeout, domain.ErrLLMBusy, domain.ErrLLMRefused, domain.ErrLLMDown}

func assertClass(t *testing.T, err error, want ...error) {
	t.Helper()
	require.Error(t, err)
	for _, c := range classes {
		if slices.Contains(want, c) {
			assert.ErrorIs(t, err, c)
		} else {
			assert.NotErrorIs(t, err, c)
		}
	}
}

// The client's errors are the domain's LLM classes, so a port passes them
// on unmapped and a workflow tells why a call failed without importing
// this package; its own sentinels still match under them.
func TestErrorsAreTheDomainsClasses(t *testing.T) {
	t.Parallel()
	// Each fault's own sentinel, then its class (none for a failure that
	// is the model's own).
	faults := map[string]struct {
		fault      llmtest.Fault
		own, class error
	}{
		"invalid JSON":            {llmtest.InvalidJSON(), llm.ErrInvalidJSON, domain.ErrLLMInvalidAnswer},
		"past the call's timeout": {llmtest.Hang(), llm.ErrTimeout, domain.ErrLLMTimeout},
		"429":                     {llmtest.RateLimit(time.Second), llm.ErrRateLimited, domain.ErrLLMBusy},
		"401":                     {llmtest.HTTPError(http.StatusUnauthorized), llm.ErrRefused, domain.ErrLLMRefused},
		"500":                     {llmtest.ServerError(), nil, nil},
		"empty":                   {llmtest.EmptyContent(), llm.ErrEmpty, nil},
	}
	for name, tc := range faults {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			forEachProvider(t, func(t *testing.T, provider string) {
				srv := newServer(t)
				srv.On(llmtest.PromptContains("p")).Fault(tc.fault)
				c, _ := newClient(t, srv, provider, nil)
				var out struct{ A int }
				err := c.JSON(context.Background(), llm.Request{Prompt: "p", Timeout: 200 * time.Millisecond}, &out)
				if tc.own != nil {
					assert.ErrorIs(t, err, tc.own)
				}
				if tc.class == nil {
					assertClass(t, err)
				} else {
					assertClass(t, err, tc.class)
				}
			})
		})
	}
}

// A call the breaker turns away is the model down, whatever opened it;
// one turned away while a refusal holds it open is refused as well, so
// the work waits for the fix and says which.
func TestTurnedAwayIsDown(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	srv.On(llmtest.PromptContains("failing")).Fault(llmtest.ServerError())
	srv.On(llmtest.PromptContains("refused")).Fault(llmtest.HTTPError(http.StatusUnauthorized))
	ctx := context.Background()
	var out struct{}

	failing, _ := newClient(t, srv, llm.ProviderOllama, nil, llm.WithBreaker(2, time.Hour))
	port := llm.Port{Client: failing, Label: "port"}
	for range 2 {
		assertClass(t, port.JSON(ctx, "", "failing", &out))
	}
	require.Equal(t, llm.BreakerOpen, failing.BreakerState(), "two failures opened it")
	err := port.JSON(ctx, "", "anything", &out)
	assertClass(t, err, domain.ErrLLMDown)
	assert.ErrorIs(t, err, llm.ErrBreakerOpen, "the client's own error stays wrapped")

	refused, _ := newClient(t, srv, llm.ProviderOllama, nil, llm.WithBreaker(2, time.Hour))
	port = llm.Port{Client: refused, Label: "port"}
	assertClass(t, port.JSON(ctx, "", "refused", &out), domain.ErrLLMRefused)
	require.Equal(t, llm.BreakerOpen, refused.BreakerState(), "a refusal opens it at once")
	assertClass(t, port.JSON(ctx, "", "anything", &out), domain.ErrLLMDown, domain.ErrLLMRefused)
}
