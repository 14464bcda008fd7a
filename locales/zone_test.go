package locales

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseZoneReadsNamesOffsetsAndCities(t *testing.T) {
	for in, want := range map[string]string{
		"Europe/Moscow": "Europe/Moscow", "europe/moscow": "Europe/Moscow", "AMERICA/NEW_YORK": "America/New_York",
		"+3": "UTC+03:00", "UTC+03:00": "UTC+03:00", "utc+3": "UTC+03:00", "GMT-5": "UTC-05:00", "−4": "UTC-04:00",
		"+0530": "UTC+05:30", "+5:45": "UTC+05:45", "UTC": "UTC", "gmt": "UTC", "+0": "UTC",
		"Moscow": "Europe/Moscow", "москва": "Europe/Moscow", "Санкт-Петербург": "Europe/Moscow", "спб": "Europe/Moscow",
		"Kyiv": "Europe/Kyiv", "Київ": "Europe/Kyiv", "Киев": "Europe/Kyiv", "Minsk": "Europe/Minsk", "Алматы": "Asia/Almaty",
		"London": "Europe/London", "Берлін": "Europe/Berlin", "new york": "America/New_York", "Нью-Йорк": "America/New_York",
		"st. petersburg": "Europe/Moscow", "Кишинев": "Europe/Chisinau",
	} {
		name, loc, err := ParseZone(in)
		require.NoError(t, err, in)
		require.Equal(t, want, name, in)
		back, err := LoadZone(name)
		require.NoError(t, err, name)
		at := time.Date(2026, 11, 26, 1, 7, 0, 0, time.UTC)
		require.Equal(t, at.In(loc).Format(time.RFC3339), at.In(back).Format(time.RFC3339), in)
	}
	for in, want := range map[string]error{
		"": ErrZoneUnknown, "Mars/Olympus": ErrZoneUnknown, "Narnia": ErrZoneUnknown, "Local": ErrZoneUnknown,
		"+15": ErrZoneOffset, "-13": ErrZoneOffset, "+3:20": ErrZoneOffset, "+3:75": ErrZoneOffset,
	} {
		_, _, err := ParseZone(in)
		require.ErrorIs(t, err, want, in)
	}
}

func TestTimeNamesTheZoneInTheReadersWords(t *testing.T) {
	at := time.Date(2026, 11, 26, 1, 7, 0, 0, time.UTC)
	now := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	msk, _ := LoadZone("Europe/Moscow")
	kyiv, _ := LoadZone("Europe/Kyiv")
	plus5, _ := LoadZone("UTC+05:00")
	require.Equal(t, "26 нояб., 04:07 (Москва)", Time("ru", at, msk, now))
	require.Equal(t, "26 лист., 03:07 (Київ)", Time("uk", at, kyiv, now))
	require.Equal(t, "26 Nov, 04:07 (Moscow)", Time("en", at, msk, now))
	require.Equal(t, "26 Nov, 01:07 (UTC)", Time("en", at, nil, now))
	require.Equal(t, "26 Nov, 06:07 (UTC+05:00)", Time("en", at, plus5, now))
	require.Equal(t, "26 нояб. 2026, 04:07 (Москва)", Time("ru", at, msk, now.AddDate(1, 0, 0)), "another year is written")
	require.Equal(t, "2 мая", Date("ru", time.Date(2026, 5, 2, 0, 0, 0, 0, time.UTC), now))
	require.Equal(t, "Europe/Kyiv", LangZone("uk").String())
	require.Equal(t, "Europe/Moscow", LangZone("ru").String())
	require.Equal(t, time.UTC, LangZone("en"))
	require.Equal(t, "UTC+03:00", ZoneOffset(at, msk))
}

// Whether a date names its year is the caller's clock's question, not the
// host's: on a clock set years away from the real one (CLOCK_START), its
// own year goes without and any other has it, the year being the one on
// the reader's calendar.
func TestTheYearIsTheClocksNotTheHosts(t *testing.T) {
	msk, _ := LoadZone("Europe/Moscow")
	now := time.Date(2031, 6, 1, 12, 0, 0, 0, time.UTC)
	require.NotEqual(t, time.Now().Year(), now.Year(), "the clock is in another year than the host")
	require.Equal(t, "26 нояб., 04:07 (Москва)", Time("ru", time.Date(2031, 11, 26, 1, 7, 0, 0, time.UTC), msk, now))
	require.Equal(t, "26 Nov 2030, 04:07 (Moscow)", Time("en", time.Date(2030, 11, 26, 1, 7, 0, 0, time.UTC), msk, now))
	require.Equal(t, "2 Jan 2032", Date("en", time.Date(2032, 1, 2, 0, 0, 0, 0, msk), now))
	require.Equal(t, "1 Jun", Date("en", time.Date(2031, 6, 1, 0, 0, 0, 0, msk), now))
	require.Contains(t, string(DateTag("en", time.Date(2031, 6, 1, 0, 0, 0, 0, msk), now)), ">1 Jun<")

	// 31 Dec, 22:00 UTC is New Year's night in Moscow: a time of 1 Jan
	// there is this year's for its reader.
	eve := time.Date(2031, 12, 31, 22, 0, 0, 0, time.UTC)
	require.Equal(t, "1 янв., 10:00 (Москва)", Time("ru", time.Date(2032, 1, 1, 7, 0, 0, 0, time.UTC), msk, eve))
	require.Equal(t, "31 Dec 2031, 22:00 (UTC)", Time("en", eve, nil, time.Date(2032, 1, 1, 0, 30, 0, 0, time.UTC)))
}

// A master's city as typed finds its zone in any of the three languages;
// a place it does not know finds none.
func TestCityZone(t *testing.T) {
	for _, name := range []string{"Odesa", "одесса", "Одеса", "odessa"} {
		loc, ok := CityZone(name)
		require.True(t, ok, name)
		require.Equal(t, "Europe/Kyiv", loc.String(), name)
	}
	_, ok := CityZone("Atlantis")
	require.False(t, ok)
}
