package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/storage"
	"switchboard/storage/storagetest"
)

// Whatever a Telegram client puts in an update's strings, intake stores
// the update and moves on: an error from storeUpdates is retried for ever
// (the poller's offset stays, a webhook answers an error), so one body the
// inbox cannot take would stall every update behind it. The strings go in
// through json.Marshal, as Go writes them, and rawEscape also raw between
// quotes, to reach the escapes Go never writes (\u0000 spelled by a
// client, a lone surrogate half, bytes that are not UTF-8); rawValue
// stands raw where a number belongs, for values jsonb cannot hold
// whatever is cleaned (1e1000000).
func FuzzIntakeNeverStalls(f *testing.F) {
	// One database for the whole run: a fresh one per input would make
	// the fuzzer test database creation, at a few inputs a second.
	st := storagetest.New(f)
	log := slog.New(slog.DiscardHandler)
	var nextID atomic.Int64

	// Shapes: 0 a text message, 1 a photo with a caption, 2 a button press.
	for _, s := range []struct {
		shape                                               uint8
		text, caption, data, firstName, rawEscape, rawValue string
	}{
		{0, "Привет! Ищу работу Go-разработчиком 🙂", "", "", "Олена", "Коваленко", ""},
		{1, "", "моё резюме, стр. 1", "", "Taras", "", ""},
		{2, "Vacancies", "", "vac:open:123456", "Ann", "", ""},
		// NUL as Go's encoder writes it (\u0000), in each field.
		{0, "a\x00b", "", "", "\x00", "", ""},
		{1, "", "caption\x00", "", "Bo\x00b", "", ""},
		{2, "x\x00", "", "oa:1\x00", "A", "", ""},
		// Escapes only a client writes.
		{0, "hi", "", "", "A", `\u0000`, ""},
		{0, "hi", "", "", "A", `x\ud83d`, ""},
		{2, "hi", "", "oa:1", "A", `\ude00y`, ""},
		{1, "", "c", "", "A", `\ud83dA\uD83D\uD83D`, ""},
		{0, "hi", "", "", "A", `smile \ud83d\ude00`, ""}, // a pair: kept as sent
		{0, "hi", "", "", "A", `\\u0000`, ""},            // the text \u0000: kept as sent
		// Bytes that are not UTF-8, raw and as Go's encoder writes them.
		{0, "\xff\xfe", "", "", "\xff", "\xff\xfe", ""},
		{2, "hi", "", "oa:\xff", "A", "\xed\xa0\xbd", ""}, // a surrogate in UTF-8 form
		// Values jsonb cannot hold however the strings are cleaned.
		{0, "hi", "", "", "A", "", "1e1000000"},
		{1, "", "c", "", "A", "", "-1e1000000"},
		{2, "hi", "", "oa:1", "A", "", "1e-1000000"},
		{0, "hi", "", "", "A", `\u0000`, "123456789012345678901234567890.5e300"},
		{0, "hi", "", "", "A", "", strings.Repeat("[", 5000) + strings.Repeat("]", 5000)},
	} {
		f.Add(s.shape, s.text, s.caption, s.data, s.firstName, s.rawEscape, s.rawValue)
	}

	f.Fuzz(func(t *testing.T, shape uint8, text, caption, data, firstName, rawEscape, rawValue string) {
		ctx := context.Background()
		id := nextID.Add(1)
		body, valueSpliced := intakeFuzzBody(id, shape%3, text, caption, data, firstName, rawEscape, rawValue)

		u, err := InboxUpdateOf(body)
		// Every body built here is JSON with an update_id: refusing one
		// would drop a real update, not skip garbage.
		require.NoError(t, err, "body %q", body)
		require.Equal(t, id, u.ID)

		require.NoError(t, storeUpdates(ctx, st.Inbox(), "", storage.AboutData, log, []domain.InboxUpdate{u}),
			"intake stalls on body %q", body)

		var refused *string
		var stored string
		require.NoError(t, st.Pool().QueryRow(ctx, `SELECT refused, body::text FROM inbox WHERE update_id = $1`, id).
			Scan(&refused, &stored), "update %d is not in the inbox; body %q", id, body)

		var got intakeFuzzStored
		require.NoError(t, json.Unmarshal([]byte(stored), &got), "stored %q", stored)
		if refused != nil {
			// Cleaning covers every string; only a raw value may be beyond it.
			require.True(t, valueSpliced, "refused (%s) though only strings varied; body %q", *refused, body)
			require.Empty(t, got.text()+got.caption()+got.data()+got.firstName(),
				"a skeleton keeps nothing the sender wrote: %s", stored)
			return
		}
		// Stored cleaned, and nothing but what PostgreSQL refuses changed.
		switch shape % 3 {
		case 0:
			require.Equal(t, asStored(text), got.text(), "text; body %q", body)
		case 1:
			require.Equal(t, asStored(caption), got.caption(), "caption; body %q", body)
		case 2:
			require.Equal(t, asStored(text), got.text(), "pressed message's text; body %q", body)
			require.Equal(t, asStored(data), got.data(), "data; body %q", body)
		}
		require.Equal(t, asStored(firstName), got.firstName(), "first_name; body %q", body)
	})
}

