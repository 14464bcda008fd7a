package bot

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	tele "gopkg.in/telebot.v3"

	"switchboard/domain"
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

// Action is what a button does: a short name and how many ids its data
// carries. A workflow declares its actions as values (NewAction) and hands
// each to the bot with its handler (Bot.HandleButton): the bot's own table is
// what a press is decoded against, so there is no global registry, and data
// naming an action nobody handles never decodes.
type Action struct {
	Name string
	IDs  int
}

// Callback is decoded callback data.
type Callback struct {
	Action Action
	IDs    []int64
}

// ErrBadCallback is returned for data that is not a known action in
// canonical form; the presser gets an alert and nothing changes.
var ErrBadCallback = errors.New("bad callback data")

var actionRx = regexp.MustCompile(`^[a-z][a-z0-9_]{0,15}$`)

// NewAction declares an action and how many ids it carries. It panics on a
// malformed name or more ids than fit in 64 bytes: a programming error,
// caught at start.
func NewAction(name string, ids int) Action {
	if err := (Action{Name: name, IDs: ids}).valid(); err != nil {
		panic("bot: " + err.Error())
	}
	return Action{Name: name, IDs: ids}
}

func (a Action) valid() error {
	if !actionRx.MatchString(a.Name) {
		return fmt.Errorf("malformed callback action %q", a.Name)
	}
	if a.IDs < 0 || a.IDs > 4 {
		return fmt.Errorf("callback action %q: %d ids (0–4 fit in 64 bytes)", a.Name, a.IDs)
	}
	return nil
}

// Actions is a table of actions by name: what a press's data is decoded
// against.
type Actions map[string]Action

// Add puts a into the table; it panics on a name taken by another action.
func (as Actions) Add(a Action) {
	if _, dup := as[a.Name]; dup {
		panic(fmt.Sprintf("bot: callback action %q declared twice", a.Name))
	}
	as[a.Name] = a
}

// Encode builds callback data for an action.
func Encode(a Action, ids ...int64) (string, error) {
	if err := a.valid(); err != nil {
		return "", fmt.Errorf("encode callback: %w", err)
	}
	if len(ids) != a.IDs {
		return "", fmt.Errorf("encode callback %q: %d ids, want %d", a.Name, len(ids), a.IDs)
	}
	var sb strings.Builder
	sb.WriteString(a.Name)
	for _, id := range ids {
		if id < 0 {
			return "", fmt.Errorf("encode callback %q: negative id %d", a.Name, id)
		}
		sb.WriteByte(':')
		sb.WriteString(strconv.FormatInt(id, 36))
	}
	if sb.Len() > MaxCallbackData {
		return "", fmt.Errorf("encode callback %q: %d bytes exceeds %d", a.Name, sb.Len(), MaxCallbackData)
	}
	return sb.String(), nil
}

// pairStyle colours a buttonPair: what each button does, as its colour
// says it (domain.Style*; "" plain).
type pairStyle [2]string

var (
	// yesNo is a choice between taking and refusing: accept and decline.
	yesNo = pairStyle{domain.StyleSuccess, domain.StyleDanger}
	// confirmGo is a confirmation of a step and a way back.
	confirmGo = pairStyle{domain.StyleSuccess, ""}
	// confirmLoss is a confirmation of what cannot be undone and a way back.
	confirmLoss = pairStyle{domain.StyleDanger, ""}
)

// buttonPair is a row of two buttons, reading text1 and text2, that press
// a1 and a2 on the same ids: yes and no, accept and decline, coloured
// style.
func buttonPair(style pairStyle, text1 string, a1 Action, text2 string, a2 Action, ids ...int64) ([]tele.InlineButton, error) {
	data1, err := Encode(a1, ids...)
	if err != nil {
		return nil, err
	}
	data2, err := Encode(a2, ids...)
	if err != nil {
		return nil, err
	}
	pair := []tele.InlineButton{{Text: text1, Data: data1}, {Text: text2, Data: data2}}
	for i, st := range style {
		if st != "" {
			pair[i] = styled(pair[i], st)
		}
	}
	return pair, nil
}

// Decode parses callback data against the table, accepting only what
// Encode could have made of one of its actions.
func (as Actions) Decode(data string) (Callback, error) {
	name, ids, err := ReadData(data)
	if err != nil {
		return Callback{}, err
	}
	a, ok := as[name]
	if !ok || len(ids) != a.IDs {
		return Callback{}, ErrBadCallback
	}
	return Callback{Action: a, IDs: ids}, nil
}

// ReadData splits callback data in its one canonical form into the name of
// its action and its ids, without knowing the action: how a button is read
// from outside the bot (its tests, the end-to-end suite). A press is decoded
// against the bot's table (Actions.Decode).
func ReadData(data string) (string, []int64, error) {
	if data == "" || len(data) > MaxCallbackData {
		return "", nil, ErrBadCallback
	}
	parts := strings.Split(data, ":")
	if !actionRx.MatchString(parts[0]) || len(parts) > 5 {
		return "", nil, ErrBadCallback
	}
	ids := make([]int64, 0, len(parts)-1)
	for _, p := range parts[1:] {
		id, err := strconv.ParseInt(p, 36, 64)
		if err != nil || id < 0 || strconv.FormatInt(id, 36) != p {
			return "", nil, ErrBadCallback
		}
		ids = append(ids, id)
	}
	return parts[0], ids, nil
}
