package dispatch

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
)

// docs/ARCHITECTURE.md "Dispatch": orders SEARCHING → ASSIGNED → DONE → CLOSED (and CANCELLED);
// offers SENT → VIEWED → ACCEPTED / DECLINED / EXPIRED, plus our WITHDRAWN.
func TestTransitionTablesAreDesigns(t *testing.T) {
	orders := map[[2]OrderState]bool{
		{Searching, Assigned}: true, {Searching, Cancelled}: true,
		{Assigned, Done}: true, {Assigned, Cancelled}: true, {Assigned, Searching}: true,
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
	var ie *domain.InputError
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
		"Moscow":                              "master.error_no_district",
		"Moscow Center":                       "master.error_no_skills",
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

// now is when the parse tests create their orders.
var now = time.Date(2026, 11, 20, 15, 0, 0, 0, time.UTC)

func TestParseOrder(t *testing.T) {
	o, err := ParseOrder("Moscow \"North West\" Plumber 2_500 Leaking tap,\n  second floor <b>now</b>", now)
	require.NoError(t, err)
	require.Equal(t, NewOrder{City: "Moscow", District: "North West", Skill: "plumber", Price: 2500,
		Description: "Leaking tap,\n  second floor <b>now</b>"}, o, "the description is kept as written")

	for in, key := range map[string]string{
		"":                                    "order.usage",
		"Moscow":                              "order.error_no_district",
		"Moscow Center":                       "order.error_no_skill",
		"Moscow Center plumber":               "order.error_no_price",
		"Moscow Center plumber 100":           "order.error_description_missing",
		"Moscow Center plumber abc fix":       "order.error_price",
		"Moscow Center plumber 0 fix":         "order.error_price",
		"Moscow Center plumber -5 fix":        "order.error_price",
		"Moscow Center plumber 100000001 fix": "order.error_price",
		"Moscow Center plumber 99999999999999999999 fix":                     "order.error_price",
		"Moscow Center plumber 100 " + strings.Repeat("я", MaxDescription+1): "order.error_description_long",
	} {
		_, err := ParseOrder(in, now)
		require.Equal(t, key, inputKey(t, err), "%q", in)
	}
}

// The optional fields are labeled lines of the description, in any of the
// three languages and any case; they leave the description.
func TestParseOrderFields(t *testing.T) {
	o, err := ParseOrder("Moscow Center plumbing 3000 Kitchen tap is leaking\n"+
		"Address:  Tverskaya 12,   apt 5\n"+
		"name: Ivan <Petrov>\n"+
		"PHONE: +7 (999) 123-45-67\n"+
		"  when : 2026-11-27 10:00-12:00\n"+
		"Note: bring a wrench", now)
	require.NoError(t, err)
	require.Equal(t, "Kitchen tap is leaking\nNote: bring a wrench", o.Description, "labeled lines leave; others stay as written")
	require.Equal(t, Contact{Address: "Tverskaya 12, apt 5", Name: "Ivan <Petrov>", Phone: "+7 (999) 123-45-67"}, o.Contact)
	require.Equal(t, Visit{Date: time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC), From: 10 * time.Hour, To: 12 * time.Hour}, o.Visit)

	ru, err := ParseOrder("Москва Центр сантехника 3000 адрес: Тверская 12\nИмя: Иван\nтелефон: 8 999 123 45 67\nКогда: 27.11 9-11:30\nТечёт кран", now)
	require.NoError(t, err)
	require.Equal(t, "Течёт кран", ru.Description, "the first line of the description may be a field")
	require.Equal(t, Contact{Address: "Тверская 12", Name: "Иван", Phone: "8 999 123 45 67"}, ru.Contact)
	require.Equal(t, Visit{Date: time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC), From: 9 * time.Hour, To: 11*time.Hour + 30*time.Minute}, ru.Visit)

	uk, err := ParseOrder("Київ Поділ сантехніка 3000 Тече кран\nАДРЕСА: Хрещатик 1\nім’я: Іван\nколи: 27.11.2026", now)
	require.NoError(t, err)
	require.Equal(t, Contact{Address: "Хрещатик 1", Name: "Іван"}, uk.Contact)
	require.Equal(t, Visit{Date: time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)}, uk.Visit, "a day without a window")
	require.False(t, uk.Visit.Window())

	none, err := ParseOrder("Kyiv Podil tiling 100 Bathroom", now)
	require.NoError(t, err)
	require.True(t, none.Contact.Empty())
	require.False(t, none.Visit.Given())

	for in, want := range map[string][2]string{
		"address: Main St 1":                                 {"order.error_description_missing", ""},
		"Tap\nphone: 12-34":                                  {"order.error_phone", "12-34"},
		"Tap\nphone: 123456789012345678901":                  {"order.error_phone", "123456789012345678901"},
		"Tap\nphone: +7 999 CALL-ME":                         {"order.error_phone", "+7 999 CALL-ME"},
		"Tap\nphone: 7+999 123 45 67":                        {"order.error_phone", "7+999 123 45 67"},
		"Tap\nphone:":                                        {"order.error_field_empty", "phone"},
		"Tap\nname: a\nИмя: b":                               {"order.error_field_twice", "Имя"},
		"Tap\naddress: " + strings.Repeat("x", MaxAddress+1): {"order.error_address", strings.Repeat("x", MaxAddress+1)},
		"Tap\nname: " + strings.Repeat("я", MaxName+1):       {"order.error_name", strings.Repeat("я", MaxName+1)},
		"Tap\nwhen: tomorrow":                                {"order.error_when", "tomorrow"},
		"Tap\nwhen: 2026/11/27":                              {"order.error_when", "2026/11/27"},
		"Tap\nwhen: 27.11 10":                                {"order.error_when", "27.11 10"},
		"Tap\nwhen: 27.11 10-25":                             {"order.error_when", "27.11 10-25"},
		"Tap\nwhen: 27.11 9:5-10":                            {"order.error_when", "27.11 9:5-10"},
		"Tap\nwhen: 31.02.2027":                              {"order.error_when_date", "31.02.2027"},
		"Tap\nwhen: 2026-13-01":                              {"order.error_when_date", "2026-13-01"},
		"Tap\nwhen: 2026-11-18 10-12":                        {"order.error_when_past", "2026-11-18"},
		"Tap\nwhen: 27.11 12:00-10:00":                       {"order.error_when_window", "12:00-10:00"},
		"Tap\nwhen: 27.11 10-10":                             {"order.error_when_window", "10-10"},
	} {
		_, err := ParseOrder("Moscow Center plumbing 3000 "+in, now)
		var ie *domain.InputError
		require.True(t, errors.As(err, &ie), "%q: %v", in, err)
		require.Equal(t, want, [2]string{ie.Key, ie.Arg()}, "%q", in)
	}
}

