package bot

import (
	"strings"

	"switchboard/domain/vacancy"
	"switchboard/locales"
)

// skillNameBudget bounds one skill's name as HH wrote it; TopSkills lines of
// it stay far inside one message.
const skillNameBudget = 60

// skills answers /skills: the skills most asked for in the user's
// matched vacancies of the last 30 days, how often, and which their
// profile does not name.
func (u *vacancyUI) skills(r *Request) error {
	rep, err := u.v.Skills(r.Ctx, r.User.ID)
	if err != nil {
		return err
	}
	return r.Reply(renderSkills(r, rep), nil)
}

func renderSkills(r *Request, rep vacancy.SkillsReport) string {
	switch {
	case rep.Matched == 0:
		return r.T("skills.empty")
	case len(rep.Skills) == 0:
		return r.T("skills.no_skills", locales.Data{"Matched": rep.Matched})
	}
	lines := []string{
		r.T("skills.header"),
		r.T("skills.basis", locales.Data{"Matched": rep.Matched, "WithSkills": rep.WithSkills}),
		"",
	}
	missing := 0
	for i, s := range rep.Skills {
		d := locales.Data{
			"Rank":    i + 1,
			"Skill":   locales.HTML(clip(oneLine(s.Name), skillNameBudget)),
			"Count":   s.Vacancies,
			"Percent": (s.Vacancies*100 + rep.WithSkills/2) / rep.WithSkills,
		}
		key := "skills.line"
		if !s.InProfile {
			key = "skills.line_missing"
			missing++
		}
		lines = append(lines, r.T(key, d))
	}
	switch {
	case rep.NoProfile:
		lines = append(lines, "", r.T("skills.no_profile"))
	case missing > 0:
		lines = append(lines, "", r.T("skills.missing", locales.Data{"Missing": missing}))
	default:
		lines = append(lines, "", r.T("skills.all_present"))
	}
	return strings.Join(lines, "\n")
}
