package hh_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain/vacancy"
	"switchboard/hh"
	"switchboard/hh/hhtest"
)

// A captcha refuses us as a client: the first refusal opens the breaker,
// which then sends nothing until its hold ends, one probe at a time, each
// failed probe doubling the hold; once the captcha is gone the probe
// closes it and the refusal is forgotten.
func TestCaptchaOpensTheBreaker(t *testing.T) {
	t.Parallel()
	srv := catalogue(t)
	c, reg := newClient(t, srv.URL(), func(cfg *hh.Config) {
		cfg.BreakerOpenFor, cfg.BreakerMaxOpen = time.Second, 2*time.Second
	})
	ctx := context.Background()
	srv.SetCaptcha(true)

	_, err := c.Search(ctx, params, 0, 10)
	var r *hh.Block
	require.ErrorAs(t, err, &r)
	require.ErrorIs(t, err, vacancy.ErrHHBlocked)
	require.Equal(t, "captcha_required", r.Type)
	require.Contains(t, r.CaptchaURL, hhtest.CaptchaURL, "HH's captcha_url is kept for the admin")
	refused, why := c.Blocked()
	require.True(t, refused)
	require.Contains(t, why, hhtest.CaptchaURL)
	require.True(t, c.Holding())
	require.Equal(t, r.CaptchaURL, c.Block().CaptchaURL)
	require.False(t, c.Block().Since.IsZero())

	// Within the hold nothing reaches HH.
	for range 20 {
		_, err = c.Vacancy(ctx, idOf(t, srv.Vacancies()[0]))
		require.ErrorIs(t, err, vacancy.ErrHHBlocked)
	}
	require.Len(t, srv.Requests(), 1)

	// Past the hold one probe goes out; refused again, the hold doubles.
	// The sleeps are the holds' lengths under test (1 s, then 2 s): long
	// beside the twenty refusals above, which a loaded CI machine once
	// stretched past a 200 ms hold.
	time.Sleep(1100 * time.Millisecond)
	require.False(t, c.Holding(), "the probe may go out")
	_, err = c.Search(ctx, params, 0, 10)
	require.ErrorIs(t, err, vacancy.ErrHHBlocked)
	require.Len(t, srv.Requests(), 2)
	time.Sleep(1100 * time.Millisecond)
	_, err = c.Search(ctx, params, 0, 10)
	require.ErrorIs(t, err, vacancy.ErrHHBlocked)
	require.Len(t, srv.Requests(), 2, "the second hold is twice the first")

	srv.SetCaptcha(false)
	require.Eventually(t, func() bool {
		_, err := c.Search(ctx, params, 0, 10)
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
	refused, why = c.Blocked()
	require.False(t, refused)
	require.Empty(t, why)
	require.Nil(t, c.Block())
	require.False(t, c.Holding())
	require.Equal(t, 20.0, counter(t, reg, "vacancy", "refused"), "requests held back count as refused")
	require.GreaterOrEqual(t, counter(t, reg, "search", "refused"), 3.0)
}

// A 403 forbidden and a firewall's 403 page refuse us too; 5xx and 404
// are HH answering, and leave the breaker closed.
func TestWhatOpensTheBreaker(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault hhtest.Fault
		opens bool
	}{
		{"forbidden", hhtest.Fault{Status: 403, Body: []byte(`{"errors":[{"type":"forbidden"}]}`)}, true},
		{"firewall page", hhtest.Fault{Status: 403, ContentType: "text/html", Body: []byte("<html>Access denied</html>")}, true},
		{"429", hhtest.Fault{Status: 429}, true},
		{"503", hhtest.Fault{Status: 503}, false},
		{"502 page", hhtest.Fault{Status: 502}, false},
		{"bad_authorization", hhtest.Fault{Status: 403, Body: []byte(`{"errors":[{"type":"oauth","value":"bad_authorization"}]}`)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := catalogue(t)
			c, _ := newClient(t, srv.URL(), nil)
			f := tc.fault
			f.Count, f.On = 1, hhtest.AnyEndpoint
			srv.InjectFault(f)
			_, err := c.Search(context.Background(), params, 0, 10)
			require.Error(t, err)
			require.False(t, c.Answered())
			require.Equal(t, tc.opens, c.Holding())
			refused, _ := c.Blocked()
			require.Equal(t, tc.opens, refused)
			_, err = c.Search(context.Background(), params, 0, 10)
			if tc.opens {
				require.ErrorIs(t, err, vacancy.ErrHHBlocked)
				require.Len(t, srv.Requests(), 1)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, !tc.opens, c.Answered(), "a request answered since the client was built")
		})
	}
}

// The fake refuses an anonymous client past its limit, as HH does.
func TestFakeRefusesBusyAnonymousClients(t *testing.T) {
	t.Parallel()
	srv := catalogue(t)
	srv.LimitAnonymous(3, time.Minute)
	c, _ := newClient(t, srv.URL(), nil)
	for range 3 {
		_, err := c.Search(context.Background(), params, 0, 10)
		require.NoError(t, err)
	}
	_, err := c.Search(context.Background(), params, 0, 10)
	var r *hh.Block
	require.ErrorAs(t, err, &r)
	require.Equal(t, http.StatusForbidden, r.Status)
	require.Equal(t, "captcha_required", r.Type)
}

// HH refusing a search's own parameter (400 bad_argument) is about the
// search, not us: the error is a *vacancy.SearchRefusal naming the
// parameter, never an outage or a block, and the breaker stays closed,
// so every other request still goes out. A 400 is HH answering.
func TestBadArgumentIsTheSearchsRefusalAndLeavesTheBreakerClosed(t *testing.T) {
	t.Parallel()
	srv := catalogue(t)
	c, reg := newClient(t, srv.URL(), func(cfg *hh.Config) {
		cfg.BreakerOpenFor, cfg.BreakerMaxOpen = time.Minute, time.Minute
	})
	ctx := context.Background()
	// RUB is ISO's code; HH's dictionary says RUR (the fake refuses it as HH does).
	rub := vacancy.Params{Text: "go", Salary: 200000, Filters: map[string][]string{"currency": {"RUB"}}}
	for range 5 {
		_, err := c.Search(ctx, rub, 0, 20)
		require.ErrorIs(t, err, vacancy.ErrSearchRefused)
		require.NotErrorIs(t, err, vacancy.ErrUnavailable)
		require.NotErrorIs(t, err, vacancy.ErrHHBlocked)
		var refusal *vacancy.SearchRefusal
		require.ErrorAs(t, err, &refusal)
		require.Equal(t, []string{"currency"}, refusal.Args)
		var apiErr *hh.APIError
		require.ErrorAs(t, err, &apiErr, "HH's answer stays readable")
		require.Equal(t, http.StatusBadRequest, apiErr.Status)
	}
	require.Len(t, srv.Requests(), 5, "each was sent: nothing held back")
	blocked, _ := c.Blocked()
	require.False(t, blocked)
	require.False(t, c.Holding())
	require.Nil(t, c.Block())
	require.True(t, c.Answered(), "a 400 is HH answering")
	require.Equal(t, 0.0, find(t, reg, "hh_breaker_state", nil).GetGauge().GetValue(), "closed")

	_, err := c.Search(ctx, params, 0, 20)
	require.NoError(t, err, "the next search goes out")

	// bad_argument naming only what the client adds (paging) is our bug,
	// not the search's; bad_user_agent is about us as a client. Neither is
	// the search's refusal, and neither opens the breaker.
	for _, body := range []string{
		`{"errors":[{"type":"bad_argument","value":"per_page"},{"type":"bad_argument","value":"page"}]}`,
		`{"errors":[{"type":"bad_user_agent","value":"blacklisted"}]}`,
	} {
		srv.InjectFault(hhtest.Fault{Count: 1, Status: http.StatusBadRequest, On: hhtest.SearchEndpoint, Body: []byte(body)})
		_, err = c.Search(ctx, params, 0, 20)
		var apiErr *hh.APIError
		require.ErrorAs(t, err, &apiErr, body)
		require.NotErrorIs(t, err, vacancy.ErrSearchRefused, body)
		require.NotErrorIs(t, err, vacancy.ErrHHBlocked, body)
	}
	require.False(t, c.Holding())
}
