package delivery

import (
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"switchboard/domain"
)

// Feature is a part of the Bot API newer than some servers still in use:
// a local telegram-bot-api build lags the cloud's by months. Where a
// server refuses one, the sender falls back to what every server takes,
// believes the refusal for a while (featureRefusedFor), names it once in
// the log and on /status (Sender.Lacking), and asks again later, so an
// upgraded server is used within the hour.
type Feature struct {
	// ID names it for /status's text (bot's lacksKeys).
	ID string
	// Name is what the log calls it.
	Name string
	// Since is the Bot API version that brought it.
	Since string
	// Fallback says what the bot does without it.
	Fallback string
}

// The features the sender knows to fall back from, in the order /status
// lists them.
var (
	FeatureDrafts = Feature{ID: "drafts", Name: "message drafts", Since: "9.5",
		Fallback: "answers stream into an edited message"}
	FeatureCopyButtons = Feature{ID: "copy_buttons", Name: "copy buttons", Since: "7.11",
		Fallback: "messages go without their Copy buttons; the text still holds what they copy"}
	FeatureDateTime = Feature{ID: "date_time", Name: "date and time entities", Since: "9.5",
		Fallback: "times are written in the reader's zone only, as plain text"}
	FeatureEphemeral = Feature{ID: "ephemeral", Name: "ephemeral messages", Since: "10.3",
		Fallback: "what only one member of a group should see is posted for the group, as before"}
	FeatureDisabledButtons = Feature{ID: "disabled_buttons", Name: "disabled buttons", Since: "10.3",
		Fallback: "a finished step's buttons go; its text still says why"}
	FeatureRichMessages = Feature{ID: "rich_messages", Name: "rich messages", Since: "10.1",
		Fallback: "tables and collapsible sections go as plain text"}

	FeatureTopics = Feature{ID: "topics", Name: "topics in private chats", Since: "9.4",
		Fallback: "every workflow writes into the one chat, as before"}

	allFeatures = []Feature{FeatureTopics, FeatureDrafts, FeatureCopyButtons, FeatureDateTime, FeatureEphemeral, FeatureDisabledButtons,
		FeatureRichMessages}
)

// errEphemeralIgnored is how a server without ephemeral messages refuses
// them: it does not; it posts the message for everyone, as it ignores any
// parameter it does not know.
var errEphemeralIgnored = errors.New("an ephemeral message came back with no receiver_user: the server ignored ephemeral_message_parameters")

// fallback is a part of a message a server may refuse: how to tell a
// message uses it, the server's refusal of it, and the message without it.
type fallback struct {
	feature Feature
	uses    func(body) bool
	refuses func(*APIError) bool
	without func(body) body
	// inThisChat: the refusal is about this message or chat (the bot may
	// not send an ephemeral message there now), not the server: the part
	// is left out of this message only.
	inThisChat bool
}

// fallbacks are the parts the sender leaves out for a server that lacks
// them, tried in this order.
var fallbacks = []fallback{
	{
		// A server older than Bot API 10.1 knows no sendRichMessage (404
		// Not Found, as for any method it does not know) and ignores
		// editMessageText's rich_message, so an edit carrying only that
		// has no text: "message text is empty". The message's Text says
		// the same in the HTML every server takes.
		feature: FeatureRichMessages,
		uses:    func(b body) bool { return b.Rich != "" },
		refuses: func(ae *APIError) bool {
			desc := strings.ToLower(ae.Description)
			return ae.Code == http.StatusNotFound ||
				strings.Contains(desc, "text is empty") || strings.Contains(desc, "text must be non-empty")
		},
		without: func(b body) body { b.Rich = ""; return b },
	},
	{
		// <tg-time> is an unknown tag to a server older than Bot API 9.5:
		// "can't parse entities: Unsupported start tag "tg-time" at byte
		// offset 12". The text inside is the time in the reader's zone.
		feature: FeatureDateTime,
		uses:    func(b body) bool { return strings.Contains(b.Text, "<tg-time") || strings.Contains(b.Rich, "<tg-time") },
		refuses: func(ae *APIError) bool {
			return strings.Contains(strings.ToLower(ae.Description), `unsupported start tag "tg-time"`)
		},
		without: func(b body) body { b.Text, b.Rich = WithoutTimes(b.Text), WithoutTimes(b.Rich); return b },
	},
	{
		// A group where the bot may not send an ephemeral message now: it
		// is no administrator there, and no press of the receiver's
		// within 15 seconds is named. The Bot API documents the rule, not
		// the refusal's words; a server that knows no ephemeral messages
		// never refuses them (errEphemeralIgnored), so every 400 about an
		// ephemeral message is this. An answer to a press (ForPress) is
		// never posted for the group instead: its refusal is the caller's
		// to fall back from (an alert).
		feature:    FeatureEphemeral,
		uses:       func(b body) bool { return b.OnlyFor != 0 && b.ForPress == "" },
		refuses:    func(ae *APIError) bool { return strings.Contains(strings.ToLower(ae.Description), "ephemeral") },
		without:    func(b body) body { b.OnlyFor, b.ForPress = 0, ""; return b },
		inThisChat: true,
	},
	{
		// A server older than Bot API 7.11 sees a copy button as one with
		// nothing but text: "inline keyboard button" refusals.
		feature: FeatureCopyButtons,
		uses:    func(b body) bool { return hasCopy(b.Buttons) },
		refuses: func(ae *APIError) bool {
			return strings.Contains(strings.ToLower(ae.Description), "inline keyboard button")
		},
		without: func(b body) body { b.Buttons = withoutCopy(b.Buttons); return b },
	},
	{
		// The same refusal from a server older than Bot API 10.3, for a
		// disabled button: tried after the copy buttons, so a keyboard
		// with both (none the bot writes) loses the copy buttons first.
		feature: FeatureDisabledButtons,
		uses:    func(b body) bool { return hasButton(b.Buttons, func(b domain.Button) bool { return b.Disabled }) },
		refuses: func(ae *APIError) bool {
			return strings.Contains(strings.ToLower(ae.Description), "inline keyboard button")
		},
		without: func(b body) body {
			b.Buttons = withoutButtons(b.Buttons, func(b domain.Button) bool { return b.Disabled })
			return b
		},
	},
}

