package vacancy

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Exclusions are what a user keeps out of their vacancies: ban words (/ban)
// and employers hidden from a card (HideEmployer). Discovery's pick, the
// worker's claim and recovery all read them whole (storage reads them with
// one statement fragment) and ask Excludes, so an exclusion of a new kind is a
// field here, its case in Excludes and its table: nothing else learns of it.
type Exclusions struct {
	BanWords []string
	// HiddenEmployers are employer names as EmployerName keeps them.
	HiddenEmployers []string
}

// MaxEmployer is the longest employer name a hiding keeps, in characters
// (hidden_employers holds at most this many). HH's names are far shorter;
// a longer one is compared by its clipped form, so a vacancy and its hiding
// agree whatever the length.
const MaxEmployer = 500

// EmployerName is an employer's name as a hiding keeps it: at most
// MaxEmployer characters, a clipped one ending in "…".
func EmployerName(name string) string { return Prefix(name, MaxEmployer) }

// ExcludedEmployer is what Excludes names for a vacancy whose employer the
// user hid.
const ExcludedEmployer = "hidden employer"

// Excludes says why the user does not want v: ExcludedEmployer, or the
// first ban word in its title, snippet or description (the description
// only once fetched); "" when nothing excludes it.
func (f Exclusions) Excludes(v Vacancy) string {
	// Most users exclude nothing: neither the name's clip nor the
	// description's parse is paid for them.
	if len(f.HiddenEmployers) > 0 && v.Employer != "" && slices.Contains(f.HiddenEmployers, EmployerName(v.Employer)) {
		return ExcludedEmployer
	}
	if len(f.BanWords) == 0 {
		return ""
	}
	return NewBans(f.BanWords).Match(v.Title, v.Snippet, PlainText(v.Description))
}

// Limits on ban words.
const (
	MaxBanWordLen = 100
	MaxBanWords   = 200
)

// NormalizeBanWord lower-cases a ban word or phrase, folds ё to е and
// collapses its spaces; it returns "" for something with no word in it.
func NormalizeBanWord(s string) string {
	return strings.Join(tokens(s), " ")
}

// tokens splits text into lower-cased words. Letters and digits of any
// script make words, and so do + and # so that "C++" and "C#" stay words
// of their own rather than matching "C".
func tokens(s string) []string {
	var out []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			out = append(out, cur.String())
			cur.Reset()
		}
	}
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '+' || r == '#' {
			r = unicode.ToLower(r)
			if r == 'ё' {
				r = 'е'
			}
			cur.WriteRune(r)
			continue
		}
		flush()
	}
	flush()
	return out
}

// Bans matches a user's ban words: case-insensitive, Cyrillic-aware, whole
// words or whole phrases ("java" bans "Java developer" but not "JavaScript").
type Bans struct {
	phrases [][]string
}

// NewBans compiles normalized ban words (as NormalizeBanWord returns them).
func NewBans(words []string) Bans {
	var b Bans
	for _, w := range words {
		if t := tokens(w); len(t) > 0 {
			b.phrases = append(b.phrases, t)
		}
	}
	return b
}

// Empty reports whether there is nothing to ban.
func (b Bans) Empty() bool { return len(b.phrases) == 0 }

// Match returns the first ban word found in any of the texts, or "".
func (b Bans) Match(texts ...string) string {
	if b.Empty() {
		return ""
	}
	for _, text := range texts {
		if text == "" {
			continue
		}
		toks := tokens(text)
		for _, ph := range b.phrases {
			if containsPhrase(toks, ph) {
				return strings.Join(ph, " ")
			}
		}
	}
	return ""
}

func containsPhrase(toks, ph []string) bool {
	for i := 0; i+len(ph) <= len(toks); i++ {
		match := true
		for j, w := range ph {
			if toks[i+j] != w {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// validBanWord reports why a ban word cannot be stored ("" if it can).
func validBanWord(raw, norm string) string {
	switch {
	case norm == "":
		return "ban.error_empty"
	case utf8.RuneCountInString(raw) > MaxBanWordLen:
		return "ban.error_too_long"
	}
	return ""
}
