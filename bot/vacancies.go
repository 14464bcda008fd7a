package bot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"html"
	"net/url"
	"strings"
	"time"
	"unicode"

	tele "gopkg.in/telebot.v3"

	"switchboard/bot/markdown"
	"switchboard/domain"
	"switchboard/domain/vacancy"
	"switchboard/locales"
)

// Vacancies is what the bot needs from the vacancy workflow
// (*vacancy.Service implements it).
type Vacancies interface {
	Profile(ctx context.Context, userID int64) (string, error)
	SetProfile(ctx context.Context, userID int64, profile string) error
	AddSearch(ctx context.Context, userID int64, p vacancy.Params) (vacancy.Search, vacancy.Added, error)
	Begin(ctx context.Context, sr vacancy.Search, added vacancy.Added)
	Searches(ctx context.Context, userID int64) ([]vacancy.Search, error)
	DeleteSearch(ctx context.Context, userID, id int64) (bool, error)
	Ban(ctx context.Context, userID int64, raw string) (string, bool, error)
	Unban(ctx context.Context, userID int64, raw string) (string, bool, error)
	Bans(ctx context.Context, userID int64) ([]string, error)
	HideEmployer(ctx context.Context, userID, matchID int64) (vacancy.Match, vacancy.Vacancy, bool, error)
	ShowEmployer(ctx context.Context, userID, id int64) (string, bool, error)
	HiddenEmployers(ctx context.Context, userID int64) ([]vacancy.HiddenEmployer, error)
	Stats(ctx context.Context, userID int64) (vacancy.Stats, error)
	Skills(ctx context.Context, userID int64) (vacancy.SkillsReport, error)
	Decide(ctx context.Context, userID, matchID int64, to vacancy.Status) (vacancy.Match, vacancy.Vacancy, error)
	Undo(ctx context.Context, userID, matchID int64) (vacancy.Match, vacancy.Vacancy, error)
	Report(ctx context.Context, userID, matchID int64, from, to vacancy.Status) (vacancy.Application, error)
	Applications(ctx context.Context, userID int64) (vacancy.ApplicationsReport, error)
	Paste(ctx context.Context, userID, vacancyID int64, messageID int) (vacancy.Pasted, error)
}

var (
	_ Vacancies        = (*vacancy.Service)(nil)
	_ vacancy.Notifier = (*Renderer)(nil)
)

// MaxSearches bounds one user's saved searches: each is a discovery run
// against HH on every fetch, and the list must fit one editable message.
const MaxSearches = 20

// Button actions of the vacancy workflow and the ids each carries.
var (
	actionApplied        = NewAction("va", 1) // match id
	actionNotInterested  = NewAction("vn", 1) // match id
	actionDeleteSearch   = NewAction("sd", 1) // search id
	actionHideEmployer   = NewAction("vh", 1) // match id: its vacancy's employer
	actionShowEmployer   = NewAction("ve", 1) // hidden_employers id; the buttons of /bans before its pages
	actionShowEmployerOn = NewAction("vk", 2) // hidden_employers id, page of /bans: *Show … again* on a page
	actionBansPage       = NewAction("vb", 1) // page of /bans
	actionUndo           = NewAction("vu", 1) // match id: its Not interested taken back
)

// Budgets, in UTF-16 units of escaped HTML, for the parts of a vacancy
// message. Together with the fixed texts they stay well under
// MaxMessageLen, so a vacancy is always one message whose buttons can be
// edited, whatever HH or the LLM sent.
const (
	titleBudget    = 300
	employerBudget = 150
	// buttonEmployerBudget keeps an employer's name in a button readable.
	buttonEmployerBudget = 40
	areaBudget           = 100
	salaryBudget         = 100
	reasonBudget         = 500
	maxReasons           = 3
	skillsBudget         = 600
	// descriptionBudget is HH's description in the card's expandable
	// quotation, shown collapsed to a few lines.
	descriptionBudget = 1000
	// searchBudget keeps MaxSearches lines of /searches within one message.
	searchBudget = 160
	// argBudget bounds the echo of a refused argument.
	argBudget = 80
	// refusedBudget bounds the parameters HH refused on a line of
	// /searches.
	refusedBudget = 40
)

type vacancyUI struct {
	b *Bot
	v Vacancies
}

