package bot

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	testPair = NewAction("t_pair", 2)
	testOne  = NewAction("t_one", 1)
	testNone = NewAction("t_none", 0)
	testQuad = NewAction("t_quad", 4)
	// testActions is the table presses are decoded against here, as a
	// bot's is built from its HandleButton calls.
	testActions = Actions{testPair.Name: testPair, testOne.Name: testOne, testNone.Name: testNone, testQuad.Name: testQuad}
)

func TestCallbackRoundTrip(t *testing.T) {
	cases := []struct {
		a   Action
		ids []int64
	}{
		{testNone, nil},
		{testOne, []int64{0}},
		{testOne, []int64{123456}},
		{testPair, []int64{1, math.MaxInt64}},
		{testQuad, []int64{math.MaxInt64, math.MaxInt64, math.MaxInt64, math.MaxInt64}},
	}
	for _, tc := range cases {
		data, err := Encode(tc.a, tc.ids...)
		require.NoError(t, err)
		require.LessOrEqual(t, len(data), MaxCallbackData)
		cb, err := testActions.Decode(data)
		require.NoError(t, err, data)
		require.Equal(t, tc.a, cb.Action)
		if len(tc.ids) == 0 {
			require.Empty(t, cb.IDs)
		} else {
			require.Equal(t, tc.ids, cb.IDs)
		}
	}
}

func TestCallbackEncodeRefusesMisuse(t *testing.T) {
	_, err := Encode(Action{Name: "Bad-Name", IDs: 1}, 1)
	require.Error(t, err, "malformed name")
	_, err = Encode(Action{}, 1)
	require.Error(t, err, "no action")
	_, err = Encode(testPair, 1)
	require.Error(t, err, "wrong arity")
	_, err = Encode(testOne, -1)
	require.Error(t, err, "negative id")
	require.Panics(t, func() { Actions{testOne.Name: testOne}.Add(NewAction(testOne.Name, 2)) }, "duplicate")
	require.Panics(t, func() { NewAction("Bad-Name", 1) })
	require.Panics(t, func() { NewAction("t_five", 5) })
}

func TestCallbackDecodeRefusesForgeries(t *testing.T) {
	for _, data := range []string{
		"", "t_one", "t_one:", "t_one:1:2", "t_pair:1", "T_ONE:1", "t_one:01", "t_one:+1", "t_one:-1",
		"t_one:A", "t_one:1 ", " t_one:1", "unknown:1", "t_one:" + strings.Repeat("z", 20),
		"\ft_one|1", strings.Repeat("a", 65), "t_one::1",
	} {
		_, err := testActions.Decode(data)
		require.ErrorIs(t, err, ErrBadCallback, "%q", data)
	}
}

// FuzzDecode: garbage never panics, and whatever decodes re-encodes to the
// same bytes (one canonical form, so forged aliases cannot exist).
func FuzzDecode(f *testing.F) {
	for _, s := range []string{"t_one:1", "t_pair:a:zz", "t_none", "", ":", "t_quad:1:2:3:4", "t_one:1y2p0ij32e8e7"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		cb, err := testActions.Decode(data)
		if err != nil {
			return
		}
		again, err := Encode(cb.Action, cb.IDs...)
		if err != nil {
			t.Fatalf("decoded %q but cannot re-encode: %v", data, err)
		}
		if again != data {
			t.Fatalf("non-canonical data accepted: %q re-encodes as %q", data, again)
		}
	})
}