// A date without a year is the next such day, yesterday included (the
// city's day may still be yesterday in UTC); a full date before yesterday
// is refused.
func TestParseVisitDates(t *testing.T) {
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	for in, want := range map[string]time.Time{
		"20.11":      day(2026, 11, 20),
		"19.11":      day(2026, 11, 19),
		"18.11":      day(2027, 11, 18),
		"01.01":      day(2027, 1, 1),
		"2026-11-19": day(2026, 11, 19),
		"1.2.2027,":  day(2027, 2, 1),
	} {
		v, err := ParseVisit(in, now)
		require.NoError(t, err, in)
		require.Equal(t, want, v.Date, in)
	}
	v, err := ParseVisit("29.02", time.Date(2027, 3, 5, 0, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	require.Equal(t, day(2028, 2, 29), v.Date, "the next 29 February")
	v, err = ParseVisit("27.11 8:05 – 9", now)
	require.NoError(t, err)
	require.Equal(t, Visit{Date: day(2026, 11, 27), From: 8*time.Hour + 5*time.Minute, To: 9 * time.Hour}, v, "dashes and spaces as people type them")
}

func TestParsePhone(t *testing.T) {
	for in, want := range map[string]string{
		"+7 999 123-45-67":   "+7 999 123-45-67",
		"  8(999)1234567 ":   "8(999)1234567",
		"+380  67 123 45 67": "+380 67 123 45 67",
		"12345":              "12345",
		"555.12.34":          "555.12.34",
	} {
		got, err := ParsePhone(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got)
	}
	for _, in := range []string{"1234", "+", "++79991234567", "phone", "+7 999 123 45 67 ext 2", strings.Repeat("1 ", 21)} {
		_, err := ParsePhone(in)
		require.Error(t, err, in)
	}
}

// The quoted commission is the one SQL computes: ceil(price × rate / 100)
// in decimal, not in binary floating point.
func TestCommissionOf(t *testing.T) {
	for _, c := range []struct {
		price int64
		rate  float64
		want  int64
	}{
		{3000, 10, 300}, {1999, 10, 200}, {100, 0.1, 1}, {1000, 0.3, 3}, {300, 7.1, 22}, {1, 100, 1}, {100, 0, 0},
	} {
		require.Equal(t, c.want, CommissionOf(c.price, c.rate), "%d × %g%%", c.price, c.rate)
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
