package testkit

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFaultsAreUsedInOrderByWhatTheyCover(t *testing.T) {
	var q Faults[string]
	q.Add(0, "none")
	q.Add(2, "search")
	q.Add(1, "any")
	require.Equal(t, 3, q.Pending())
	isSearch := func(f string) bool { return f == "search" }
	for range 2 {
		f, ok := q.Take(isSearch)
		require.True(t, ok)
		require.Equal(t, "search", f)
	}
	_, ok := q.Take(isSearch)
	require.False(t, ok, "used up")
	f, ok := q.Take(func(string) bool { return true })
	require.True(t, ok)
	require.Equal(t, "any", f)
	require.Zero(t, q.Pending())
	q.Add(1, "again")
	q.Clear()
	require.Zero(t, q.Pending())
}

func TestJSONKeepsHTMLAndWriteBodyDeclaresItsLength(t *testing.T) {
	b := JSON("fake", map[string]string{"body": "<p>a & b</p>"})
	require.Equal(t, `{"body":"<p>a & b</p>"}`, string(b))
	require.PanicsWithValue(t, "fake: json: unsupported type: chan int", func() { JSON("fake", make(chan int)) })
	w := httptest.NewRecorder()
	require.Equal(t, 418, WriteBody(w, 418, "text/plain", []byte("tea")))
	require.Equal(t, 418, w.Code)
	require.Equal(t, "3", w.Header().Get("Content-Length"))
	require.Equal(t, "text/plain", w.Header().Get("Content-Type"))
	require.Equal(t, "tea", w.Body.String())
}

func TestMostWithinCountsAHalfOpenSpan(t *testing.T) {
	at := func(ms ...int) []time.Time {
		var out []time.Time
		for _, m := range ms {
			out = append(out, time.Unix(0, 0).Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	require.Zero(t, MostWithin(nil, time.Second))
	require.Equal(t, 1, MostWithin(at(0, 1000, 2000), time.Second), "the span's end is out")
	require.Equal(t, 3, MostWithin(at(0, 400, 999, 1500, 2600), time.Second))
	require.Equal(t, 2, MostWithin(at(0, 0, 5000), time.Second), "equal times both count")
}
