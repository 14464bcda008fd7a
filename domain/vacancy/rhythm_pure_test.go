package vacancy_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain/vacancy"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

func TestAwakeCrossesMidnightAndKeepsDaytime(t *testing.T) {
	t.Parallel()
	msk := mustZone(t, "Europe/Moscow")
	night := vacancy.Rhythm{Quiet: vacancy.Span{From: 22 * 60, To: 8 * 60}}
	morning := vacancy.Rhythm{Quiet: vacancy.Span{From: 6 * 60, To: 9 * 60}}
	at := func(d, h, m, s int) time.Time { return time.Date(2025, 3, d, h, m, s, 0, msk) }
	for _, c := range []struct {
		name string
		r    vacancy.Rhythm
		t    time.Time
		want time.Time
	}{
		{"before quiet hours", night, at(10, 21, 59, 59), at(10, 21, 59, 59)},
		{"their first minute", night, at(10, 22, 0, 0), at(11, 8, 0, 0)},
		{"before midnight", night, at(10, 23, 30, 0), at(11, 8, 0, 0)},
		{"after midnight", night, at(11, 0, 10, 0), at(11, 8, 0, 0)},
		{"their last second", night, at(11, 7, 59, 59), at(11, 8, 0, 0)},
		{"their end", night, at(11, 8, 0, 0), at(11, 8, 0, 0)},
		{"within a daytime span", morning, at(11, 7, 0, 0), at(11, 9, 0, 0)},
		{"after a daytime span", morning, at(11, 23, 0, 0), at(11, 23, 0, 0)},
		{"off", vacancy.Rhythm{}, at(11, 3, 0, 0), at(11, 3, 0, 0)},
	} {
		require.True(t, c.want.Equal(c.r.Awake(c.t, msk)), "%s: got %v", c.name, c.r.Awake(c.t, msk))
	}
}

// Kyiv moves its clocks: 03:00 → 04:00 on 30 March 2025, 04:00 → 03:00
// on 26 October 2025. Quiet hours end at the local time whatever the
// offset, and a night that loses an hour is an hour shorter.
func TestAwakeAcrossDSTInKyiv(t *testing.T) {
	t.Parallel()
	kyiv := mustZone(t, "Europe/Kyiv")
	r := vacancy.Rhythm{Quiet: vacancy.Span{From: 23 * 60, To: 7 * 60}}
	spring := r.Awake(time.Date(2025, 3, 29, 23, 30, 0, 0, kyiv), kyiv)
	require.Equal(t, time.Date(2025, 3, 30, 7, 0, 0, 0, kyiv), spring)
	require.Equal(t, "+03:00", spring.Format("-07:00"), "summer time by the morning")
	require.Equal(t, 6*time.Hour+30*time.Minute, spring.Sub(time.Date(2025, 3, 29, 23, 30, 0, 0, kyiv)))
	autumn := r.Awake(time.Date(2025, 10, 25, 23, 30, 0, 0, kyiv), kyiv)
	require.Equal(t, time.Date(2025, 10, 26, 7, 0, 0, 0, kyiv), autumn)
	require.Equal(t, 8*time.Hour+30*time.Minute, autumn.Sub(time.Date(2025, 10, 25, 23, 30, 0, 0, kyiv)))

	// A digest time the spring change skips comes out after the gap.
	d := vacancy.Rhythm{DigestTimes: []int{3*60 + 30}}
	slot := d.DigestSlot(time.Date(2025, 3, 30, 5, 0, 0, 0, kyiv), kyiv)
	require.Equal(t, time.Date(2025, 3, 30, 4, 30, 0, 0, kyiv), slot)
}

func TestCardAtCountsTheLocalDay(t *testing.T) {
	t.Parallel()
	msk := mustZone(t, "Europe/Moscow")
	at := func(d, h, m int) time.Time { return time.Date(2025, 6, d, h, m, 0, 0, msk) }
	capped := vacancy.Rhythm{DailyCap: 2}
	both := vacancy.Rhythm{DailyCap: 2, Quiet: vacancy.Span{From: 22 * 60, To: 8 * 60}}
	for _, c := range []struct {
		name  string
		r     vacancy.Rhythm
		now   time.Time
		cards []time.Time
		want  time.Time
	}{
		{"room today", capped, at(10, 12, 0), []time.Time{at(10, 9, 0)}, at(10, 12, 0)},
		{"yesterday's cards do not count", capped, at(10, 0, 5), []time.Time{at(9, 23, 0), at(9, 23, 30)}, at(10, 0, 5)},
		{"full: the next day's start", capped, at(10, 12, 0), []time.Time{at(10, 9, 0), at(10, 11, 0)}, at(11, 0, 0)},
		{"full with quiet hours: their end", both, at(10, 12, 0), []time.Time{at(10, 9, 0), at(10, 11, 0)}, at(11, 8, 0)},
		{"held cards fill tomorrow too", both, at(10, 23, 0),
			[]time.Time{at(10, 9, 0), at(10, 11, 0), at(11, 8, 0), at(11, 8, 0)}, at(12, 8, 0)},
		{"quiet hours and room in the morning", both, at(10, 23, 0), []time.Time{at(10, 9, 0), at(10, 11, 0)}, at(11, 8, 0)},
		{"no cap", vacancy.Rhythm{}, at(10, 12, 0), []time.Time{at(10, 1, 0), at(10, 2, 0), at(10, 3, 0)}, at(10, 12, 0)},
	} {
		got := c.r.CardAt(c.now, msk, c.cards)
		require.True(t, c.want.Equal(got), "%s: got %v, want %v", c.name, got, c.want)
	}
}

