package dispatch_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain/dispatch"
)

func TestHoursOpenAndNextOpen(t *testing.T) {
	moscow, err := time.LoadLocation("Europe/Moscow")
	require.NoError(t, err)
	h, err := dispatch.ParseHours("10:00-20:00", moscow)
	require.NoError(t, err)
	at := func(s string) time.Time {
		v, err := time.ParseInLocation("2006-01-02 15:04", s, moscow)
		require.NoError(t, err)
		return v
	}
	require.False(t, h.IsOpen(at("2026-11-25 09:59")))
	require.True(t, h.IsOpen(at("2026-11-25 10:00")))
	require.True(t, h.IsOpen(at("2026-11-25 19:59")))
	require.False(t, h.IsOpen(at("2026-11-25 20:00")))
	require.Equal(t, at("2026-11-26 10:00"), h.NextOpen(at("2026-11-25 22:00")))
	require.Equal(t, at("2026-11-25 10:00"), h.NextOpen(at("2026-11-25 03:00")))
	require.Equal(t, at("2026-11-25 12:00"), h.NextOpen(at("2026-11-25 12:00")))
	require.Equal(t, "10:00–20:00", h.Window())

	night, err := dispatch.ParseHours("22:00-06:00", moscow)
	require.NoError(t, err)
	require.True(t, night.IsOpen(at("2026-11-25 23:00")))
	require.True(t, night.IsOpen(at("2026-11-25 05:59")))
	require.False(t, night.IsOpen(at("2026-11-25 06:00")))
	require.Equal(t, at("2026-11-25 22:00"), night.NextOpen(at("2026-11-25 12:00")))

	for _, always := range []string{"24h", "00:00-24:00", "0-24"} {
		h, err := dispatch.ParseHours(always, moscow)
		require.NoError(t, err, always)
		require.True(t, h.AlwaysOpen(), always)
		require.True(t, h.IsOpen(at("2026-11-25 03:00")), always)
	}
	for _, bad := range []string{"", "10", "25:00-26:00", "10:60-12:00", "24:00-10:00", "ten-twelve", "10:0-12:00"} {
		_, err := dispatch.ParseHours(bad, moscow)
		require.Error(t, err, bad)
	}
}

// On a day whose clocks change the hours are read on the clocks: Berlin
// opens at 10:00 on 29 Mar (23 hours) and 25 Oct (25 hours) 2026, not
// ten hours after midnight.
func TestHoursOnTheDaysClocksChange(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	h, err := dispatch.ParseHours("10:00-20:00", berlin)
	require.NoError(t, err)
	for _, day := range []int{3*100 + 29, 10*100 + 25} {
		m, d := time.Month(day/100), day%100
		at := func(hh, mm int) time.Time { return time.Date(2026, m, d, hh, mm, 0, 0, berlin) }
		require.False(t, h.IsOpen(at(9, 30)), "%d.%d 09:30", d, m)
		require.True(t, h.IsOpen(at(10, 0)), "%d.%d 10:00", d, m)
		require.True(t, h.IsOpen(at(19, 30)), "%d.%d 19:30", d, m)
		require.False(t, h.IsOpen(at(20, 0)), "%d.%d 20:00", d, m)
		require.Equal(t, at(10, 0), h.NextOpen(at(7, 0)), "%d.%d", d, m)
	}
}

func TestCalendarPerCity(t *testing.T) {
	c, err := dispatch.ParseCalendar("UTC", "10:00-20:00", "Moscow=Europe/Moscow; Kyiv=Europe/Kyiv 09:00-19:00;\n\"Saint  Petersburg\"=Europe/Moscow")
	require.NoError(t, err)
	require.Equal(t, "Europe/Moscow", c.Zone("  MOSCOW ").String())
	require.Equal(t, "Europe/Moscow", c.Zone("saint petersburg").String())
	require.Equal(t, "UTC", c.Zone("Almaty").String())
	require.Equal(t, "09:00–19:00", c.For("kyiv").Window())

	// 17:30 UTC is 20:30 in Moscow (closed), 19:30 in Kyiv (closed), 17:30
	// in UTC (open).
	g := c.At(time.Date(2026, 11, 25, 17, 30, 0, 0, time.UTC))
	require.False(t, g.Allows("Moscow"))
	require.False(t, g.Allows("kyiv"))
	require.True(t, g.Allows("Almaty"))
	g = c.At(time.Date(2026, 11, 25, 7, 30, 0, 0, time.UTC)) // 10:30 Moscow, 09:30 Kyiv, 07:30 UTC
	require.True(t, g.Allows("Moscow"))
	require.True(t, g.Allows("Kyiv"))
	require.False(t, g.Allows("Almaty"))
	require.True(t, dispatch.Gate{}.Allows("anywhere"), "the zero gate lets everything through")

	for _, bad := range []struct{ zone, hours, cities string }{
		{"Mars/Olympus", "10:00-20:00", ""},
		{"UTC", "10-", ""},
		{"UTC", "10:00-20:00", "Moscow"},
		{"UTC", "10:00-20:00", "Moscow=Europe/Mowcow"},
		{"UTC", "10:00-20:00", "Moscow=Europe/Moscow 9-"},
		{"UTC", "10:00-20:00", "Moscow=Europe/Moscow; moscow=Europe/Moscow"},
	} {
		_, err := dispatch.ParseCalendar(bad.zone, bad.hours, bad.cities)
		require.Error(t, err, "%+v", bad)
	}
}
