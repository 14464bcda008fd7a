package delivery

import (
	"log/slog"
	"sync"
	"time"
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

	allFeatures = []Feature{FeatureDrafts, FeatureCopyButtons}
)

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
