package vacancy

import (
	"strings"
)

// minLetter is the shortest answer taken as a letter, in characters: less
// is a refusal or a fragment, not something to send an employer.
const minLetter = 80

// maxBase bounds the earlier letter a rewrite quotes.
const maxBase = 4000

// letterLanguageNames are the languages a user may choose, as the prompt
// names them.
var letterLanguageNames = map[string]string{"en": "English", "ru": "Russian", "uk": "Ukrainian"}

// letterSystemPrompt is the cover letter's instructions; language is the
// one the user chose ("" = the vacancy's). The rule against invented facts
// comes first: a letter claiming what the seeker never did harms them.
func letterSystemPrompt(language string) string {
	lang := "in the language the vacancy is written in"
	if name, ok := letterLanguageNames[language]; ok {
		lang = "in " + name
	}
	return `You write a cover letter for one job seeker applying to one vacancy.
Use only facts the seeker's profile states. Never invent experience, employers, projects, numbers,
degrees, skills or wishes the profile does not mention; when the profile says little, write less.
Connect what the vacancy asks for with what the profile shows; do not repeat the vacancy back.
Write ` + lang + `, in a few short paragraphs (three at most, under 1200 characters in all):
why this vacancy, what in the profile fits it, and a polite closing that offers to talk.
Plain text only: no subject line, no headings, no lists, no placeholders such as [Name] or [Company];
sign with the seeker's name only if the profile gives it. Answer with the letter alone.`
}

// letterTasks are what a rewrite asks for, after the letter it rewrites.
var letterTasks = map[LetterStyle]string{
	StyleAnother: "Write a new version of this letter: different wording and structure, the same facts.",
	StyleShorter: "Rewrite this letter at about half its length: two short paragraphs, the strongest points only.",
	StyleFormal:  "Rewrite this letter in a more formal, businesslike register; keep its facts and length.",
}

// letterPrompt is the user prompt: the profile, the vacancy as plain text,
// and for a rewrite the letter it starts from with the task. Everything the
// user, HH or an earlier answer wrote is data under its heading.
func letterPrompt(c LetterClaim) string {
	var sb strings.Builder
	sb.WriteString("## Seeker profile\n" + strings.TrimSpace(c.Profile) + "\n")
	writeVacancy(&sb, c.Vacancy, false)
	if task, ok := letterTasks[c.Letter.Style]; ok && strings.TrimSpace(c.Base) != "" {
		sb.WriteString("\n## Letter\n" + truncate(strings.TrimSpace(c.Base), maxBase) + "\n")
		sb.WriteString("\n## Task\n" + task + "\n")
	}
	return sb.String()
}
