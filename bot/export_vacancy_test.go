package bot

import "switchboard/domain/vacancy"

// RenderVacancy is renderVacancy without a verdict, for the salary tests.
func (b *Bot) RenderVacancy(lang string, v vacancy.Vacancy) string {
	return b.renderVacancy(lang, v, nil, "")
}
