package llm_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"switchboard/llm"
	"switchboard/llm/llmtest"
)

// The port names why a call was not answered in the domain's words: a
// rate limit is the model's load (Busy), a call the breaker turned away
// is the model down (Down); a port without Down keeps calling both busy.
func TestPortTellsTheLoadFromTheBreaker(t *testing.T) {
	errBusy, errDown := errors.New("busy"), errors.New("down")
	srv := newServer(t)
	srv.On(llmtest.PromptContains("limited")).Fault(llmtest.RateLimit(time.Second))
	srv.On(llmtest.PromptContains("failing")).Fault(llmtest.ServerError())
	c, _ := newClient(t, srv, llm.ProviderOllama, nil, llm.WithBreaker(2, time.Hour))
	both := llm.Port{Client: c, Label: "port", Busy: errBusy, Down: errDown}
	busyOnly := llm.Port{Client: c, Label: "port", Busy: errBusy}
	ctx := context.Background()
	var out struct{}

	err := both.JSON(ctx, "", "limited", &out)
	require.ErrorIs(t, err, errBusy)
	assert.NotErrorIs(t, err, errDown)
	assert.ErrorIs(t, err, llm.ErrRateLimited, "the client's error stays wrapped")
	require.Equal(t, llm.BreakerClosed, c.BreakerState(), "one failure of the two that open it")

	err = both.JSON(ctx, "", "failing", &out)
	require.Error(t, err)
	assert.NotErrorIs(t, err, errBusy, "the model's own failure is the caller's")
	assert.NotErrorIs(t, err, errDown)
	require.Equal(t, llm.BreakerOpen, c.BreakerState(), "the second failure opened it")

	err = both.JSON(ctx, "", "anything", &out)
	require.ErrorIs(t, err, errDown)
	assert.NotErrorIs(t, err, errBusy)
	assert.ErrorIs(t, err, llm.ErrBreakerOpen)

	err = busyOnly.JSON(ctx, "", "anything", &out)
	require.ErrorIs(t, err, errBusy)
	assert.ErrorIs(t, err, llm.ErrBreakerOpen)
}
