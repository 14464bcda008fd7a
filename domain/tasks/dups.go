package tasks

import (
	"context"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball"
)

// Open is a destination's open task, as the duplicate check reads it.
type Open struct {
	Number int
	URL    string
	Title  string
}

// Lister reads a destination's open tasks for the duplicate check before
// a task is filed. GitHub's client implements it (with conditional
// requests, so an unchanged list costs no rate limit); a tracker without
// it (a webhook's receiver, which we cannot read) is not checked.
type Lister interface {
	Open(ctx context.Context, target string) ([]Open, error)
}

// Likeness thresholds: a task looks like an open one when their titles
// share at least minShared significant words and the shared words weigh
// at least minLikeness of both titles (Dice's coefficient). Tuned on
// pairs like "Fix the login page redirect" / "Login page redirect is
// broken" (alike) and "Update the docs" / "Update the deps" (not).
const (
	minShared   = 2
	minLikeness = 0.6
)

// LikelyDuplicate is the open task title most looks like, if any looks
// enough like it to ask the admins before filing.
func LikelyDuplicate(title string, open []Open) (Open, bool) {
	words := stems(title)
	best, bestScore := Open{}, 0.0
	for _, o := range open {
		if score, shared := likeness(words, stems(o.Title)); shared >= minShared && score >= minLikeness && score > bestScore {
			best, bestScore = o, score
		}
	}
	return best, bestScore > 0
}

// Likeness is how alike two titles read, from 0 to 1.
func Likeness(a, b string) float64 {
	score, _ := likeness(stems(a), stems(b))
	return score
}

func likeness(a, b map[string]bool) (float64, int) {
	if len(a) == 0 || len(b) == 0 {
		return 0, 0
	}
	shared := 0
	for w := range a {
		if b[w] {
			shared++
		}
	}
	return 2 * float64(shared) / float64(len(a)+len(b)), shared
}

// stems are a title's significant words, lower-cased and stemmed
// (Snowball's English stemmer for Latin words, its Russian one for
// Cyrillic, Ukrainian included: near enough for titles), so "deploy",
// "deploying" and "deployment", or "сервер", "сервера" and "серверу",
// meet. Words of one or two letters and the commonest function words of
// the bot's languages carry no likeness.
func stems(title string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(title), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if utf8.RuneCountInString(w) < 3 || stopWords[w] {
			continue
		}
		lang := "english"
		if strings.ContainsFunc(w, func(r rune) bool { return unicode.Is(unicode.Cyrillic, r) }) {
			lang = "russian"
		}
		if s, err := snowball.Stem(w, lang, false); err == nil && s != "" {
			w = s
		}
		out[w] = true
	}
	return out
}

var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`the and for with from into that this are was were has have not but all any our
		you your its can should must will need needs make add fix new use when then than also out please
		пожалуйста
		это как что для или при без под над все его она они оно так уже ещё еще чтобы нужно надо
		був була було для або при без що щоб вже ще треба`) {
		m[w] = true
	}
	return m
}()
