package storage_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/hh"
	"switchboard/storage"
	"switchboard/storage/storagetest"
)

// obtainOnce is a renew that keeps a usable stored token and otherwise
// "obtains" token, counting how often it did.
func obtainOnce(token string, calls *atomic.Int32) func(context.Context, *hh.StoredToken) (*hh.NewToken, error) {
	return func(_ context.Context, stored *hh.StoredToken) (*hh.NewToken, error) {
		if stored != nil && !stored.Refused {
			return nil, nil
		}
		calls.Add(1)
		return &hh.NewToken{Token: token}, nil
	}
}

func TestHHAppTokenObtainedOnceThenKept(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	st := storagetest.New(t)

	var calls atomic.Int32
	var seen []*hh.StoredToken
	renew := func(ctx context.Context, stored *hh.StoredToken) (*hh.NewToken, error) {
		seen = append(seen, stored)
		return obtainOnce("tok-1", &calls)(ctx, stored)
	}
	got, err := st.HHTokens().AppToken(ctx, "app", renew)
	require.NoError(t, err)
	require.Equal(t, hh.StoredToken{Token: "tok-1"}, got)

	got, err = st.HHTokens().AppToken(ctx, "app", renew)
	require.NoError(t, err)
	require.Equal(t, "tok-1", got.Token)
	require.False(t, got.Refused)
	require.False(t, got.Expires, "HH's application tokens do not expire unless expires_in says so")
	require.Equal(t, int32(1), calls.Load())
	require.Len(t, seen, 2)
	require.Nil(t, seen[0], "nothing stored at first")
	require.NotNil(t, seen[1])
	require.Equal(t, "tok-1", seen[1].Token)
	require.GreaterOrEqual(t, seen[1].Age, time.Duration(0))
	require.Less(t, seen[1].Age, time.Minute)

	// Another application's token is its own.
	other, err := st.HHTokens().AppToken(ctx, "other-app", obtainOnce("tok-other", &calls))
	require.NoError(t, err)
	require.Equal(t, "tok-other", other.Token)
	var rows int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM hh_app_tokens`).Scan(&rows))
	require.Equal(t, 2, rows)
}

// Two replicas (two pools over one database) asking at once: the second
// waits on the first's lock while the first obtains, then finds its token.
func TestHHAppTokenIsSingleFlightAcrossReplicas(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	url := storagetest.NewURL(t)
	open := func() *storage.Store {
		st, err := storage.Open(ctx, url, quiet)
		require.NoError(t, err)
		t.Cleanup(st.Close)
		return st
	}
	a, b := open(), open()

	var calls atomic.Int32
	type result struct {
		tok hh.StoredToken
		err error
	}
	second := make(chan result, 1)
	got, err := a.HHTokens().AppToken(ctx, "app", func(ctx context.Context, stored *hh.StoredToken) (*hh.NewToken, error) {
		require.Nil(t, stored)
		calls.Add(1)
		go func() {
			tok, err := b.HHTokens().AppToken(ctx, "app", obtainOnce("tok-b", &calls))
			second <- result{tok, err}
		}()
		// Wait until b is blocked on the lock a holds.
		require.Eventually(t, func() bool { return advisoryWaiters(ctx, a) == 1 }, 5*time.Second, 5*time.Millisecond)
		return &hh.NewToken{Token: "tok-a"}, nil
	})
	require.NoError(t, err)
	require.Equal(t, "tok-a", got.Token)
	r := <-second
	require.NoError(t, r.err)
	require.Equal(t, "tok-a", r.tok.Token, "b found a's token once a committed")
	require.Equal(t, int32(1), calls.Load(), "one token obtained")
}

func TestRefuseHHAppTokenOnlyTheStoredOne(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	st := storagetest.New(t)
	var calls atomic.Int32
	_, err := st.HHTokens().AppToken(ctx, "app", obtainOnce("tok-1", &calls))
	require.NoError(t, err)
	_, err = st.HHTokens().AppToken(ctx, "other-app", obtainOnce("tok-1", &calls))
	require.NoError(t, err)

	refuse := func(token string) bool {
		t.Helper()
		ok, err := st.HHTokens().RefuseAppToken(ctx, "app", token)
		require.NoError(t, err)
		return ok
	}
	require.False(t, refuse("tok-0"), "not the stored token")
	require.True(t, refuse("tok-1"))
	require.False(t, refuse("tok-1"), "refused already")

	// The next caller sees the refusal and replaces the token.
	var seen hh.StoredToken
	got, err := st.HHTokens().AppToken(ctx, "app", func(ctx context.Context, stored *hh.StoredToken) (*hh.NewToken, error) {
		seen = *stored
		return obtainOnce("tok-2", &calls)(ctx, stored)
	})
	require.NoError(t, err)
	require.True(t, seen.Refused)
	require.Equal(t, "tok-1", seen.Token)
	require.Equal(t, hh.StoredToken{Token: "tok-2"}, got)

	// A replica that still sent tok-1 refuses it late: tok-2 stays.
	require.False(t, refuse("tok-1"))
	got, err = st.HHTokens().AppToken(ctx, "app", obtainOnce("tok-3", &calls))
	require.NoError(t, err)
	require.Equal(t, "tok-2", got.Token)
	require.False(t, got.Refused)

	// The other application's token was never touched.
	other, err := st.HHTokens().AppToken(ctx, "other-app", obtainOnce("tok-x", &calls))
	require.NoError(t, err)
	require.Equal(t, "tok-1", other.Token)
	require.False(t, other.Refused)
	require.Equal(t, int32(3), calls.Load())
}

func TestHHAppTokenLifetimeAndAge(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	st := storagetest.New(t)
	got, err := st.HHTokens().AppToken(ctx, "app", func(context.Context, *hh.StoredToken) (*hh.NewToken, error) {
		return &hh.NewToken{Token: "tok-1", Lifetime: time.Hour}, nil
	})
	require.NoError(t, err)
	require.Equal(t, hh.StoredToken{Token: "tok-1", Expires: true, TTL: time.Hour}, got)

	read := func() hh.StoredToken {
		t.Helper()
		var out hh.StoredToken
		_, err := st.HHTokens().AppToken(ctx, "app", func(_ context.Context, stored *hh.StoredToken) (*hh.NewToken, error) {
			out = *stored
			return nil, nil
		})
		require.NoError(t, err)
		return out
	}
	now := read()
	require.True(t, now.Expires)
	require.InDelta(t, time.Hour.Seconds(), now.TTL.Seconds(), 60)

	_, err = st.Pool().Exec(ctx, `UPDATE hh_app_tokens SET obtained_at = now() - interval '10 minutes', expires_at = now() - interval '1 minute'`)
	require.NoError(t, err)
	old := read()
	require.InDelta(t, (10 * time.Minute).Seconds(), old.Age.Seconds(), 30)
	require.Negative(t, old.TTL, "expired")
	require.False(t, old.Refused)
}

func TestHHAppTokenRenewErrorChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	st := storagetest.New(t)
	boom := errors.New("HH said no")
	_, err := st.HHTokens().AppToken(ctx, "app", func(context.Context, *hh.StoredToken) (*hh.NewToken, error) {
		return nil, boom
	})
	require.ErrorIs(t, err, boom)
	_, err = st.HHTokens().AppToken(ctx, "app", func(context.Context, *hh.StoredToken) (*hh.NewToken, error) {
		return nil, nil
	})
	require.ErrorContains(t, err, "none stored and none obtained")
	var rows int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM hh_app_tokens`).Scan(&rows))
	require.Zero(t, rows)
}