// RegisterVacancies adds the vacancy workflow's commands and buttons; call
// it before Run.
func (b *Bot) RegisterVacancies(v Vacancies) {
	u := &vacancyUI{b: b, v: v}
	b.Handle(Command{Name: "profile", Desc: "cmd.profile", Section: SectionJobs, Handle: u.profile})
	b.Handle(Command{Name: "search", Desc: "cmd.search", Section: SectionJobs, Handle: u.search})
	b.Handle(Command{Name: "searches", Desc: "cmd.searches", Section: SectionJobs, Handle: replyRendered(u.searchList)})
	b.Handle(Command{Name: "ban", Desc: "cmd.ban", Section: SectionJobs, Handle: u.ban})
	b.Handle(Command{Name: "unban", Desc: "cmd.unban", Section: SectionJobs, Handle: u.unban})
	b.Handle(Command{Name: "bans", Desc: "cmd.bans", Section: SectionJobs, Handle: replyRendered(func(r *Request) (string, *tele.ReplyMarkup, error) {
		return u.banList(r, 0)
	})})
	b.Handle(Command{Name: "vacancies", Desc: "cmd.vacancies", Section: SectionJobs, Handle: u.stats})
	b.Handle(Command{Name: "skills", Desc: "cmd.skills", Section: SectionJobs, Handle: u.skills})
	b.Handle(Command{Name: "applications", Desc: "cmd.applications", Section: SectionJobs, Handle: u.replyApplications})
	b.vacancyLink = u.link
	b.searchLink = u.searchLink
	b.HandleButton(actionApplied, u.decide(vacancy.Applied))
	b.HandleButton(actionNotInterested, u.decide(vacancy.NotInterested))
	b.HandleButton(actionDeleteSearch, u.deleteSearch)
	b.HandleButton(actionHideEmployer, u.hideEmployer)
	b.HandleButton(actionShowEmployer, u.showEmployer)
	b.HandleButton(actionShowEmployerOn, u.showEmployer)
	b.HandleButton(actionBansPage, u.banPage)
	b.HandleButton(actionUndo, u.undo)
	for _, a := range []Action{actionCardStep, actionFollowUpStep, actionListStep} {
		b.HandleButton(a, u.step(a))
	}
}

// commandArgs is the text after the command word with its line breaks:
// telebot's Payload stops at the end of the first line, and a profile is
// usually several.
func commandArgs(m *tele.Message) string {
	if m == nil {
		return ""
	}
	i := strings.IndexFunc(m.Text, unicode.IsSpace)
	if i < 0 {
		return ""
	}
	return strings.TrimSpace(m.Text[i:])
}

func (u *vacancyUI) profile(r *Request) error {
	text := commandArgs(r.Message())
	if text == "" {
		p, err := u.v.Profile(r.Ctx, r.User.ID)
		if err != nil {
			return err
		}
		if p == "" {
			return r.Reply(r.T("profile.empty"), nil)
		}
		return r.Reply(r.T("profile.current", locales.Data{"Profile": p}), nil)
	}
	err := u.v.SetProfile(r.Ctx, r.User.ID, text)
	if ie := (*domain.InputError)(nil); errors.As(err, &ie) {
		return r.Reply(r.InputText(ie, ""), nil)
	}
	if err != nil {
		return err
	}
	return r.Reply(r.T("profile.saved"), nil)
}

// experienceWords and scheduleWords are the locale's words for HH's ids,
// in the order the usage lists them; vacancy.HumanID reads them back.
var (
	experienceWords = []struct{ ID, Key string }{
		{vacancy.NoExperience, "search.experience_none"},
		{vacancy.Between1And3, "search.experience_1_3"},
		{vacancy.Between3And6, "search.experience_3_6"},
		{vacancy.MoreThan6, "search.experience_6"},
	}
	scheduleWords = []struct{ ID, Key string }{
		{"remote", "search.schedule_remote"},
		{"fullDay", "search.schedule_full_day"},
		{"shift", "search.schedule_shift"},
		{"flexible", "search.schedule_flexible"},
		{"flyInFlyOut", "search.schedule_rotation"},
	}
)

func wordList(r *Request, words []struct{ ID, Key string }) string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = r.T(w.Key)
	}
	return strings.Join(out, ", ")
}

func (u *vacancyUI) searchData(r *Request) locales.Data {
	return locales.Data{
		"Experience": locales.HTML(wordList(r, experienceWords)),
		"Schedule":   locales.HTML(wordList(r, scheduleWords)),
		"MaxSalary":  locales.Number(r.Lang, vacancy.MaxSalary),
	}
}

func (u *vacancyUI) searchUsage(r *Request) string {
	return r.T("search.usage", u.searchData(r))
}

// nextDigest is when the user's next digest is due (zero in instant mode,
// without rhythms, or when the rhythm cannot be read: the instant promise
// is then the likelier truth).
func (u *vacancyUI) nextDigest(r *Request) time.Time {
	rs := u.b.deps.Rhythm
	if rs == nil {
		return time.Time{}
	}
	rh, err := rs.Rhythm(r.Ctx, r.User.ID)
	if err != nil {
		u.b.deps.Log.Warn("read rhythm for a saved search", "user", r.User.ID, "err", err)
		return time.Time{}
	}
	return rs.NextDigest(r.User, rh)
}

// maxDropped bounds the parameter names a reply lists as left out.
const maxDropped = 8

func (u *vacancyUI) search(r *Request) error {
	return u.addSearch(r, commandArgs(r.Message()))
}

// searchLink takes a search's link pasted alone into the Vacancies topic
// as /search with it; any other text is not its.
func (u *vacancyUI) searchLink(r *Request) (bool, error) {
	fields := strings.Fields(r.Message().Text)
	if len(fields) != 1 || !vacancy.LooksLikeURL(fields[0]) {
		return false, nil
	}
	return true, u.addSearch(r, fields[0])
}

