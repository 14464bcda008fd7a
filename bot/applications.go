package bot

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	tele "gopkg.in/telebot.v3"

	"switchboard/domain"
	"switchboard/domain/vacancy"
	"switchboard/locales"
)

// The job seeker's pipeline in the bot (domain/vacancy/pipeline.go): the
// step buttons after Applied, the follow-up reminder, /applications.

// Step buttons carry the match, the status the message showed and the
// step, so a press on a message showing an older status is refused as
// stale instead of applied to a state its presser did not see. One action
// per kind of message, because each press edits its own message its own
// way.
var (
	actionCardStep     = NewAction("vs", 3) // on a vacancy card
	actionFollowUpStep = NewAction("vf", 3) // on a follow-up reminder
	actionListStep     = NewAction("vw", 3) // on /applications
)

// stepCodes number the pipeline's statuses in callback data; the numbers
// travel through Telegram, so they never change.
var stepCodes = map[vacancy.Status]int64{
	vacancy.Applied: 1, vacancy.NoAnswer: 2, vacancy.Invited: 3, vacancy.Offer: 4, vacancy.Rejected: 5,
}

func stepOfCode(code int64) (vacancy.Status, bool) {
	for s, c := range stepCodes {
		if c == code {
			return s, true
		}
	}
	return "", false
}

// stepButtonKeys label each step's button.
var stepButtonKeys = map[vacancy.Status]string{
	vacancy.Invited:  "application.button_invited",
	vacancy.Offer:    "application.button_offer",
	vacancy.Rejected: "application.button_rejected",
	vacancy.NoAnswer: "application.button_no_answer",
}

// decidedKeys end a card with its match's status once the user decided.
var decidedKeys = map[vacancy.Status]string{
	vacancy.Applied:       "vacancy.decided_applied",
	vacancy.NotInterested: "vacancy.decided_not_interested",
	vacancy.NoAnswer:      "vacancy.decided_no_answer",
	vacancy.Invited:       "vacancy.decided_invited",
	vacancy.Offer:         "vacancy.decided_offer",
	vacancy.Rejected:      "vacancy.decided_rejected",
	// Only a card shown again for a pasted link has it: nobody presses it.
	vacancy.NotSuitable: "vacancy.decided_not_suitable",
}

// followUpKeys head a reminder by what the application waits for.
var followUpKeys = map[vacancy.Status]string{
	vacancy.Applied: "application.follow_up_APPLIED",
	vacancy.Invited: "application.follow_up_INVITED",
}

// stepButtons are the buttons of the steps the person may report from the
// match's status, pressing action; numbered with n > 0 (/applications,
// where one message holds several applications).
func (rd *Renderer) stepButtons(lang string, action Action, m vacancy.Match, n int) ([]tele.InlineButton, error) {
	from, ok := stepCodes[m.Status]
	if !ok {
		return nil, nil
	}
	var row []tele.InlineButton
	for _, to := range vacancy.Steps(m.Status) {
		data, err := Encode(action, m.ID, from, stepCodes[to])
		if err != nil {
			return nil, err
		}
		text := rd.cat.T(lang, stepButtonKeys[to])
		if n > 0 {
			text = rd.cat.T(lang, "application.button_numbered", locales.Data{"N": n, "Button": text})
		}
		row = append(row, tele.InlineButton{Text: text, Data: data})
	}
	return row, nil
}

// withSteps puts the match's step buttons above kb's rows (kb may be nil).
func (rd *Renderer) withSteps(lang string, action Action, m vacancy.Match, kb *tele.ReplyMarkup) (*tele.ReplyMarkup, error) {
	row, err := rd.stepButtons(lang, action, m, 0)
	if err != nil || len(row) == 0 {
		return kb, err
	}
	out := &tele.ReplyMarkup{InlineKeyboard: [][]tele.InlineButton{row}}
	if kb != nil {
		out.InlineKeyboard = append(out.InlineKeyboard, kb.InlineKeyboard...)
	}
	return out, nil
}