// intakeFuzzBody builds an update of the shape given. rawEscape stands
// raw between quotes in last_name when that is a JSON string, and is
// written by json.Marshal otherwise; rawValue stands raw as the message's
// date when it is a JSON value (valueSpliced), else the date is ordinary.
func intakeFuzzBody(id int64, shape uint8, text, caption, data, firstName, rawEscape, rawValue string) (body json.RawMessage, valueSpliced bool) {
	last := `"` + rawEscape + `"`
	if !json.Valid([]byte(last)) {
		last = jsonQuote(rawEscape)
	}
	date := "1700000000"
	if json.Valid([]byte(rawValue)) {
		date, valueSpliced = rawValue, true
	}
	from := fmt.Sprintf(`{"id":4242,"is_bot":false,"first_name":%s,"last_name":%s,"language_code":"uk"}`, jsonQuote(firstName), last)
	msg := func(content string) string {
		return fmt.Sprintf(`{"message_id":7,"date":%s,"chat":{"id":4242,"type":"private","first_name":%s},"from":%s,%s}`,
			date, jsonQuote(firstName), from, content)
	}
	var update string
	switch shape {
	case 0:
		update = `"message":` + msg(`"text":`+jsonQuote(text))
	case 1:
		update = `"message":` + msg(`"photo":[{"file_id":"AgACAgIAAxk","file_unique_id":"AQAD","width":90,"height":67}],"caption":`+jsonQuote(caption))
	default:
		update = fmt.Sprintf(`"callback_query":{"id":"4382bfdwdsb323b2d9","from":%s,"message":%s,"chat_instance":"-9079346411","data":%s}`,
			from, msg(`"text":`+jsonQuote(text)), jsonQuote(data))
	}
	return json.RawMessage(fmt.Sprintf(`{"update_id":%d,%s}`, id, update)), valueSpliced
}

func jsonQuote(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

// asStored is s as the inbox keeps it when it came through json.Marshal:
// each byte that is not UTF-8 already U+FFFD (Go's encoder), NUL U+FFFD
// (cleaning).
func asStored(s string) string {
	var back string
	_ = json.Unmarshal([]byte(jsonQuote(s)), &back)
	return strings.ReplaceAll(back, "\x00", domain.Replacement)
}

// intakeFuzzStored reads what the tests look at in a stored update; the
// date is left out, as it may hold anything.
type intakeFuzzStored struct {
	Message  *intakeFuzzMessage `json:"message"`
	Callback *struct {
		From    intakeFuzzUser     `json:"from"`
		Message *intakeFuzzMessage `json:"message"`
		Data    string             `json:"data"`
	} `json:"callback_query"`
}

type intakeFuzzMessage struct {
	From    intakeFuzzUser `json:"from"`
	Text    string         `json:"text"`
	Caption string         `json:"caption"`
}

type intakeFuzzUser struct {
	FirstName string `json:"first_name"`
}

func (s intakeFuzzStored) msg() *intakeFuzzMessage {
	switch {
	case s.Message != nil:
		return s.Message
	case s.Callback != nil && s.Callback.Message != nil:
		return s.Callback.Message
	}
	return &intakeFuzzMessage{}
}

func (s intakeFuzzStored) text() string    { return s.msg().Text }
func (s intakeFuzzStored) caption() string { return s.msg().Caption }

func (s intakeFuzzStored) data() string {
	if s.Callback == nil {
		return ""
	}
	return s.Callback.Data
}

func (s intakeFuzzStored) firstName() string {
	if s.Callback != nil {
		return s.Callback.From.FirstName
	}
	return s.msg().From.FirstName
}
