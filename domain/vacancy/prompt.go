package vacancy

import (
	"errors"
	"fmt"
	"strings"
)

// Verdict is the LLM's relevance judgement, as validated JSON.
type Verdict struct {
	IsRelevant    *bool    `json:"is_relevant"`
	Score         int      `json:"score"`
	Reasons       []string `json:"reasons"`
	MatchedSkills []string `json:"matched_skills"`
}

// Relevant reports the verdict (false when absent).
func (v Verdict) Relevant() bool { return v.IsRelevant != nil && *v.IsRelevant }

// Validate is called by the LLM port: an answer that breaks these rules
// counts as invalid JSON and is retried once.
func (v *Verdict) Validate() error {
	if v.IsRelevant == nil {
		return errors.New("is_relevant missing")
	}
	if v.Score < 0 || v.Score > 100 {
		return fmt.Errorf("score %d outside 0..100", v.Score)
	}
	// Models pad lists; keep the message short rather than refuse.
	v.Reasons = clean(v.Reasons, 5, 300)
	v.MatchedSkills = clean(v.MatchedSkills, 15, 60)
	return nil
}

func clean(items []string, n, runes int) []string {
	out := make([]string, 0, min(len(items), n))
	for _, s := range items {
		s = strings.Join(strings.Fields(s), " ")
		if s == "" {
			continue
		}
		out = append(out, truncate(s, runes))
		if len(out) == n {
			break
		}
	}
	return out
}

// systemPrompt asks for the JSON shape Verdict validates.
const systemPrompt = `You screen job vacancies for one job seeker.
Judge whether the vacancy fits the seeker's profile: skills, seniority, wishes (location, schedule, salary).
Use the seeker's past decisions, when given, as examples of their taste; an application that led to an
invitation or an offer says more about what suits them than one that did not.
Answer with one JSON object and nothing else:
{"is_relevant": true|false, "score": 0-100, "reasons": ["short reason", ...], "matched_skills": ["skill", ...]}
score is how well the vacancy fits (100 = perfect). Give at most three reasons, each under 20 words,
in the language of the profile. matched_skills lists the profile's skills the vacancy asks for.`

// Liked is a vacancy the person applied to, as an example of their taste:
// Stage says how far the application got (Offer, Invited, else Applied),
// and the further, the more it weighs (Matches.Claim reads those first).
type Liked struct {
	Title string
	Stage Status
}

// likedMarks mark the examples that weigh more in the prompt.
var likedMarks = map[Status]string{Offer: " (got an offer)", Invited: " (invited to an interview)"}

// maxDescription bounds the vacancy text the model sees.
const maxDescription = 6000

// buildPrompt is the user prompt: profile, taste examples, and the
// vacancy reduced to plain text. Everything HH or the user wrote is data,
// fenced so the model does not read it as instructions.
func buildPrompt(profile string, applied []Liked, rejected []string, v Vacancy) string {
	var sb strings.Builder
	sb.WriteString("## Seeker profile\n")
	if strings.TrimSpace(profile) == "" {
		sb.WriteString("(none given: judge general fit; the seeker follows searches that found this vacancy)\n")
	} else {
		sb.WriteString(profile + "\n")
	}
	if len(applied) > 0 {
		sb.WriteString("\n## Vacancies the seeker applied to, strongest signals first\n")
		for _, l := range applied {
			sb.WriteString("- " + l.Title + likedMarks[l.Stage] + "\n")
		}
	}
	if len(rejected) > 0 {
		sb.WriteString("\n## Vacancies the seeker marked not interesting\n")
		for _, t := range rejected {
			sb.WriteString("- " + t + "\n")
		}
	}
	writeVacancy(&sb, v, true)
	return sb.String()
}

// writeVacancy writes the "## Vacancy" section both prompts share: the
// vacancy reduced to plain text, its terms (salary, experience, schedule)
// only with terms, since a letter has no use for them.
func writeVacancy(sb *strings.Builder, v Vacancy, terms bool) {
	sb.WriteString("\n## Vacancy\nTitle: " + v.Title + "\n")
	if v.Employer != "" {
		sb.WriteString("Employer: " + v.Employer + "\n")
	}
	if v.Area != "" {
		sb.WriteString("Area: " + v.Area + "\n")
	}
	if terms {
		if s := v.Salary.String(); s != "" {
			sb.WriteString("Salary: " + s + "\n")
		}
		if v.Experience != "" {
			sb.WriteString("Experience: " + v.Experience + "\n")
		}
		if v.Schedule != "" {
			sb.WriteString("Schedule: " + v.Schedule + "\n")
		}
	}
	if len(v.KeySkills) > 0 {
		sb.WriteString("Key skills: " + strings.Join(v.KeySkills, ", ") + "\n")
	}
	text := PlainText(v.Description)
	if text == "" {
		text = v.Snippet
	}
	sb.WriteString("Description:\n" + truncate(text, maxDescription) + "\n")
}

// String renders a salary as "100000–150000 RUR", "from 100000 RUR" style
// with symbols only, so it needs no translation.
func (s Salary) String() string {
	cur := s.Currency
	switch {
	case s.From > 0 && s.To > 0:
		return fmt.Sprintf("%d–%d %s", s.From, s.To, cur)
	case s.From > 0:
		return fmt.Sprintf("≥ %d %s", s.From, cur)
	case s.To > 0:
		return fmt.Sprintf("≤ %d %s", s.To, cur)
	}
	return ""
}