// timeTag is a <tg-time> tag, opening or closing.
var timeTag = regexp.MustCompile(`</?tg-time\b[^>]*>`)

// WithoutTimes is HTML text with its date_time entities' tags taken out:
// each time stays as its words, in the reader's zone.
func WithoutTimes(text string) string {
	if !strings.Contains(text, "<tg-time") {
		return text
	}
	return timeTag.ReplaceAllString(text, "")
}

// refusedPart is the part of b the server refused with err, if err is a
// 400 refusing one b uses, or the 404 of a method the server does not
// know (rich messages').
func refusedPart(err error, b body) (fallback, bool) {
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != http.StatusBadRequest && ae.Code != http.StatusNotFound {
		return fallback{}, false
	}
	for _, f := range fallbacks {
		if f.uses(b) && f.refuses(ae) {
			return f, true
		}
	}
	return fallback{}, false
}

// featureRefusedFor is how long a server's refusal of a feature is
// believed: long enough not to ask on every message, short enough that an
// upgraded local Bot API server is used again within the hour.
const featureRefusedFor = time.Hour

// features is what this replica's server was seen to refuse, and until
// when that is believed. Each replica learns it for itself: a refusal
// costs one call that falls back at once, so there is nothing to share.
type features struct {
	mu    sync.Mutex
	until map[string]time.Time
	log   *slog.Logger
}

func newFeatures(log *slog.Logger) *features {
	return &features{until: map[string]time.Time{}, log: log}
}

// lacks reports whether the server refused f within featureRefusedFor.
func (fs *features) lacks(f Feature) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	until, ok := fs.until[f.Name]
	return ok && time.Now().Before(until)
}

// refused records that the server refused f; the first refusal of a
// period is logged, with what the bot does instead.
func (fs *features) refused(f Feature, err error) {
	fs.mu.Lock()
	now := time.Now()
	first := !now.Before(fs.until[f.Name])
	fs.until[f.Name] = now.Add(featureRefusedFor)
	fs.mu.Unlock()
	if first {
		fs.log.Warn("this Bot API server lacks "+f.Name+" (Bot API "+f.Since+"); "+f.Fallback,
			"retry_in", featureRefusedFor, "err", err)
	}
}

// lacking lists the features refused within featureRefusedFor.
func (fs *features) lacking() []Feature {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	now := time.Now()
	var out []Feature
	for _, f := range allFeatures {
		if until, ok := fs.until[f.Name]; ok && now.Before(until) {
			out = append(out, f)
		}
	}
	return out
}

// Lacking lists what this replica's Bot API server was seen to refuse in
// the last hour, for /status.
func (s *Sender) Lacking() []Feature { return s.features.lacking() }

// hasCopy reports whether any button is a copy button.
func hasCopy(rows [][]domain.Button) bool {
	return hasButton(rows, func(b domain.Button) bool { return b.Copy != "" })
}

// withoutCopy is rows with the copy buttons left out.
func withoutCopy(rows [][]domain.Button) [][]domain.Button {
	return withoutButtons(rows, func(b domain.Button) bool { return b.Copy != "" })
}

// hasButton reports whether any button is one of is.
func hasButton(rows [][]domain.Button, is func(domain.Button) bool) bool {
	for _, row := range rows {
		for _, b := range row {
			if is(b) {
				return true
			}
		}
	}
	return false
}

// withoutButtons is rows with the buttons is picks left out (and rows
// left empty by that).
func withoutButtons(rows [][]domain.Button, is func(domain.Button) bool) [][]domain.Button {
	var out [][]domain.Button
	for _, row := range rows {
		var kept []domain.Button
		for _, b := range row {
			if !is(b) {
				kept = append(kept, b)
			}
		}
		if len(kept) > 0 {
			out = append(out, kept)
		}
	}
	return out
}
