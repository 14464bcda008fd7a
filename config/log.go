package config

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
)

// NewLogger returns the process's JSON logger. Libraries put secrets in
// their errors (telebot's network errors carry the request URL, and with it
// the bot token), so every message and attribute passes a redactor that
// removes the configured secrets wherever they appear.
func NewLogger(level string, w io.Writer, cfg *Config) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(level)) // validated in Load
	var h slog.Handler = slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})
	if cfg != nil {
		if secrets := cfg.secretValues(); len(secrets) > 0 {
			h = newRedactingHandler(h, secrets)
		}
	}
	return slog.New(h)
}

// secretValues lists the strings that must never reach a log: the token, the
// API key, and passwords inside connection URLs.
func (c Config) secretValues() []string {
	var out []string
	add := func(s string) {
		// Very short values would shred ordinary text and protect nothing.
		if len(s) >= 4 {
			out = append(out, s)
		}
	}
	add(c.TelegramToken)
	add(c.LLMAPIKey)
	add(c.HHClientID)
	add(c.HHClientSecret)
	add(c.HHAppToken)
	for _, raw := range []string{c.DatabaseURL, c.RedisURL} {
		if u, err := url.Parse(raw); err == nil {
			if p, ok := u.User.Password(); ok {
				add(p)
				add(url.QueryEscape(p))
			}
		}
	}
	return out
}

type redactingHandler struct {
	inner slog.Handler
	r     *strings.Replacer
}

func newRedactingHandler(inner slog.Handler, secrets []string) *redactingHandler {
	pairs := make([]string, 0, 2*len(secrets))
	for _, s := range secrets {
		pairs = append(pairs, s, "[redacted]")
	}
	return &redactingHandler{inner: inner, r: strings.NewReplacer(pairs...)}
}

func (h *redactingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *redactingHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.Replace(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.inner.Handle(ctx, out)
}

func (h *redactingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = h.attr(a)
	}
	return &redactingHandler{inner: h.inner.WithAttrs(clean), r: h.r}
}

func (h *redactingHandler) WithGroup(name string) slog.Handler {
	return &redactingHandler{inner: h.inner.WithGroup(name), r: h.r}
}

func (h *redactingHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.Replace(v.String()))
	case slog.KindGroup:
		group := v.Group()
		clean := make([]slog.Attr, len(group))
		for i, g := range group {
			clean[i] = h.attr(g)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(clean...)}
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, h.r.Replace(x.Error()))
		case fmt.Stringer:
			return slog.String(a.Key, h.r.Replace(x.String()))
		case []byte:
			return slog.String(a.Key, h.r.Replace(string(x)))
		default:
			// Keep structured values structured unless they carry a secret.
			if text := fmt.Sprint(x); h.r.Replace(text) != text {
				return slog.String(a.Key, h.r.Replace(text))
			}
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