// addSearch saves the search args name: HH's parameters or a search's
// link.
func (u *vacancyUI) addSearch(r *Request, args string) error {
	if args == "" {
		return r.Reply(u.searchUsage(r), nil)
	}
	var p vacancy.Params
	var dropped []string
	var err error
	if fields := strings.Fields(args); vacancy.LooksLikeURL(fields[0]) {
		if len(fields) > 1 {
			return r.Reply(r.T("search.error_url_alone"), nil)
		}
		p, dropped, err = vacancy.ParseSearchURL(fields[0])
	} else {
		p, err = vacancy.ParseParams(args)
	}
	if ie := (*domain.InputError)(nil); errors.As(err, &ie) {
		more := u.searchData(r)
		if ie.Key == "search.error_salary" {
			more["Max"] = locales.Number(r.Lang, vacancy.MaxSalary)
		}
		return r.Reply(r.InputText(ie, ie.Arg(), more), nil)
	}
	if err != nil {
		return err
	}
	have, err := u.v.Searches(r.Ctx, r.User.ID)
	if err != nil {
		return err
	}
	// Counted before adding rather than enforced by the database: two
	// simultaneous /search from one user can overshoot by one, which
	// costs nothing.
	if len(have) >= MaxSearches && !hasSearch(have, p.Key()) {
		return r.Reply(r.T("search.error_limit", locales.Data{"Max": MaxSearches}), nil)
	}
	sr, added, err := u.v.AddSearch(r.Ctx, r.User.ID, p)
	if err != nil {
		return err
	}
	shown := locales.HTML(clip(sr.Params.String(), searchBudget))
	var text string
	switch {
	case added.NothingNew:
		text = r.T("search.saved_nothing_new", locales.Data{"Search": shown})
	case added.Created:
		text = r.T("search.saved", locales.Data{"Search": shown})
		// In digest mode the first vacancies wait for the next digest
		// (settleFirstNews counts that as told): promise that, not a
		// word within a minute.
		if next := u.nextDigest(r); !next.IsZero() {
			text = r.T("search.saved_digest", locales.Data{"Search": shown, "When": r.Time(next)})
		}
	default:
		text = r.T("search.exists", locales.Data{"Search": shown})
	}
	if len(dropped) > 0 {
		names := make([]string, 0, min(len(dropped), maxDropped)+1)
		for _, n := range dropped[:min(len(dropped), maxDropped)] {
			names = append(names, clip(n, 30))
		}
		if len(dropped) > maxDropped {
			names = append(names, "…")
		}
		text += "\n\n" + r.T("search.dropped", locales.Data{"Names": locales.HTML(strings.Join(names, ", "))})
	}
	profile, err := u.v.Profile(r.Ctx, r.User.ID)
	if err != nil {
		return err
	}
	if profile == "" {
		text += "\n\n" + r.T("search.profile_hint")
	}
	if err := r.Reply(text, nil); err != nil {
		return err
	}
	// Only now: the search's cards and notes come after this reply.
	u.v.Begin(r.Ctx, sr, added)
	return nil
}

func hasSearch(list []vacancy.Search, key string) bool {
	for _, s := range list {
		if s.Key == key {
			return true
		}
	}
	return false
}

// searchList renders the user's searches as /searches shows them; it must
// stay one message because a delete button edits it in place.
func (u *vacancyUI) searchList(r *Request) (string, *tele.ReplyMarkup, error) {
	list, err := u.v.Searches(r.Ctx, r.User.ID)
	if err != nil {
		return "", nil, err
	}
	if len(list) == 0 {
		return r.T("searches.empty"), nil, nil
	}
	var sb strings.Builder
	sb.WriteString(r.T("searches.header"))
	kb := &tele.ReplyMarkup{}
	var row []tele.InlineButton
	for i, s := range list {
		line := locales.Data{"N": i + 1, "Search": locales.HTML(clip(s.Params.String(), searchBudget))}
		if s.State == vacancy.SearchRefused {
			// Set aside: it must not read as watched. The names HH gave
			// take what the search's text gives up, so the longest list
			// stays one message.
			line["Search"] = locales.HTML(clip(s.Params.String(), searchBudget-refusedBudget))
			line["Args"] = locales.HTML(clip(cmp.Or(strings.Join(s.Refused, ", "), "—"), refusedBudget))
			sb.WriteString("\n" + r.T("searches.line_refused", line))
		} else {
			sb.WriteString("\n" + r.T("searches.line", line))
		}
		data, err := Encode(actionDeleteSearch, s.ID)
		if err != nil {
			return "", nil, err
		}
		row = append(row, tele.InlineButton{Text: fmt.Sprintf("✖ %d", i+1), Data: data})
		if len(row) == 5 {
			kb.InlineKeyboard = append(kb.InlineKeyboard, row)
			row = nil
		}
	}
	if len(row) > 0 {
		kb.InlineKeyboard = append(kb.InlineKeyboard, row)
	}
	sb.WriteString("\n\n" + r.T("searches.footer"))
	return sb.String(), kb, nil
}

// deleteSearch needs no ownership check of its own: DeleteSearch is scoped
// to the presser, so another user's id deletes nothing and reads as gone.
func (u *vacancyUI) deleteSearch(r *Request, cb Callback) error {
	ok, err := u.v.DeleteSearch(r.Ctx, r.User.ID, cb.IDs[0])
	if err != nil {
		return err
	}
	if !ok {
		return r.Alert("searches.gone")
	}
	text, kb, err := u.searchList(r)
	if err != nil {
		return err
	}
	u.b.editPressed(r, text, kb)
	return r.Toast(r.T("searches.deleted"))
}

func (u *vacancyUI) ban(r *Request) error {
	return u.changeBans(r, u.v.Ban, "ban.usage", "ban.added", "ban.exists")
}

func (u *vacancyUI) unban(r *Request) error {
	return u.changeBans(r, u.v.Unban, "unban.usage", "unban.removed", "unban.missing")
}

