package resume

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// systemPrompt asks for the profile the relevance prompt reads (see
// vacancy's buildPrompt): what the person does, knows and wants, in their
// words' language, without contacts.
const systemPrompt = `You turn a job seeker's résumé into a short profile that another assistant reads to judge vacancies for them.
Write in the language the résumé is written in. Use only facts the résumé states: invent nothing, do not guess salary or location.
Leave out the name, phone numbers, e-mail and street addresses, links and dates of birth.
Plain text without Markdown, at most 1200 characters, one short line per item:
- the role they work in and their level (junior, middle, senior, lead), with years of experience;
- key skills and technologies, comma-separated, the strongest first;
- the last two or three jobs in a few words each (role, domain, what they did);
- education and languages, if stated;
- what they are looking for (role, schedule, remote or office, city, salary), only if stated.
Answer with JSON: {"profile": "..."}.`

// maxInput is how much of the résumé the LLM reads, in characters: a
// résumé's facts are in its first pages, and a long one must still fit the
// model's window with the prompt and the answer.
const maxInput = 12000

// buildPrompt is the user prompt: the résumé's text, clipped.
func buildPrompt(text string) string {
	text, cut := Clip(text, maxInput)
	var sb strings.Builder
	sb.WriteString("## Résumé\n")
	sb.WriteString(text)
	if cut {
		sb.WriteString("\n[the rest of the résumé is left out]")
	}
	return sb.String()
}

// answer is the LLM's JSON answer.
type answer struct {
	Profile string `json:"profile"`
	max     int
}

// Validate refuses an empty profile or one longer than a profile may be.
func (a *answer) Validate() error {
	a.Profile = strings.TrimSpace(a.Profile)
	if a.Profile == "" {
		return errors.New("empty profile")
	}
	if n := utf8.RuneCountInString(a.Profile); a.max > 0 && n > a.max {
		return fmt.Errorf("profile of %d characters, at most %d", n, a.max)
	}
	return nil
}
