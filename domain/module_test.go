package domain_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
)

// WakeOn wakes on the listener's connect (a notification may have been
// missed) and on every notification, whatever its payload.
func TestWakeOnWakesOnConnectAndEveryNotification(t *testing.T) {
	var woke int
	var channel string
	listen := func(_ context.Context, ch string, onConnect func(), onNotify func(string)) {
		channel = ch
		onConnect()
		onNotify("")
		onNotify("42")
	}
	domain.WakeOn("vacancy_queue", func() { woke++ })(context.Background(), listen)
	require.Equal(t, "vacancy_queue", channel)
	require.Equal(t, 3, woke)
}

// Uncounted keeps a job's error and drops what it counted.
func TestUncountedKeepsTheError(t *testing.T) {
	boom := errors.New("boom")
	run := domain.Uncounted(func(context.Context) (int, error) { return 3, boom })
	require.ErrorIs(t, run(context.Background()), boom)
	require.NoError(t, domain.Uncounted(func(context.Context) (int, error) { return 3, nil })(context.Background()))
}