// changeBans is /ban or /unban: change adds the argument to the user's ban
// words or takes it out, and the reply names the word, saying changedKey
// when the list changed and sameKey when it already was so.
func (u *vacancyUI) changeBans(r *Request, change func(ctx context.Context, userID int64, raw string) (string, bool, error),
	usageKey, changedKey, sameKey string) error {
	raw := commandArgs(r.Message())
	if raw == "" {
		return r.Reply(r.T(usageKey), nil)
	}
	word, changed, err := change(r.Ctx, r.User.ID, raw)
	if ie := (*domain.InputError)(nil); errors.As(err, &ie) {
		return r.Reply(r.InputText(ie, ""), nil)
	}
	if err != nil {
		return err
	}
	key := sameKey
	if changed {
		key = changedKey
	}
	return r.Reply(r.T(key, locales.Data{"Word": word}), nil)
}

// banPageButtons bounds the hidden employers on a page of /bans, each a
// button row: ten keep the buttons under a thumb, and MaxHiddenEmployers
// is five pages of them.
const banPageButtons = 10

// banLine is a line of /bans: a ban word, or a hidden employer with its
// button.
type banLine struct {
	text     string // "\n• …", escaped
	employer *vacancy.HiddenEmployer
}

// banList is page page of /bans: the ban words, then the hidden employers,
// each employer with a button that shows it again, and ◀ ▶ when the list
// takes more than one message. The button edits the message in place, so
// a page must be one message: the list is packed into pages by length
// (packPages), a page past the end (the list shrank) shows the last, and
// a list that fits one message is one page with no page line. The words
// are shown whole (MaxBanWordLen keeps each far under a page) since
// /unban needs them as written; employers are clipped to employerBudget.
func (u *vacancyUI) banList(r *Request, page int) (string, *tele.ReplyMarkup, error) {
	words, err := u.v.Bans(r.Ctx, r.User.ID)
	if err != nil {
		return "", nil, err
	}
	hidden, err := u.v.HiddenEmployers(r.Ctx, r.User.ID)
	if err != nil {
		return "", nil, err
	}
	lines := make([]banLine, 0, len(words)+len(hidden))
	for _, w := range words {
		lines = append(lines, banLine{text: "\n• " + Escape(w)})
	}
	for i := range hidden {
		lines = append(lines, banLine{text: "\n• " + clip(hidden[i].Name, employerBudget), employer: &hidden[i]})
	}
	wordsHeader := r.T("bans.header", locales.Data{"Count": len(words)})
	if len(words) == 0 {
		wordsHeader = r.T("bans.empty")
	}
	employersHeader := r.T("bans.employers_header", locales.Data{"Count": len(hidden)})
	// Room for what a page may hold besides its lines, with the page line
	// at the most digits its numbers can have.
	most := len(lines) + 1
	fixed := utf16Len(r.T("bans.page", locales.Data{"Page": most, "Pages": most})) +
		utf16Len(wordsHeader) + utf16Len(employersHeader) + utf16Len("\n\n\n\n")
	packed := make([]pageLine, len(lines))
	for i, l := range lines {
		packed[i] = pageLine{units: utf16Len(l.text), button: l.employer != nil}
	}
	starts := packPages(packed, MaxMessageLen-fixed, banPageButtons)
	pages := len(starts) - 1
	page = min(max(page, 0), pages-1)

	var parts []string
	if pages > 1 {
		parts = append(parts, r.T("bans.page", locales.Data{"Page": page + 1, "Pages": pages}))
	}
	var wordsPart, employersPart strings.Builder
	if page == 0 && len(words) == 0 {
		wordsPart.WriteString(wordsHeader)
	}
	kb := &tele.ReplyMarkup{}
	for _, l := range lines[starts[page]:starts[page+1]] {
		if l.employer == nil {
			if wordsPart.Len() == 0 {
				wordsPart.WriteString(wordsHeader)
			}
			wordsPart.WriteString(l.text)
			continue
		}
		if employersPart.Len() == 0 {
			employersPart.WriteString(employersHeader)
		}
		employersPart.WriteString(l.text)
		data, err := Encode(actionShowEmployerOn, l.employer.ID, int64(page))
		if err != nil {
			return "", nil, err
		}
		label := r.T("bans.button_show", locales.Data{"Employer": plainName(l.employer.Name)})
		kb.InlineKeyboard = append(kb.InlineKeyboard, []tele.InlineButton{{Text: label, Data: data}})
	}
	for _, p := range []*strings.Builder{&wordsPart, &employersPart} {
		if p.Len() > 0 {
			parts = append(parts, p.String())
		}
	}
	nav, err := pageTurns(r, actionBansPage, page, pages, "bans.prev", "bans.next")
	if err != nil {
		return "", nil, err
	}
	if nav != nil {
		kb.InlineKeyboard = append(kb.InlineKeyboard, nav.InlineKeyboard...)
	}
	if len(kb.InlineKeyboard) == 0 {
		kb = nil
	}
	return strings.Join(parts, "\n\n"), kb, nil
}

// banPage is /bans' ◀ ▶: the page the button names, in place.
func (u *vacancyUI) banPage(r *Request, cb Callback) error {
	text, kb, err := u.banList(r, pageIn(cb, 0))
	if err != nil {
		return err
	}
	u.b.editPressed(r, text, kb)
	return r.Ack()
}