func TestDigestSlotMovesOutOfQuietHours(t *testing.T) {
	t.Parallel()
	msk := mustZone(t, "Europe/Moscow")
	at := func(d, h, m int) time.Time { return time.Date(2025, 6, d, h, m, 0, 0, msk) }
	r := vacancy.Rhythm{Mode: vacancy.ModeDigest, DigestTimes: []int{9 * 60, 22 * 60}, Quiet: vacancy.Span{From: 22 * 60, To: 8 * 60}}
	// 22:00 is quiet: it moves to 08:00 next morning, so the morning has
	// two slots at 08:00 and 09:00 and the evening none.
	require.Equal(t, at(10, 9, 0), r.DigestSlot(at(10, 21, 0), msk))
	require.Equal(t, at(10, 9, 0), r.DigestSlot(at(10, 23, 0), msk))
	require.Equal(t, at(11, 8, 0), r.DigestSlot(at(11, 8, 0), msk))
	require.Equal(t, at(10, 9, 0), r.DigestSlot(at(11, 7, 59), msk))
	require.Equal(t, at(11, 8, 0), r.NextDigest(at(10, 21, 0), msk))
	require.Equal(t, at(11, 9, 0), r.NextDigest(at(11, 8, 0), msk))

	// In another zone the same times are other instants.
	kyiv := mustZone(t, "Europe/Kyiv")
	require.Equal(t, time.Date(2025, 6, 10, 9, 0, 0, 0, kyiv), r.DigestSlot(at(10, 12, 0), kyiv))
}

func TestTunedTakesOnlyWhatSettingsOffer(t *testing.T) {
	t.Parallel()
	r := vacancy.DefaultRhythm()
	r, err := r.Tuned(vacancy.KnobMode, 1)
	require.NoError(t, err)
	require.Equal(t, vacancy.ModeDigest, r.Mode)
	r, err = r.Tuned(vacancy.KnobTime, 7*60)
	require.NoError(t, err)
	require.Equal(t, []int{7 * 60, 9 * 60, 18 * 60}, r.DigestTimes)
	r, err = r.Tuned(vacancy.KnobTime, 9*60)
	require.NoError(t, err)
	r, err = r.Tuned(vacancy.KnobTime, 18*60)
	require.NoError(t, err)
	require.Equal(t, []int{7 * 60}, r.DigestTimes)
	_, err = r.Tuned(vacancy.KnobTime, 7*60)
	require.Error(t, err, "the last time stays")
	// Set, not toggled: the same press twice leaves what the first set.
	for range 2 {
		r, err = r.Tuned(vacancy.KnobTimeOn, 18*60)
		require.NoError(t, err)
		require.Equal(t, []int{7 * 60, 18 * 60}, r.DigestTimes)
	}
	for range 2 {
		r, err = r.Tuned(vacancy.KnobTimeOff, 7*60)
		require.NoError(t, err)
		require.Equal(t, []int{18 * 60}, r.DigestTimes)
	}
	_, err = r.Tuned(vacancy.KnobTimeOff, 18*60)
	require.Error(t, err, "the last time stays")
	r, err = r.Tuned(vacancy.KnobTimeOn, 7*60)
	require.NoError(t, err)
	r, err = r.Tuned(vacancy.KnobTimeOff, 18*60)
	require.NoError(t, err)
	require.Equal(t, []int{7 * 60}, r.DigestTimes)
	r, err = r.Tuned(vacancy.KnobQuiet, 2)
	require.NoError(t, err)
	require.Equal(t, vacancy.Span{From: 23 * 60, To: 7 * 60}, r.Quiet)
	r, err = r.Tuned(vacancy.KnobCap, 20)
	require.NoError(t, err)
	require.Equal(t, 20, r.DailyCap)
	for _, bad := range []struct {
		k vacancy.Knob
		v int
	}{{vacancy.KnobMode, 2}, {vacancy.KnobTime, 8 * 60}, {vacancy.KnobTimeOn, 8 * 60}, {vacancy.KnobTimeOff, 8 * 60}, {vacancy.KnobSize, 7}, {vacancy.KnobQuiet, 3}, {vacancy.KnobCap, 15}, {99, 0}} {
		_, err := r.Tuned(bad.k, bad.v)
		require.ErrorIs(t, err, vacancy.ErrBadKnob, "%v", bad)
	}
}
