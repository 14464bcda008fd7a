package dispatch

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
)

// DESIGN.md: orders SEARCHING → ASSIGNED → DONE → CLOSED (and CANCELLED);
// offers SENT → VIEWED → ACCEPTED / DECLINED / EXPIRED, plus our WITHDRAWN.
func TestTransitionTablesAreDesigns(t *testing.T) {
	orders := map[[2]OrderState]bool{
		{Searching, Assigned}: true, {Searching, Cancelled}: true,
		{Assigned, Done}: true, {Assigned, Cancelled}: true,
		{Done, Closed}: true,
	}
	for _, from := range OrderStates {
		for _, to := range OrderStates {
			require.Equal(t, orders[[2]OrderState{from, to}], CanOrder(from, to), "order %s → %s", from, to)
			err := checkOrder(from, to)
			require.Equal(t, !orders[[2]OrderState{from, to}], errors.Is(err, ErrIllegalTransition), "order %s → %s", from, to)
		}
	}
	offers := map[[2]OfferState]bool{}
	for _, from := range []OfferState{Sent, Viewed} {
		for _, to := range []OfferState{Accepted, Declined, Expired, Withdrawn} {
			offers[[2]OfferState{from, to}] = true
		}
	}
	offers[[2]OfferState{Sent, Viewed}] = true
	for _, from := range OfferStates {
		require.Equal(t, from == Sent || from == Viewed, from.Open(), "open %s", from)
		for _, to := range OfferStates {
			require.Equal(t, offers[[2]OfferState{from, to}], CanOffer(from, to), "offer %s → %s", from, to)
			require.Equal(t, !offers[[2]OfferState{from, to}], errors.Is(checkOffer(from, to), ErrIllegalTransition), "offer %s → %s", from, to)
		}
	}
}

func TestFields(t *testing.T) {
	for in, want := range map[string][]string{
		``:                                  nil,
		`  a   b `:                          {"a", "b"},
		`"Saint Petersburg" Center plumber`: {"Saint Petersburg", "Center", "plumber"},
		`«Нижний Новгород» центр сантехник`: {"Нижний Новгород", "центр", "сантехник"},
		`"unclosed quote runs`: {"unclosed quote runs"},
		`""  x`:                {"", "x"},
		"a\tb\nc":              {"a", "b", "c"},
	} {
		require.Equal(t, want, fields(in), "%q", in)
	}
}

func inputKey(t *testing.T, err error) string {
	t.Helper()
	var ie *InputError
	require.True(t, errors.As(err, &ie), "want InputError, got %v", err)
	return ie.Key
}

func TestParseMaster(t *testing.T) {
	city, district, skills, err := ParseMaster(`"Saint  Petersburg" Center Plumber, electrician,plumber`)
	require.NoError(t, err)
	require.Equal(t, "Saint Petersburg", city)
	require.Equal(t, "Center", district)
	require.Equal(t, []string{"plumber", "electrician"}, skills, "lower-cased, deduplicated, any separator")

	for in, key := range map[string]string{
		"":                                    "master.usage",
		"Moscow Center":                       "master.usage",
		`"" Center plumber`:                   "dispatch.error_place",
		"Moscow Center ,,,":                   "dispatch.error_skill",
		strings.Repeat("x", 101) + " c s":     "dispatch.error_place_long",
		"Moscow c " + strings.Repeat("s", 51): "dispatch.error_skill_long",
		"Moscow c a,b,c,d,e,f,g,h,i,j,k":      "dispatch.error_skills_many",
	} {
		_, _, _, err := ParseMaster(in)
		require.Equal(t, key, inputKey(t, err), "%q", in)
	}
}

func TestParseOrder(t *testing.T) {
	o, err := ParseOrder("Moscow \"North West\" Plumber 2_500 Leaking tap,\n  second floor <b>now</b>")
	require.NoError(t, err)
	require.Equal(t, NewOrder{City: "Moscow", District: "North West", Skill: "plumber", Price: 2500,
		Description: "Leaking tap,\n  second floor <b>now</b>"}, o, "the description is kept as written")

	for in, key := range map[string]string{
		"":                                               "order.usage",
		"Moscow Center plumber 100":                      "order.usage",
		"Moscow Center plumber abc fix":                  "order.error_price",
		"Moscow Center plumber 0 fix":                    "order.error_price",
		"Moscow Center plumber -5 fix":                   "order.error_price",
		"Moscow Center plumber 100000001 fix":            "order.error_price",
		"Moscow Center plumber 99999999999999999999 fix": "order.error_price",
		"Moscow Center plumber 100 " + strings.Repeat("я", MaxDescription+1): "order.error_description_long",
	} {
		_, err := ParseOrder(in)
		require.Equal(t, key, inputKey(t, err), "%q", in)
	}
}

// The timer fires once, at the earliest deadline it was armed with, and
// never sooner than minSweepGap after it last fired.
func TestExpiryTimer(t *testing.T) {
	clock := clockwork.NewFakeClock()
	var e expiryTimer
	e.init(clock)
	now := clock.Now()
	e.arm(now.Add(3 * time.Second))
	e.arm(now.Add(time.Second))     // earlier: re-armed
	e.arm(now.Add(2 * time.Second)) // later: ignored
	block(t, clock)
	clock.Advance(999 * time.Millisecond)
	requireNotFired(t, &e)
	clock.Advance(time.Millisecond)
	requireFired(t, &e)

	// Right after firing, a deadline already past waits out the gap (the
	// database's clock may be a little behind ours)…
	e.arm(clock.Now().Add(-time.Minute))
	block(t, clock)
	clock.Advance(minSweepGap - time.Millisecond)
	requireNotFired(t, &e)
	clock.Advance(time.Millisecond)
	requireFired(t, &e)
	clock.Advance(5 * time.Second)
	requireNotFired(t, &e) // the later deadlines were superseded, not queued

	// …and long after, it fires at once.
	e.arm(clock.Now().Add(-time.Minute))
	requireFired(t, &e)

	e.arm(clock.Now().Add(time.Second))
	block(t, clock)
	e.stop()
	clock.Advance(time.Hour)
	requireNotFired(t, &e)
}

func block(t *testing.T, clock *clockwork.FakeClock) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	require.NoError(t, clock.BlockUntilContext(ctx, 1))
}

func requireFired(t *testing.T, e *expiryTimer) {
	t.Helper()
	select {
	case <-e.fired:
	case <-time.After(2 * time.Second):
		t.Fatal("timer did not fire")
	}
}

func requireNotFired(t *testing.T, e *expiryTimer) {
	t.Helper()
	select {
	case <-e.fired:
		t.Fatal("timer fired early")
	case <-time.After(20 * time.Millisecond):
	}
}