// plainName is an employer's name for a button or a pop-up, which Telegram
// shows as plain text: cut to buttonEmployerBudget and not escaped (the
// catalogue escapes a string for HTML; this goes in as written). A pop-up's
// text must stay within Telegram's 200 characters.
func plainName(s string) locales.HTML {
	return locales.HTML(html.UnescapeString(clip(oneLine(s), buttonEmployerBudget)))
}

// hideEmployer is a card's *Hide this employer*: its employer's vacancies
// reach the user no more, and the card, if still awaiting an answer, is
// marked Not interested.
func (u *vacancyUI) hideEmployer(r *Request, cb Callback) error {
	m, v, hidden, err := u.v.HideEmployer(r.Ctx, r.User.ID, cb.IDs[0])
	if answer, refused := refusedPress(r, err); refused {
		return answer
	}
	var ie *domain.InputError
	switch {
	case errors.Is(err, vacancy.ErrNoEmployer):
		return r.Alert("vacancy.no_employer")
	case errors.As(err, &ie):
		return r.AlertText(r.InputText(ie, ""))
	case err != nil:
		return err
	}
	if m.Status.Reported() || m.Status == vacancy.NotInterested {
		if err := u.showDecided(r, m, v); err != nil {
			return err
		}
	}
	toast := "vacancy.employer_hidden"
	if !hidden {
		toast = "vacancy.employer_hidden_already"
	}
	return r.Alert(toast, locales.Data{"Employer": plainName(v.Employer)})
}

// showEmployer is /bans' *Show … again*: the hiding undone, the page it
// was pressed on edited to what is left. A button of a list shown before
// /bans had pages (actionShowEmployer) names no page: the first.
func (u *vacancyUI) showEmployer(r *Request, cb Callback) error {
	name, ok, err := u.v.ShowEmployer(r.Ctx, r.User.ID, cb.IDs[0])
	if err != nil {
		return err
	}
	page := 0
	if len(cb.IDs) > 1 {
		page = pageIn(cb, 1)
	}
	text, kb, err := u.banList(r, page)
	if err != nil {
		return err
	}
	u.b.editPressed(r, text, kb)
	if !ok {
		return r.Alert("bans.employer_gone")
	}
	return r.Toast(r.T("bans.employer_shown", locales.Data{"Employer": plainName(name)}))
}

// statusKeys names every status; the keys are spelled out so the catalogue
// test sees them used.
var statusKeys = stateKeys[vacancy.Status]{
	vacancy.New:           "vacancy.status.NEW",
	vacancy.Queued:        "vacancy.status.QUEUED",
	vacancy.Analyzed:      "vacancy.status.ANALYZED",
	vacancy.SentToUser:    "vacancy.status.SENT_TO_USER",
	vacancy.Skipped:       "vacancy.status.SKIPPED",
	vacancy.NotSuitable:   "vacancy.status.NOT_SUITABLE",
	vacancy.InArchive:     "vacancy.status.IN_ARCHIVE",
	vacancy.Applied:       "vacancy.status.APPLIED",
	vacancy.NotInterested: "vacancy.status.NOT_INTERESTED",
	vacancy.NoAnswer:      "vacancy.status.NO_ANSWER",
	vacancy.Invited:       "vacancy.status.INVITED",
	vacancy.Offer:         "vacancy.status.OFFER",
	vacancy.Rejected:      "vacancy.status.REJECTED",
}

func (u *vacancyUI) stats(r *Request) error {
	st, err := u.v.Stats(r.Ctx, r.User.ID)
	if err != nil {
		return err
	}
	var sb strings.Builder
	sb.WriteString(r.T("vacancies.header"))
	counted := false
	line := func(name string, n int) {
		if n > 0 {
			counted = true
			sb.WriteString("\n" + r.T("vacancies.count", locales.Data{"Status": name, "Count": n}))
		}
	}
	for _, s := range vacancy.Statuses {
		line(statusKeys.name(u.b.deps.Catalog, r.Lang, s), st.Counts[s])
		if s == vacancy.Analyzed {
			line(r.T("vacancies.for_digest"), st.ForDigest)
			line(r.T("vacancies.in_digest"), st.InDigest)
		}
	}
	if !counted {
		sb.WriteString("\n" + r.T("vacancies.none"))
	}
	last := locales.HTML(r.T("vacancies.never"))
	if !st.LastFetch.IsZero() {
		last = r.Time(st.LastFetch)
	}
	sb.WriteString("\n\n" + r.T("vacancies.last_fetch", locales.Data{"Time": last}))
	// The user's own waiting vacancies are among the counts above; the
	// queue of everyone's is not theirs to worry about.
	switch {
	case st.LLMRefused:
		sb.WriteString("\n" + r.T("vacancies.llm_refused", locales.Data{"Reason": st.LLMReason}))
	case st.LLMDown:
		sb.WriteString("\n" + r.T("vacancies.llm_down"))
	default:
		sb.WriteString("\n" + r.T("vacancies.llm_ok"))
	}
	if st.HHBlocked {
		sb.WriteString("\n" + r.T("vacancies.hh_refused", locales.Data{"Reason": st.HHReason}))
	} else {
		sb.WriteString("\n" + r.T("vacancies.hh_ok"))
	}
	return r.Reply(sb.String(), nil)
}

