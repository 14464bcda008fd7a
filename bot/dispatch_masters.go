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
	u.b.HandleButton(actionMastersPage, u.rosterPage)
}

// rosterPage turns /masters' page in place.
func (u *dispatchUI) rosterPage(r *Request, cb Callback) error {
	if !r.Admin {
		return r.Forbidden()
	}
	text, kb, err := u.roster(r, int(min(cb.IDs[0], 1<<30)))
	if err != nil {
		return err
	}
	if msg := r.Callback().Message; msg != nil { // nil: too old for Telegram to say which
		if err := u.b.editDirect(r.Ctx, msg.Chat.ID, msg.ID, text, kb); err != nil {
			u.b.deps.Log.Warn("dispatch: edit /masters page", "user", r.User.ID, "chat", msg.Chat.ID, "message", msg.ID, "err", err)
		}
	}
	return r.Ack()
}

// roster is one page of /masters with ◀ ▶ buttons. A page past the end
// (masters left since it was shown) shows the last.
func (u *dispatchUI) roster(r *Request, page int) (string, *tele.ReplyMarkup, error) {
	list, total, err := u.d.Roster(r.Ctx, page)
	if err != nil {
		return "", nil, err
	}
	pages := max((total+dispatch.RosterPageSize-1)/dispatch.RosterPageSize, 1)
	if len(list) == 0 && total > 0 && page >= pages {
		page = pages - 1
		if list, total, err = u.d.Roster(r.Ctx, page); err != nil {
			return "", nil, err
		}
	}
	if total == 0 {
		return r.T("masters.empty"), nil, nil
	}
	var sb strings.Builder
	sb.WriteString(r.T("masters.header", locales.Data{"Page": page + 1, "Pages": pages, "Total": total,
		"Min": dispatch.MinRatings, "Days": int(dispatch.RatingWindow.Hours() / 24),
		"Unrated": locales.Decimal(r.Lang, dispatch.UnratedRank)}))
	for _, l := range list {
		sb.WriteString("\n\n" + u.rosterLine(r, l))
	}
	var row []tele.InlineButton
	for _, b := range []struct {
		key  string
		page int
		show bool
	}{{"masters.prev", page - 1, page > 0}, {"masters.next", page + 1, page+1 < pages}} {
		if !b.show {
			continue
		}
		data, err := Encode(actionMastersPage, int64(b.page))
		if err != nil {
			return "", nil, err
		}
		row = append(row, tele.InlineButton{Text: r.T(b.key), Data: data})
	}
	if len(row) == 0 {
		return sb.String(), nil, nil
	}
	return sb.String(), &tele.ReplyMarkup{InlineKeyboard: [][]tele.InlineButton{row}}, nil
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
