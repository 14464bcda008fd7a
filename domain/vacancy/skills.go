package vacancy

import (
	"context"
	"strings"
	"time"
)

// SkillsWindow is how far back /skills looks at a user's matched vacancies.
const SkillsWindow = 30 * 24 * time.Hour

// TopSkills is how many skills /skills lists: one message, read at a glance.
const TopSkills = 15

// SkillCount is one skill HH listed on a user's matched vacancies.
type SkillCount struct {
	// Name is the spelling most of those vacancies used.
	Name string
	// Vacancies is how many of them list it.
	Vacancies int
	// InProfile reports whether the user's profile names it.
	InProfile bool
}

// SkillsReport is what /skills shows: the skills most asked for in the
// vacancies the LLM judged relevant for the user within SkillsWindow.
type SkillsReport struct {
	// Matched counts those vacancies; WithSkills those of them whose HH
	// detail lists key skills (the shares are of WithSkills).
	Matched, WithSkills int
	Skills              []SkillCount
	// NoProfile: the user has not written a profile, so every skill is
	// missing from it and the report says how to write one.
	NoProfile bool
}

// Skills is the user's /skills report, each skill marked present or
// missing from their profile.
func (s *Service) Skills(ctx context.Context, userID int64) (SkillsReport, error) {
	profile, err := s.deps.Profiles.Profile(ctx, userID)
	if err != nil {
		return SkillsReport{}, err
	}
	since := s.deps.Clock.Now().Add(-SkillsWindow)
	matched, with, skills, err := s.deps.Matches.Skills(ctx, userID, since, TopSkills)
	if err != nil {
		return SkillsReport{}, err
	}
	for i := range skills {
		skills[i].InProfile = NamesSkill(profile, skills[i].Name)
	}
	return SkillsReport{Matched: matched, WithSkills: with, Skills: skills, NoProfile: strings.TrimSpace(profile) == ""}, nil
}

// skillAliases are names HH and people use for one skill, so a profile
// saying "golang" has the "Go" a vacancy asks for. Keys and values are
// as NormalizeBanWord writes them.
var skillAliases = map[string][]string{
	"go":              {"golang"},
	"golang":          {"go"},
	"postgresql":      {"postgres", "psql"},
	"postgres":        {"postgresql"},
	"kubernetes":      {"k8s"},
	"k8s":             {"kubernetes"},
	"javascript":      {"js"},
	"js":              {"javascript"},
	"typescript":      {"ts"},
	"ts":              {"typescript"},
	"node js":         {"nodejs", "node"},
	"nodejs":          {"node js", "node"},
	"react":           {"react js", "reactjs"},
	"react js":        {"react", "reactjs"},
	"c#":              {"csharp"},
	"ci cd":           {"ci", "cicd"},
	"английский язык": {"english", "английский"},
	"english":         {"английский", "английский язык"},
}

// NamesSkill reports whether profile names skill, or a common alias of it,
// as whole words, the way ban words match: "Go" is in "5 years of Go, some
// Python" and not in "Google"; "C++" is not "C"; "Node.js" is "node js".
func NamesSkill(profile, skill string) bool {
	want := tokens(skill)
	if len(want) == 0 {
		return false
	}
	have := tokens(profile)
	if containsPhrase(have, want) {
		return true
	}
	for _, a := range skillAliases[strings.Join(want, " ")] {
		if containsPhrase(have, strings.Fields(a)) {
			return true
		}
	}
	return false
}