// decide records Applied or Not interested. Every refusal is an alert and
// leaves the message as it is.
func (u *vacancyUI) decide(to vacancy.Status) CallbackHandler {
	return func(r *Request, cb Callback) error {
		m, v, err := u.v.Decide(r.Ctx, r.User.ID, cb.IDs[0], to)
		if answer, refused := refusedPress(r, err); refused {
			return answer
		}
		switch {
		case errors.Is(err, vacancy.ErrAlreadyDecided):
			if m.Status.Reported() {
				return r.Alert("vacancy.already_decided", locales.Data{
					"Status": statusKeys.name(u.b.deps.Catalog, r.Lang, m.Status),
				})
			}
			// Not yet marked sent (the press beat the outbox's bookkeeping),
			// or a concurrent press decided it a moment ago.
			return r.Alert("vacancy.not_awaiting")
		case err != nil:
			return err
		}
		toast := "vacancy.marked_applied"
		if to == vacancy.NotInterested {
			toast = "vacancy.marked_not_interested"
		}
		return u.pressed(r, m, v, toast)
	}
}

// undo takes back Not interested: the card is shown awaiting a decision
// again. A press on a card decided otherwise since is an alert.
func (u *vacancyUI) undo(r *Request, cb Callback) error {
	m, v, err := u.v.Undo(r.Ctx, r.User.ID, cb.IDs[0])
	if answer, refused := refusedPress(r, err); refused {
		return answer
	}
	switch {
	case errors.Is(err, vacancy.ErrNotUndoable):
		return r.Alert("vacancy.undo_stale")
	case err != nil:
		return err
	}
	return u.pressed(r, m, v, "vacancy.undone")
}

// refusedPress answers the refusals every button of a card shares: another
// user's press, and a match that is gone (pruned, or forged data).
// refused is false for any other error, which the caller answers, and for
// none.
func refusedPress(r *Request, err error) (answer error, refused bool) {
	switch {
	case errors.Is(err, vacancy.ErrForbidden):
		return r.Forbidden(), true
	case errors.Is(err, domain.ErrNotFound):
		return r.Alert("error.callback_invalid"), true
	}
	return nil, false
}

// pressed shows the card as its press left it and says so in a toast.
func (u *vacancyUI) pressed(r *Request, m vacancy.Match, v vacancy.Vacancy, toast string) error {
	if err := u.showDecided(r, m, v); err != nil {
		return err
	}
	return r.Toast(r.T(toast))
}

// showDecided edits the pressed card to its match as it is now: the
// decision, Undo under Not interested, the links, and an application's
// steps above them; a match back to awaiting has the card's buttons again.
func (u *vacancyUI) showDecided(r *Request, m vacancy.Match, v vacancy.Vacancy) error {
	text := u.b.renderVacancy(r.Lang, v, m.Verdict, m.Status)
	kb, err := u.b.decidedMarkup(r.Lang, m, v)
	if err != nil {
		return err
	}
	u.b.editPressed(r, text, kb)
	return nil
}

// decidedMarkup is a card's buttons for its match as it is now: the
// decision buttons while it awaits one, Undo under Not interested, the
// links, and an application's steps above them. The edit after a press
// and a card shown again for a pasted link (Card) share it.
func (rd *Renderer) decidedMarkup(lang string, m vacancy.Match, v vacancy.Vacancy) (*tele.ReplyMarkup, error) {
	kb, err := rd.vacancyMarkup(lang, m.ID, v, m.Status != vacancy.SentToUser)
	if err == nil && m.Status == vacancy.NotInterested {
		kb, err = rd.withUndo(lang, m.ID, kb)
	}
	if err == nil {
		kb, err = rd.withSteps(lang, actionCardStep, m, kb)
	}
	return kb, err
}

// editPressed replaces the pressed message: a direct answer to the user's
// own press, through the delivery path's limiter and rules. The change it
// shows is already stored, so a failed edit is logged and the press still
// answered.
func (b *Bot) editPressed(r *Request, text string, kb *tele.ReplyMarkup) {
	chatID, msgID, ok := pressedMessage(r)
	if !ok {
		return
	}
	if err := b.editDirect(r.Ctx, chatID, msgID, text, kb); err != nil {
		b.deps.Log.Warn("edit pressed message", "user", r.User.ID, "message", msgID, "err", err)
	}
}

// editMarkupPressed replaces the buttons of the pressed message, its text
// left as it is: at once, like editPressed.
func (b *Bot) editMarkupPressed(r *Request, kb *tele.ReplyMarkup) {
	chatID, msgID, ok := pressedMessage(r)
	if !ok {
		return
	}
	if err := b.editMarkupDirect(r.Ctx, chatID, msgID, kb); err != nil {
		b.deps.Log.Warn("edit pressed message's buttons", "user", r.User.ID, "message", msgID, "err", err)
	}
}

// pressedMessage is the chat and id of the message whose button was
// pressed; false when it is too old for Telegram to say which it was.
func pressedMessage(r *Request) (chatID int64, msgID int, ok bool) {
	msg := r.Callback().Message
	if msg == nil {
		return 0, 0, false
	}
	chatID = r.User.ID
	if msg.Chat != nil {
		chatID = msg.Chat.ID
	}
	return chatID, msg.ID, true
}

