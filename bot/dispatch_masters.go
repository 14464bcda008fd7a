package bot

import (
	"context"
	"strings"

	tele "gopkg.in/telebot.v3"

	"switchboard/domain/dispatch"
	"switchboard/locales"
)

// /masters: the admins' list of masters, a page at a time, each with
// their place, skills, status and their customers' ratings over the last
// dispatch.RatingWindow, the record distribution ranks them by.

// actionMastersPage turns /masters' page in place; it carries the page,
// from 0.
var actionMastersPage = NewAction("ms", 1)

// Roster is what /masters needs of the dispatch workflow.
type Roster interface {
	Roster(ctx context.Context, page int) ([]dispatch.RosterLine, int, error)
}

var _ Roster = (*dispatch.Service)(nil)

// Per master line of /masters; a page of dispatch.RosterPageSize lines at
// these budgets stays one message.
const rosterSkillsBudget = 60

func (u *dispatchUI) registerRoster() {
	u.b.Handle(Command{Name: "masters", Desc: "cmd.masters", Section: SectionAdminOrders, Role: RoleAdmin,
		Handle: replyRendered(func(r *Request) (string, *tele.ReplyMarkup, error) { return u.roster(r, 0) })})
	u.b.HandleButtonIn(actionMastersPage, InPrivate|InAdminChat, pageTurn(u.b, u.roster))
}

// roster is one page of /masters with ◀ ▶ buttons (pageTurn). A page past
// the end (masters left since it was shown) shows the last.
func (u *dispatchUI) roster(r *Request, page int) (string, *tele.ReplyMarkup, error) {
	p, err := pageOf(page, dispatch.RosterPageSize, func(page int) ([]dispatch.RosterLine, int, error) { return u.d.Roster(r.Ctx, page) })
	if err != nil {
		return "", nil, err
	}
	if p.total == 0 {
		return r.T("masters.empty"), nil, nil
	}
	var sb strings.Builder
	sb.WriteString(r.T("masters.header", locales.Data{"Page": p.page + 1, "Pages": p.pages, "Total": p.total,
		"Min": dispatch.MinRatings, "Days": int(dispatch.RatingWindow.Hours() / 24),
		"Unrated": locales.Decimal(r.Lang, dispatch.UnratedRank)}))
	for _, l := range p.items {
		sb.WriteString("\n\n" + u.rosterLine(r, l))
	}
	kb, err := pageTurns(r, actionMastersPage, p.page, p.pages, "masters.prev", "masters.next")
	if err != nil {
		return "", nil, err
	}
	return sb.String(), kb, nil
}

// rosterLine is one master of /masters.
func (u *dispatchUI) rosterLine(r *Request, l dispatch.RosterLine) string {
	m := l.Master
	var status []string
	if !m.BlockedAt.IsZero() {
		status = append(status, r.T("masters.blocked"))
	}
	if m.Active {
		if m.BlockedAt.IsZero() {
			status = append(status, r.T("masters.active"))
		}
	} else {
		status = append(status, r.T("masters.paused"))
	}
	skills := make([]string, 0, len(m.Skills))
	for _, s := range m.Skills {
		skills = append(skills, oneLine(s))
	}
	rating := r.T("masters.unrated", locales.Data{"Count": l.Record.Count})
	if l.Record.Counts() {
		rating = r.T("masters.rated", locales.Data{"Average": locales.Decimal(r.Lang, l.Record.Average), "Count": l.Record.Count})
	}
	return r.T("masters.line", locales.Data{
		"Master":   locales.HTML(masterRef(&m, m.UserID, listNameBudget)),
		"City":     locales.HTML(clip(oneLine(m.City), listPlaceBudget)),
		"District": locales.HTML(clip(oneLine(m.District), listPlaceBudget)),
		"Skills":   locales.HTML(clip(strings.Join(skills, ", "), rosterSkillsBudget)),
		"Status":   locales.HTML(strings.Join(status, ", ")),
		"Rating":   locales.HTML(rating),
	})
}
