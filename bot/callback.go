package bot

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	tele "gopkg.in/telebot.v3"
)

// Callback data travels through Telegram and comes back from any client, so
// it is treated as untrusted input: a typed action with a fixed number of ids,
// in one canonical spelling, at most 64 bytes (Telegram's limit).
//
//	<action>:<id36>[:<id36>…]     e.g. "va:2n9c" = vacancy applied, match 123456
//
// Ids are base 36 to keep room for several in 64 bytes. Decoding accepts only
// the canonical form Encode produces, so forged variants of a valid payload
// ("va:02n9c", "VA:2n9c") are refused rather than aliased.

// MaxCallbackData is Telegram's limit on callback_data, in bytes.
const MaxCallbackData = 64

// Action names what a button does. Workflows declare theirs with
// RegisterAction at init, each with the number of ids it carries.
type Action string

// Callback is decoded callback data.
type Callback struct {
	Action Action
	IDs    []int64
}

// ErrBadCallback is returned for data that is not a registered action in
// canonical form; the presser gets an alert and nothing changes.
var ErrBadCallback = errors.New("bad callback data")

var (
	actionRx = regexp.MustCompile(`^[a-z][a-z0-9_]{0,15}$`)
	arity    = map[Action]int{}
)

// RegisterAction declares an action and how many ids it carries. It panics on
// a malformed or duplicate name: that is a programming error caught at start.
func RegisterAction(a Action, ids int) Action {
	if !actionRx.MatchString(string(a)) {
		panic(fmt.Sprintf("bot: malformed callback action %q", a))
	}
	if _, dup := arity[a]; dup {
		panic(fmt.Sprintf("bot: callback action %q registered twice", a))
	}
	if ids < 0 || ids > 4 {
		panic(fmt.Sprintf("bot: callback action %q: %d ids (0–4 fit in 64 bytes)", a, ids))
	}
	arity[a] = ids
	return a
}

// Encode builds callback data for a registered action.
func Encode(a Action, ids ...int64) (string, error) {
	n, ok := arity[a]
	if !ok {
		return "", fmt.Errorf("encode callback: unknown action %q", a)
	}
	if len(ids) != n {
		return "", fmt.Errorf("encode callback %q: %d ids, want %d", a, len(ids), n)
	}
	var sb strings.Builder
	sb.WriteString(string(a))
	for _, id := range ids {
		if id < 0 {
			return "", fmt.Errorf("encode callback %q: negative id %d", a, id)
		}
		sb.WriteByte(':')
		sb.WriteString(strconv.FormatInt(id, 36))
	}
	if sb.Len() > MaxCallbackData {
		return "", fmt.Errorf("encode callback %q: %d bytes exceeds %d", a, sb.Len(), MaxCallbackData)
	}
	return sb.String(), nil
}

// buttonPair is a row of two buttons, reading text1 and text2, that press
// a1 and a2 on the same ids: yes and no, accept and decline.
func buttonPair(text1 string, a1 Action, text2 string, a2 Action, ids ...int64) ([]tele.InlineButton, error) {
	data1, err := Encode(a1, ids...)
	if err != nil {
		return nil, err
	}
	data2, err := Encode(a2, ids...)
	if err != nil {
		return nil, err
	}
	return []tele.InlineButton{{Text: text1, Data: data1}, {Text: text2, Data: data2}}, nil
}

// Decode parses callback data, accepting only what Encode could have made.
func Decode(data string) (Callback, error) {
	if data == "" || len(data) > MaxCallbackData {
		return Callback{}, ErrBadCallback
	}
	parts := strings.Split(data, ":")
	a := Action(parts[0])
	n, ok := arity[a]
	if !ok || len(parts)-1 != n {
		return Callback{}, ErrBadCallback
	}
	cb := Callback{Action: a, IDs: make([]int64, 0, n)}
	for _, p := range parts[1:] {
		id, err := strconv.ParseInt(p, 36, 64)
		if err != nil || id < 0 || strconv.FormatInt(id, 36) != p {
			return Callback{}, ErrBadCallback
		}
		cb.IDs = append(cb.IDs, id)
	}
	return cb, nil
}