// Card renders one vacancy for its user with the decision buttons
// (vacancy.Notifier): one outbox row of kind vacancy for the match, which
// the vacancy workflow writes with the match's move to ANALYZED. Its
// delivery makes the match SENT_TO_USER (storage/outbox.go).
//
// A card shown again for a pasted link (d.Status set) shows the match as
// it stands, as the edit after a press shows it (decidedMarkup).
func (rd *Renderer) Card(d vacancy.CardData) []domain.Message {
	text := rd.renderVacancy(d.Lang, d.Vacancy, &d.Verdict, d.Status)
	var kb *tele.ReplyMarkup
	var err error
	if d.Status == "" || d.Status == vacancy.Analyzed || d.Status == vacancy.SentToUser {
		kb, err = rd.vacancyMarkup(d.Lang, d.MatchID, d.Vacancy, false)
	} else {
		kb, err = rd.decidedMarkup(d.Lang, vacancy.Match{ID: d.MatchID, Status: d.Status}, d.Vacancy)
	}
	if err != nil {
		rd.log.Error("render vacancy buttons", "match", d.MatchID, "err", err)
		return nil
	}
	// renderVacancy keeps the card within one message, so the buttons the
	// decision edits are on the message the match records.
	return Messages(d.UserID, domain.KindVacancy, d.MatchID, text, kb)
}

// SearchNews tells the user what a new search's first discovery brought
// when it brought no card (vacancy.Notifier): nothing new yet, or HH did
// not answer and it will be retried; either way the search is watched.
// Written to the outbox in the transaction that records the news.
func (rd *Renderer) SearchNews(n vacancy.FirstNews) []domain.Message {
	key := "search.nothing_new"
	if n.Failed {
		key = "search.first_fetch_failed"
	}
	text := rd.cat.T(n.Lang, key, locales.Data{"Search": locales.HTML(clip(n.Search.Params.String(), searchBudget))})
	return toTopic(domain.TopicVacancies, Messages(n.Search.UserID, domain.KindReply, n.Search.ID, text, nil))
}

// SearchRefused tells the user that HH refused their search's parameters
// (vacancy.Notifier): which ones as the search sets them, the values HH
// takes where the search knows them, that it is set aside and how to fix
// it. Written to the outbox in the transaction that sets it aside.
func (rd *Renderer) SearchRefused(rf vacancy.Refusal) []domain.Message {
	shown := locales.HTML(clip(rf.Search.Params.String(), searchBudget))
	var text string
	if len(rf.Args) == 0 {
		text = rd.cat.T(rf.Lang, "search.refused_unnamed", locales.Data{"Search": shown})
	} else {
		text = rd.cat.T(rf.Lang, "search.refused", locales.Data{"Search": shown, "Args": refusedArgs(rf.Search.Params, rf.Args)})
		for _, name := range rf.Args[:min(len(rf.Args), maxDropped)] {
			if acc := vacancy.Accepted(name); len(acc) > 0 {
				text += "\n" + rd.cat.T(rf.Lang, "search.refused_accepted",
					locales.Data{"Name": clip(name, argBudget), "Accepted": strings.Join(acc, ", ")})
			}
		}
	}
	return toTopic(domain.TopicVacancies, Messages(rf.Search.UserID, domain.KindReply, rf.Search.ID, text, nil))
}

// refusedArgs renders the arguments HH refused as the search sets them:
// <code>currency=RUB</code>, each escaped and clipped.
func refusedArgs(p vacancy.Params, args []string) locales.HTML {
	parts := make([]string, 0, min(len(args), maxDropped))
	for _, a := range args[:min(len(args), maxDropped)] {
		parts = append(parts, "<code>"+clip(p.Setting(a), argBudget)+"</code>")
	}
	return locales.HTML(strings.Join(parts, ", "))
}

// renderVacancy is the one rendering of a vacancy message, for delivery
// (status "") and for the edit after a decision. Everything from HH and the
// LLM is escaped and clipped, so the text is one message of valid HTML.
func (rd *Renderer) renderVacancy(lang string, v vacancy.Vacancy, verdict *vacancy.Verdict, status vacancy.Status) string {
	cat := rd.cat
	var lines []string
	title := clip(oneLine(v.Title), titleBudget)
	if title == "" {
		title = "—"
	}
	lines = append(lines, "<b>"+title+"</b>")
	var where []string
	if e := clip(oneLine(v.Employer), employerBudget); e != "" {
		where = append(where, e)
	}
	if a := clip(oneLine(v.Area), areaBudget); a != "" {
		where = append(where, a)
	}
	if len(where) > 0 {
		lines = append(lines, strings.Join(where, " · "))
	}
	if s := clip(salaryLine(cat, lang, v.Salary), salaryBudget); s != "" {
		lines = append(lines, s)
	}
	if s := requirementsLine(cat, lang, v); s != "" {
		lines = append(lines, s)
	}
	if verdict != nil {
		lines = append(lines, cat.T(lang, "vacancy.score", locales.Data{"Score": min(max(verdict.Score, 0), 100)}))
		n := 0
		for _, reason := range verdict.Reasons {
			if reason = oneLine(markdown.Text(reason)); reason == "" {
				continue
			}
			lines = append(lines, "• "+clip(reason, reasonBudget))
			if n++; n == maxReasons {
				break
			}
		}
		var skills []string
		for _, s := range verdict.MatchedSkills {
			if s = oneLine(s); s != "" {
				skills = append(skills, s)
			}
		}
		if len(skills) > 0 {
			lines = append(lines, cat.T(lang, "vacancy.skills", locales.Data{
				"Skills": locales.HTML(clip(strings.Join(skills, ", "), skillsBudget)),
			}))
		}
	}
	// HH's description, as long as it is, in a quotation the reader
	// expands (Bot API 7.3, older than any server the bot supports).
	if d := clip(vacancy.PlainText(v.Description), descriptionBudget); d != "" {
		lines = append(lines, "<blockquote expandable>"+d+"</blockquote>")
	}
	if key, ok := decidedKeys[status]; ok {
		lines = append(lines, "", cat.T(lang, key))
	}
	text := strings.Join(lines, "\n")
	if utf16Len(text) > MaxMessageLen {
		// Unreachable with the budgets above unless a translation grows
		// absurdly; losing the tail beats losing the buttons.
		text = Split(text, MaxMessageLen)[0]
	}
	return text
}

