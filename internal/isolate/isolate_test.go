package isolate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/internal/isolate"
)

// The test binary is its own child, as the bot is: started with "child"
// and a behaviour, it does that and exits before any test runs.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "child" {
		isolate.Limit(64 << 20)
		in, _ := io.ReadAll(os.Stdin)
		switch os.Args[2] {
		case "echo":
			fmt.Print(strings.ToUpper(string(in)))
		case "env":
			fmt.Print(strings.Join(os.Environ(), "\n"))
		case "spin":
			for {
			}
		case "panic":
			panic("the parser fell over on " + string(in))
		case "bomb":
			var kept [][]byte
			for {
				kept = append(kept, bytes.Repeat([]byte{1}, 8<<20))
			}
		case "flood":
			for {
				fmt.Print(strings.Repeat("x", 4096))
			}
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func child(t *testing.T, behaviour string, timeout time.Duration) isolate.Child {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	return isolate.Child{Path: exe, Args: []string{"child", behaviour}, Timeout: timeout, MaxOutput: 1 << 20}
}

func TestChildAnswers(t *testing.T) {
	t.Parallel()
	out, err := child(t, "echo", time.Minute).Run(context.Background(), []byte("résumé"))
	require.NoError(t, err)
	require.Equal(t, "RÉSUMÉ", string(out))
}

func TestChildGetsNoEnvironment(t *testing.T) {
	t.Setenv("TELEGRAM_TOKEN", "123:secret")
	out, err := child(t, "env", time.Minute).Run(context.Background(), nil)
	require.NoError(t, err)
	require.NotContains(t, string(out), "secret", "the bot's settings stay with the bot")
}

// A child that never ends is killed at its deadline; Run returns at once
// after, with ErrTimeout.
func TestSpinningChildIsKilledAtItsDeadline(t *testing.T) {
	t.Parallel()
	_, err := child(t, "spin", 300*time.Millisecond).Run(context.Background(), []byte("%PDF-"))
	require.ErrorIs(t, err, isolate.ErrTimeout)
	var crash *isolate.CrashError
	require.False(t, errors.As(err, &crash))
}

func TestPanickingChildIsACrash(t *testing.T) {
	t.Parallel()
	_, err := child(t, "panic", time.Minute).Run(context.Background(), []byte("page 3"))
	var crash *isolate.CrashError
	require.ErrorAs(t, err, &crash)
	require.Contains(t, crash.Tail, "the parser fell over on page 3")
	require.NotErrorIs(t, err, isolate.ErrTimeout)
}

func TestFloodingChildIsStoppedAtMaxOutput(t *testing.T) {
	t.Parallel()
	_, err := child(t, "flood", time.Minute).Run(context.Background(), nil)
	var crash *isolate.CrashError
	require.ErrorAs(t, err, &crash)
	require.Contains(t, crash.Error(), "more than 1048576 bytes")
}

// The caller stopping is no fault of the input: neither ErrTimeout nor a
// crash, and the child is killed all the same.
func TestCallerStoppingIsNotTheInputsFault(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := child(t, "spin", time.Hour).Run(ctx, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, isolate.ErrTimeout)
	var crash *isolate.CrashError
	require.False(t, errors.As(err, &crash))
}

func TestMissingBinaryIsNeitherTimeoutNorCrash(t *testing.T) {
	t.Parallel()
	_, err := isolate.Child{Path: "/nonexistent/switchboard"}.Run(context.Background(), nil)
	require.Error(t, err)
	require.NotErrorIs(t, err, isolate.ErrTimeout)
	var crash *isolate.CrashError
	require.False(t, errors.As(err, &crash))
}

// A child whose heap passes Limit ends at once, a crash that says why.
func TestChildPastItsMemoryLimitIsACrash(t *testing.T) {
	t.Parallel()
	_, err := child(t, "bomb", time.Minute).Run(context.Background(), nil)
	var crash *isolate.CrashError
	require.ErrorAs(t, err, &crash)
	require.Contains(t, crash.Tail, "isolate: memory limit")
}