// applicationMessage is an application alone, as a reminder shows it and
// as its edit after a press leaves it: the header (the reminder's
// question, or none), the vacancy, its status, its step buttons and link.
func (rd *Renderer) applicationMessage(lang, header string, a vacancy.Application) (string, *tele.ReplyMarkup, error) {
	var lines []string
	if header != "" {
		lines = append(lines, header, "")
	}
	title := clip(oneLine(a.Vacancy.Title), titleBudget)
	if title == "" {
		title = "—"
	}
	lines = append(lines, "<b>"+title+"</b>")
	if e := clip(oneLine(a.Vacancy.Employer), employerBudget); e != "" {
		lines = append(lines, e)
	}
	lines = append(lines, rd.cat.T(lang, "application.status", locales.Data{"Status": statusKeys.name(rd.cat, lang, a.Match.Status)}))
	kb := &tele.ReplyMarkup{}
	row, err := rd.stepButtons(lang, actionFollowUpStep, a.Match, 0)
	if err != nil {
		return "", nil, err
	}
	if len(row) > 0 {
		kb.InlineKeyboard = append(kb.InlineKeyboard, row)
	}
	if webURL(a.Vacancy.URL) {
		kb.InlineKeyboard = append(kb.InlineKeyboard, []tele.InlineButton{{Text: rd.cat.T(lang, "vacancy.button_open"), URL: a.Vacancy.URL}})
	}
	if len(kb.InlineKeyboard) == 0 {
		kb = nil
	}
	return strings.Join(lines, "\n"), kb, nil
}

// FollowUp asks how an application went (vacancy.Notifier), with the
// buttons of its next steps; written to the outbox in the transaction
// that records the reminder.
func (rd *Renderer) FollowUp(f vacancy.FollowUp) []domain.Message {
	key, ok := followUpKeys[f.Application.Match.Status]
	if !ok {
		rd.log.Error("follow-up of an application not waiting", "match", f.Application.Match.ID, "status", f.Application.Match.Status)
		return nil
	}
	text, kb, err := rd.applicationMessage(f.Lang, rd.cat.T(f.Lang, key, locales.Data{"Days": f.Days}), f.Application)
	if err != nil {
		rd.log.Error("render follow-up", "match", f.Application.Match.ID, "err", err)
		return nil
	}
	return toTopic(domain.TopicVacancies, Messages(f.Application.Match.UserID, domain.KindReply, f.Application.Match.ID, text, kb))
}

// step records a step pressed on a message of the given action and edits
// that message to show it. Every refusal is an alert and changes nothing.
func (u *vacancyUI) step(action Action) CallbackHandler {
	return func(r *Request, cb Callback) error {
		from, ok1 := stepOfCode(cb.IDs[1])
		to, ok2 := stepOfCode(cb.IDs[2])
		if !ok1 || !ok2 {
			return r.Alert("error.callback_invalid")
		}
		a, err := u.v.Report(r.Ctx, r.User.ID, cb.IDs[0], from, to)
		switch {
		case errors.Is(err, vacancy.ErrForbidden):
			return r.Forbidden()
		case errors.Is(err, vacancy.ErrStaleStep) && a.Match.Status.Reported():
			return r.Alert("application.stale", locales.Data{"Status": statusKeys.name(u.b.deps.Catalog, r.Lang, a.Match.Status)})
		case errors.Is(err, vacancy.ErrStaleStep), errors.Is(err, domain.ErrNotFound):
			return r.Alert("error.callback_invalid")
		case err != nil:
			return err
		}
		var text, rich string
		var kb *tele.ReplyMarkup
		switch action {
		case actionCardStep:
			text, kb, err = u.b.cardAt(r.Lang, a)
		case actionListStep:
			text, rich, kb, err = u.applicationsList(r)
		default:
			text, kb, err = u.b.applicationMessage(r.Lang, "", a)
		}
		if err != nil {
			return err
		}
		if rich != "" {
			u.b.editPressedRich(r, text, rich, kb)
		} else {
			u.b.editPressed(r, text, kb)
		}
		if action != actionCardStep {
			u.editCard(r, a)
		}
		// The status names are headings ("Invited"); after "Marked:" they
		// continue the sentence.
		return r.Toast(r.T("application.marked", locales.Data{
			"Status": lowerFirst(statusKeys.name(u.b.deps.Catalog, r.Lang, a.Match.Status)),
		}))
	}
}