// salaryLine is HH's salary as the reader writes money: "from 250,000 ₽",
// "250 000 – 300 000 ₽", "up to $5,000", with before or after tax when HH
// says; "" when HH published none.
func salaryLine(cat *locales.Catalog, lang string, s vacancy.Salary) string {
	from, to := int64(max(s.From, 0)), int64(max(s.To, 0))
	var line string
	switch {
	case from > 0 && to > 0 && from != to:
		hi := locales.Money(lang, to, s.Currency)
		lo := locales.Number(lang, from)
		if r := []rune(hi); len(r) > 0 && !unicode.IsDigit(r[0]) {
			lo = locales.Money(lang, from, s.Currency) // the sign leads: "$3,000 – $5,000"
		}
		line = lo + " – " + hi
	case from > 0:
		if from == to {
			line = locales.Money(lang, from, s.Currency)
		} else {
			line = cat.T(lang, "vacancy.salary_from", locales.Data{"Amount": locales.Money(lang, from, s.Currency)})
		}
	case to > 0:
		line = cat.T(lang, "vacancy.salary_to", locales.Data{"Amount": locales.Money(lang, to, s.Currency)})
	default:
		return ""
	}
	switch {
	case s.Gross == nil:
	case *s.Gross:
		line = cat.T(lang, "vacancy.salary_gross", locales.Data{"Salary": line})
	default:
		line = cat.T(lang, "vacancy.salary_net", locales.Data{"Salary": line})
	}
	return html.UnescapeString(line)
}

// vacancyMarkup is [[Applied, Not interested], [Cover letter, Hide this
// employer], [Open on hh.ru, Apply]] before a decision (no Hide when HH
// names no employer) and only the links after it (an
// application's steps go above them: withSteps).
func (rd *Renderer) vacancyMarkup(lang string, matchID int64, v vacancy.Vacancy, decided bool) (*tele.ReplyMarkup, error) {
	cat := rd.cat
	kb := &tele.ReplyMarkup{}
	if !decided {
		pair, err := buttonPair(yesNo, cat.T(lang, "vacancy.button_applied"), actionApplied,
			cat.T(lang, "vacancy.button_not_interested"), actionNotInterested, matchID)
		if err != nil {
			return nil, err
		}
		letter, err := Encode(actionLetter, matchID)
		if err != nil {
			return nil, err
		}
		row := []tele.InlineButton{{Text: cat.T(lang, "vacancy.button_letter"), Data: letter}}
		if strings.TrimSpace(v.Employer) != "" {
			hide, err := Encode(actionHideEmployer, matchID)
			if err != nil {
				return nil, err
			}
			row = append(row, tele.InlineButton{Text: cat.T(lang, "vacancy.button_hide_employer"), Data: hide})
		}
		kb.InlineKeyboard = append(kb.InlineKeyboard, pair, row)
	}
	if row := applyRow(cat, lang, v); row != nil {
		kb.InlineKeyboard = append(kb.InlineKeyboard, row)
	}
	if len(kb.InlineKeyboard) == 0 {
		return nil, nil
	}
	return kb, nil
}

// withUndo puts Undo above a Not interested card's links.
func (rd *Renderer) withUndo(lang string, matchID int64, kb *tele.ReplyMarkup) (*tele.ReplyMarkup, error) {
	data, err := Encode(actionUndo, matchID)
	if err != nil {
		return nil, err
	}
	out := &tele.ReplyMarkup{InlineKeyboard: [][]tele.InlineButton{{{Text: rd.cat.T(lang, "vacancy.button_undo"), Data: data}}}}
	if kb != nil {
		out.InlineKeyboard = append(out.InlineKeyboard, kb.InlineKeyboard...)
	}
	return out, nil
}

func webURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" &&
		!strings.ContainsFunc(s, unicode.IsSpace)
}

// oneLine collapses whitespace: tags in our texts never span lines, which
// is what lets Split cut between lines safely.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// clip escapes s for Telegram HTML and cuts it to at most budget UTF-16
// units, marking a cut with "…" and never splitting an entity.
func clip(s string, budget int) string {
	esc := Escape(s)
	if utf16Len(esc) <= budget {
		return esc
	}
	var sb strings.Builder
	n := 0
	for _, r := range s {
		e := Escape(string(r))
		if n+utf16Len(e) > budget-1 {
			break
		}
		sb.WriteString(e)
		n += utf16Len(e)
	}
	return strings.TrimRight(sb.String(), " ") + "…"
}
