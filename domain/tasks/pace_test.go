package tasks_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain/tasks"
)

// The earliest instant one more creation fits: the first creation, from
// the newest, that leaves no room must have left its window first.
func TestFitAt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration, n int) tasks.Creation { return tasks.Creation{At: now.Add(-d), N: n} }
	windows := []tasks.Window{{Limit: 2, Per: time.Minute}, {Limit: 3, Per: time.Hour}}
	for _, tc := range []struct {
		name    string
		created []tasks.Creation
		need    int
		want    time.Duration // from now
	}{
		{"nothing made", nil, 1, 0},
		{"room in both", []tasks.Creation{ago(10*time.Second, 1)}, 1, 0},
		{"the minute full", []tasks.Creation{ago(10*time.Second, 1), ago(50*time.Second, 1)}, 1, 10 * time.Second},
		{"a label and its issue count two", []tasks.Creation{ago(10*time.Second, 2)}, 1, 50 * time.Second},
		{"one made a minute ago has left the minute", []tasks.Creation{ago(10*time.Second, 1), ago(time.Minute, 1)}, 1, 0},
		{"the hour full", []tasks.Creation{ago(10*time.Second, 1), ago(70*time.Second, 1), ago(30*time.Minute, 1)}, 1, 30 * time.Minute},
		{"the hour's the later", []tasks.Creation{ago(50*time.Second, 1), ago(55*time.Second, 1), ago(59*time.Minute, 1)}, 1, time.Minute},
		{"the minute's the later", []tasks.Creation{ago(10*time.Second, 1), ago(50*time.Second, 1), ago(59*time.Minute+59*time.Second, 1)}, 1, 10 * time.Second},
		{"need two", []tasks.Creation{ago(10*time.Second, 1), ago(20*time.Minute, 1)}, 2, 40 * time.Minute},
		{"need more than a limit: everything leaves", []tasks.Creation{ago(10*time.Second, 1)}, 5, 59*time.Minute + 50*time.Second},
	} {
		require.Equal(t, now.Add(tc.want), tasks.FitAt(now, tc.created, windows, tc.need), tc.name)
	}
	require.Equal(t, now, tasks.FitAt(now, []tasks.Creation{ago(time.Second, 9)}, []tasks.Window{{Limit: 0, Per: time.Minute}, {Limit: 3}}, 1),
		"a window without a limit or a period bounds nothing")
	require.Equal(t, 2, len(tasks.GitHubContent()))
}

// Against a plain count: at FitAt one more creation fits every window,
// and an instant before it (if later than now) it does not.
func TestFitAtAgainstACount(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	windows := []tasks.Window{{Limit: 5, Per: time.Minute}, {Limit: 12, Per: 10 * time.Minute}}
	fits := func(at time.Time, created []tasks.Creation) bool {
		for _, w := range windows {
			n := 1
			for _, c := range created {
				if c.At.After(at.Add(-w.Per)) {
					n += c.N
				}
			}
			if n > w.Limit {
				return false
			}
		}
		return true
	}
	for range 2000 {
		created := make([]tasks.Creation, rng.IntN(15))
		for i := range created {
			created[i] = tasks.Creation{At: now.Add(-time.Duration(rng.Int64N(int64(12 * time.Minute)))), N: 1 + rng.IntN(2)}
		}
		slices.SortFunc(created, func(a, b tasks.Creation) int { return b.At.Compare(a.At) })
		at := tasks.FitAt(now, created, windows, 1)
		require.False(t, at.Before(now))
		require.True(t, fits(at, created), "%v at %v", created, at)
		if at.After(now) {
			require.False(t, fits(at.Add(-time.Microsecond), created), "%v: fits before %v", created, at)
		}
	}
}