// cardAt is an application's card showing where it is, with its next
// steps.
func (rd *Renderer) cardAt(lang string, a vacancy.Application) (string, *tele.ReplyMarkup, error) {
	text := rd.renderVacancy(lang, a.Vacancy, a.Match.Verdict, a.Match.Status)
	kb, err := rd.vacancyMarkup(lang, a.Match.ID, a.Vacancy, true)
	if err != nil {
		return "", nil, err
	}
	kb, err = rd.withSteps(lang, actionCardStep, a.Match, kb)
	return text, kb, err
}

// editCard shows a step recorded from a reminder or /applications on the
// application's card too, so the card scrolled back to never tells an
// older story or offers a step that is no longer the next. Like
// editPressed it is best effort: the step is stored, and a card Telegram
// no longer has is left as it is.
func (u *vacancyUI) editCard(r *Request, a vacancy.Application) {
	if a.Match.MessageID == 0 || a.Match.ChatID == 0 {
		return
	}
	text, kb, err := u.b.cardAt(r.Lang, a)
	if err == nil {
		err = u.b.editDirect(r.Ctx, a.Match.ChatID, a.Match.MessageID, text, kb)
	}
	if err != nil {
		u.b.deps.Log.Warn("card not updated after a step", "match", a.Match.ID, "err", err)
	}
}

// applicationsList renders /applications: the funnel of the last 30 days,
// overall and per search, then the applications waiting longest without
// news, numbered, with their step buttons numbered alike. It is one message,
// which a step pressed on it re-renders with the new counts; its rich form
// has the funnel as a table and the searches' funnels as a table in a
// collapsible section.
func (u *vacancyUI) applicationsList(r *Request) (text, rich string, kb *tele.ReplyMarkup, err error) {
	rep, err := u.v.Applications(r.Ctx, r.User.ID)
	if err != nil {
		return "", "", nil, err
	}
	return u.b.renderApplications(r.Lang, rep)
}

// replyApplications answers /applications.
func (u *vacancyUI) replyApplications(r *Request) error {
	text, rich, kb, err := u.applicationsList(r)
	if err != nil {
		return err
	}
	return r.ReplyRich(text, rich, kb)
}

// funnelRow is a funnel's figures as table cells, in funnelColumns' order.
func funnelRow(f vacancy.Funnel) []string {
	return []string{strconv.Itoa(f.Applied), strconv.Itoa(f.Answered), strconv.Itoa(f.Invited), strconv.Itoa(f.Offer)}
}

// funnelColumns head a funnel's table.
var funnelColumns = []string{"applications.col_applied", "applications.col_answered", "applications.col_invited", "applications.col_offers"}

func (rd *Renderer) funnelHeader(lang string, first ...string) []string {
	out := slices.Clone(first)
	for _, k := range funnelColumns {
		out = append(out, rd.cat.T(lang, k))
	}
	return out
}

// Budgets of /applications, which must stay one message for its buttons:
// the searches with most applications (the rest counted in one line) and
// MaxWaiting applications, each part clipped.
const (
	appSearches       = 6
	appSearchBudget   = 100
	appTitleBudget    = 120
	appEmployerBudget = 60
	appURLBudget      = 200
)

func funnelData(f vacancy.Funnel) locales.Data {
	return locales.Data{"Applied": f.Applied, "Answered": f.Answered, "Invited": f.Invited, "Offer": f.Offer}
}

