package analysis

import (
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits on /run_new's filters.
const (
	MaxKeywords   = 20
	MaxKeywordLen = 50
	MaxMinLen     = 4000
)

// windowRx spots a window /run_new does not offer ("12h", "30d").
var windowRx = regexp.MustCompile(`^\d+[a-z]+$`)

// windows are the windows /run_new accepts.
var windows = map[string]time.Duration{"24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour}

// ParseRunArgs reads `/run_new [24h|7d] [chat=ID] [keywords=a,b] [min_len=N] [mentions]`;
// the window defaults to 24h.
func ParseRunArgs(args string) (Filters, error) {
	f := Filters{Window: 24 * time.Hour}
	seenWindow := false
	for _, tok := range strings.Fields(args) {
		key, val, hasVal := strings.Cut(tok, "=")
		key = strings.ToLower(key)
		switch {
		case !hasVal && windows[key] != 0:
			if seenWindow {
				return Filters{}, inputError("run_new.error_window", tok)
			}
			seenWindow = true
			f.Window = windows[key]
		case !hasVal && key == "mentions":
			f.Mentions = true
		case hasVal && key == "chat":
			id, err := strconv.ParseInt(val, 10, 64)
			// Group ids are negative in the Bot API.
			if err != nil || id >= 0 {
				return Filters{}, inputError("run_new.error_chat", tok)
			}
			f.ChatID = id
		case hasVal && key == "keywords":
			for _, k := range strings.Split(val, ",") {
				k = strings.ToLower(strings.TrimSpace(k))
				if k == "" {
					continue
				}
				if utf8.RuneCountInString(k) > MaxKeywordLen {
					return Filters{}, inputError("run_new.error_keywords", tok)
				}
				f.Keywords = append(f.Keywords, k)
			}
			if len(f.Keywords) == 0 || len(f.Keywords) > MaxKeywords {
				return Filters{}, inputError("run_new.error_keywords", tok)
			}
		case hasVal && key == "min_len":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 || n > MaxMinLen {
				return Filters{}, inputError("run_new.error_min_len", tok)
			}
			f.MinLen = n
		case !hasVal && windowRx.MatchString(key):
			return Filters{}, inputError("run_new.error_window", tok)
		default:
			return Filters{}, inputError("run_new.error_unknown", tok)
		}
	}
	return f, nil
}
