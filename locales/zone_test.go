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
	require.Equal(t, "26 нояб., 04:07 (Москва)", timeAt("ru", at, msk, now))
	require.Equal(t, "26 лист., 03:07 (Київ)", timeAt("uk", at, kyiv, now))
	require.Equal(t, "26 Nov, 04:07 (Moscow)", timeAt("en", at, msk, now))
	require.Equal(t, "26 Nov, 01:07 (UTC)", timeAt("en", at, nil, now))
	require.Equal(t, "26 Nov, 06:07 (UTC+05:00)", timeAt("en", at, plus5, now))
	require.Equal(t, "26 нояб. 2026, 04:07 (Москва)", timeAt("ru", at, msk, now.AddDate(1, 0, 0)), "another year is written")
	require.Equal(t, "2 мая", dateAt("ru", time.Date(2026, 5, 2, 0, 0, 0, 0, time.UTC), now))
	require.Equal(t, "Europe/Kyiv", LangZone("uk").String())
	require.Equal(t, "Europe/Moscow", LangZone("ru").String())
	require.Equal(t, time.UTC, LangZone("en"))
	require.Equal(t, "UTC+03:00", ZoneOffset(at, msk))
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