func (rd *Renderer) renderApplications(lang string, rep vacancy.ApplicationsReport) (string, string, *tele.ReplyMarkup, error) {
	cat := rd.cat
	var lines []string
	var rich richDoc
	if rep.Overall.Applied == 0 {
		lines = append(lines, cat.T(lang, "applications.none"))
		rich.para(lines[0])
	} else {
		lines = append(lines, cat.T(lang, "applications.header"), cat.T(lang, "applications.funnel", funnelData(rep.Overall)))
		rich.para(lines[0])
		rich.table(rd.funnelHeader(lang), [][]string{funnelRow(rep.Overall)})
		if len(rep.PerSearch) > 0 {
			lines = append(lines, "", cat.T(lang, "applications.by_search"))
			per := slices.Clone(rep.PerSearch)
			slices.SortStableFunc(per, func(a, b vacancy.SearchFunnel) int { return b.Funnel.Applied - a.Funnel.Applied })
			var rows [][]string
			for _, sf := range per[:min(len(per), appSearches)] {
				d := funnelData(sf.Funnel)
				search := clip(sf.Search.Params.String(), appSearchBudget)
				d["Search"] = locales.HTML(search)
				lines = append(lines, cat.T(lang, "applications.search_line", d))
				rows = append(rows, append([]string{"<code>" + search + "</code>"}, funnelRow(sf.Funnel)...))
			}
			more := ""
			if len(per) > appSearches {
				more = cat.T(lang, "applications.more_searches", locales.Data{"Count": len(per) - appSearches})
				lines = append(lines, more)
			}
			rich.details(cat.T(lang, "applications.by_search"), false, func(d *richDoc) {
				d.table(rd.funnelHeader(lang, cat.T(lang, "applications.col_search")), rows)
				d.para(more)
			})
		}
	}
	if rep.WaitingTotal == 0 {
		return strings.Join(lines, "\n"), rich.String(), nil, nil
	}
	waitingFrom := len(lines) + 1
	key := "applications.waiting"
	if rep.WaitingTotal > len(rep.Waiting) {
		key = "applications.waiting_oldest"
	}
	lines = append(lines, "", cat.T(lang, key, locales.Data{"Total": rep.WaitingTotal}))
	kb := &tele.ReplyMarkup{}
	for i, a := range rep.Waiting {
		title := clip(oneLine(a.Vacancy.Title), appTitleBudget)
		if title == "" {
			title = "—"
		}
		if webURL(a.Vacancy.URL) && len(a.Vacancy.URL) <= appURLBudget {
			title = `<a href="` + Escape(a.Vacancy.URL) + `">` + title + "</a>"
		}
		employer := ""
		if e := clip(oneLine(a.Vacancy.Employer), appEmployerBudget); e != "" {
			employer = " — " + e
		}
		lines = append(lines, cat.T(lang, "applications.waiting_line", locales.Data{
			"N": i + 1, "Title": locales.HTML(title), "Employer": locales.HTML(employer),
			"Status": statusKeys.name(cat, lang, a.Match.Status),
			"Days":   max(0, int(rep.Now.Sub(a.ReportedAt).Hours()/24)),
		}))
		row, err := rd.stepButtons(lang, actionListStep, a.Match, i+1)
		if err != nil {
			return "", "", nil, err
		}
		kb.InlineKeyboard = append(kb.InlineKeyboard, row)
	}
	lines = append(lines, "", cat.T(lang, "applications.waiting_hint"))
	// The waiting applications read the same in both forms: a paragraph
	// each.
	rich.para(strings.Join(lines[waitingFrom:], "\n\n"))
	text := strings.Join(lines, "\n")
	if utf16Len(text) > MaxMessageLen {
		// Unreachable with the budgets above unless a translation grows
		// absurdly; the buttons need the text to stay one message.
		text = Split(text, MaxMessageLen)[0]
	}
	return text, rich.String(), kb, nil
}

// lowerFirst lower-cases the first letter of s.
func lowerFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError {
		return s
	}
	return string(unicode.ToLower(r)) + s[n:]
}
