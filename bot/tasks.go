package bot

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	tele "gopkg.in/telebot.v3"

	"switchboard/domain"
	"switchboard/domain/tasks"
	"switchboard/locales"
)

// Tasks is what the bot asks of the approved tasks' way out
// (storage.Tasks): the groups' destinations, the members' GitHub logins
// and the recent pushes.
type Tasks interface {
	SetDestination(ctx context.Context, d tasks.Destination, by int64) error
	Destinations(ctx context.Context) (map[int64]tasks.Destination, error)
	SetLogin(ctx context.Context, userID int64, login string) error
	Login(ctx context.Context, userID int64) (string, error)
	Recent(ctx context.Context, since time.Duration, limit int) ([]tasks.Pushed, error)
	Link(ctx context.Context, proposalID, by int64) (runID int64, err error)
	FileAnyway(ctx context.Context, proposalID, by int64) (runID int64, err error)
	Retry(ctx context.Context, proposalID, by int64) (runID int64, err error)
}

// The board's buttons for an approved proposal that looks like an open
// issue of its destination. Admins only.
var (
	actionTaskLink = NewAction("tl", 1) // proposal id: it is that issue
	actionTaskFile = NewAction("tf", 1) // proposal id: file it anyway
	// On /tasks, under a task its tracker refused: send it again. Admins
	// only.
	actionTaskRetry = NewAction("tr", 1) // proposal id
)

type tasksUI struct {
	b *Bot
	t Tasks
}

// tasksWindow and tasksShown bound /tasks: the last 30 days' approved
// tasks, the newest first.
const (
	tasksWindow = 30 * 24 * time.Hour
	tasksShown  = 20
)

// RegisterTasks adds /tracker (where each group's approved tasks go),
// /github (a member's GitHub login) and /tasks (the approved tasks and
// where they stand).
func (b *Bot) RegisterTasks(t Tasks) {
	u := &tasksUI{b: b, t: t}
	b.Handle(Command{Name: "tracker", Desc: "cmd.tracker", Section: SectionAdminRuns, Role: RoleAdmin, Handle: u.tracker})
	b.Handle(Command{Name: "tasks", Desc: "cmd.tasks", Section: SectionAdminRuns, Role: RoleAdmin, Handle: u.list})
	b.Handle(Command{Name: "github", Desc: "cmd.github", Listed: u.githubInUse, Handle: u.github})
	b.HandleButtonIn(actionTaskLink, InPrivate|InAdminChat, u.likePress(u.t.Link, "board.linked_toast"))
	b.HandleButtonIn(actionTaskFile, InPrivate|InAdminChat, u.likePress(u.t.FileAnyway, "board.file_toast"))
	b.HandleButtonIn(actionTaskRetry, InPrivate|InAdminChat, u.retry)
}

// retry answers 🔁 under a refused task on /tasks: an admin who removed
// what its tracker refused sends it again, once (a second press, or one on
// a list drawn before, is stale). The list's buttons are drawn again
// without it.
func (u *tasksUI) retry(r *Request, cb Callback) error {
	if !r.Admin {
		return r.Forbidden()
	}
	_, err := u.t.Retry(r.Ctx, cb.IDs[0], r.User.ID)
	if errors.Is(err, domain.ErrNotFound) {
		return r.Alert("tasks.retry_stale")
	}
	if err != nil {
		return err
	}
	if ps, err := u.t.Recent(r.Ctx, tasksWindow, tasksShown); err != nil {
		u.b.deps.Log.Warn("tasks: /tasks not redrawn after a retry", "err", err)
	} else if kb, err := retryMarkup(r, ps); err == nil {
		u.b.editMarkupPressed(r, kb)
	}
	return r.Toast(r.T("tasks.retry_toast"))
}

// retryMarkup is /tasks' buttons: 🔁 under each refused task, one a row.
func retryMarkup(r *Request, ps []tasks.Pushed) (*tele.ReplyMarkup, error) {
	var rows [][]tele.InlineButton
	for _, p := range ps {
		if p.State != "refused" {
			continue
		}
		data, err := Encode(actionTaskRetry, p.ProposalID)
		if err != nil {
			return nil, err
		}
		rows = append(rows, []tele.InlineButton{{Text: r.T("tasks.button_retry", locales.Data{"Title": plainName(p.Title)}), Data: data}})
	}
	if len(rows) == 0 {
		return nil, nil
	}
	return &tele.ReplyMarkup{InlineKeyboard: rows}, nil
}

// likePress answers Link to it / File anyway on the board: an admin's
// choice for a proposal that looks like an open issue, taken once (a
// second press, or one on a board drawn before the choice, is stale);
// the board is drawn again with the outcome.
func (u *tasksUI) likePress(choose func(ctx context.Context, proposalID, by int64) (int64, error), toast string) CallbackHandler {
	return func(r *Request, cb Callback) error {
		if !r.Admin {
			return r.Forbidden()
		}
		runID, err := choose(r.Ctx, cb.IDs[0], r.User.ID)
		if errors.Is(err, domain.ErrNotFound) {
			return r.Alert("board.like_stale")
		}
		if err != nil {
			return err
		}
		if a := u.b.deps.Analysis; a != nil {
			if err := a.RefreshBoard(r.Ctx, runID); err != nil {
				u.b.deps.Log.Warn("tasks: the board not redrawn after a duplicate's choice", "run", runID, "err", err)
			}
		}
		return r.Toast(r.T(toast))
	}
}

// githubInUse reports whether any group's tasks go to GitHub: only then
// does /help offer members to link their login. A database that fails
// leaves it out of the list, nothing more.
func (u *tasksUI) githubInUse(r *Request) bool {
	ds, err := u.t.Destinations(r.Ctx)
	if err != nil {
		u.b.deps.Log.Warn("tasks: destinations not read for /help", "err", err)
		return false
	}
	for _, d := range ds {
		if d.Kind == tasks.KindGitHub {
			return true
		}
	}
	return false
}

// tracker sets a group's destination: /tracker <chat id> github owner/repo,
// /tracker <chat id> webhook URL, /tracker <chat id> none; without
// arguments, lists them.
func (u *tasksUI) tracker(r *Request) error {
	fields := strings.Fields(commandArgs(r.Message()))
	if len(fields) == 0 {
		return u.destinations(r)
	}
	chatID, err := strconv.ParseInt(fields[0], 10, 64)
	if err != nil || chatID >= 0 || len(fields) < 2 || len(fields) > 4 {
		return r.Reply(r.T("tracker.usage"), nil)
	}
	fields = append(fields, "", "")
	d, err := tasks.ParseDestination(fields[1], fields[2], fields[3])
	if ie := (*domain.InputError)(nil); errors.As(err, &ie) {
		return r.Reply(r.InputText(ie, locales.HTML(clip(ie.Arg(), maxEcho)))+"\n\n"+r.T("tracker.usage"), nil)
	}
	if err != nil {
		return err
	}
	d.ChatID = chatID
	if d.Kind != "" {
		// A chat id mistyped would send nothing anywhere, silently.
		titles, err := u.titles(r.Ctx)
		if err != nil {
			return err
		}
		if _, ok := titles[chatID]; titles != nil && !ok {
			return r.Reply(r.T("tracker.error_chat", locales.Data{"Chat": chatID}), nil)
		}
	}
	if err := u.t.SetDestination(r.Ctx, d, r.User.ID); err != nil {
		return err
	}
	if d.Kind == "" {
		return r.Reply(r.T("tracker.cleared", locales.Data{"Chat": chatID}), nil)
	}
	key := "tracker.set"
	if d.OnClose {
		key = "tracker.set_on_close"
	}
	return r.Reply(r.T(key, locales.Data{"Chat": chatID, "Destination": locales.HTML(clip(d.String(), 200))}), nil)
}

// destinations lists every group's destination.
func (u *tasksUI) destinations(r *Request) error {
	ds, err := u.t.Destinations(r.Ctx)
	if err != nil {
		return err
	}
	var sb strings.Builder
	if len(ds) == 0 {
		sb.WriteString(r.T("tracker.none"))
	} else {
		sb.WriteString(r.T("tracker.header"))
		ids := make([]int64, 0, len(ds))
		for id := range ds {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		titles, err := u.titles(r.Ctx)
		if err != nil {
			return err
		}
		for _, id := range ids {
			key := "tracker.line"
			if ds[id].OnClose {
				key = "tracker.line_on_close"
			}
			title := clip(oneLine(titles[id]), listTitleBudget)
			if title == "" {
				title = "—"
			}
			sb.WriteString("\n" + r.T(key, locales.Data{"Chat": id, "Title": locales.HTML(title), "Destination": locales.HTML(clip(ds[id].String(), 200))}))
		}
	}
	sb.WriteString("\n\n" + r.T("tracker.usage"))
	return r.Reply(sb.String(), nil)
}

// titles are the tracked groups' titles by id (nil without the analysis
// workflow, which tracks them).
func (u *tasksUI) titles(ctx context.Context) (map[int64]string, error) {
	if u.b.deps.Analysis == nil {
		return nil, nil
	}
	chats, err := u.b.deps.Analysis.Chats(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]string, len(chats))
	for _, c := range chats {
		out[c.ID] = c.Title
	}
	return out, nil
}

// githubLogin is a GitHub login as GitHub allows it.
var githubLogin = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,38}$`)

// github shows or sets the user's GitHub login (/github login; /github -
// forgets it); an admin sets another's by their id (/github <id> login).
func (u *tasksUI) github(r *Request) error {
	fields := strings.Fields(commandArgs(r.Message()))
	who := r.User.ID
	if len(fields) == 2 && r.Admin {
		id, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || id <= 0 {
			return r.Reply(r.T("github.usage"), nil)
		}
		who, fields = id, fields[1:]
	}
	switch {
	case len(fields) == 0:
		login, err := u.t.Login(r.Ctx, who)
		if err != nil {
			return err
		}
		if login == "" {
			return r.Reply(r.T("github.none")+"\n\n"+r.T("github.usage"), nil)
		}
		return r.Reply(r.T("github.current", locales.Data{"Login": login}), nil)
	case len(fields) > 1:
		return r.Reply(r.T("github.usage"), nil)
	case fields[0] == "-":
		if err := u.t.SetLogin(r.Ctx, who, ""); err != nil {
			return err
		}
		return r.Reply(r.T("github.cleared"), nil)
	}
	login := strings.TrimPrefix(fields[0], "@")
	if !githubLogin.MatchString(login) || strings.HasSuffix(login, "-") || strings.Contains(login, "--") {
		return r.Reply(r.T("github.error_login", locales.Data{"Arg": locales.HTML(clip(login, maxEcho))})+"\n\n"+r.T("github.usage"), nil)
	}
	if err := u.t.SetLogin(r.Ctx, who, login); err != nil {
		return err
	}
	return r.Reply(r.T("github.set", locales.Data{"Login": login}), nil)
}

// list shows the last 30 days' approved tasks: where each went and how it
// stands there.
func (u *tasksUI) list(r *Request) error {
	ps, err := u.t.Recent(r.Ctx, tasksWindow, tasksShown)
	if err != nil {
		return err
	}
	if len(ps) == 0 {
		return r.Reply(r.T("tasks.empty"), nil)
	}
	var sb strings.Builder
	sb.WriteString(r.T("tasks.header", locales.Data{"Count": len(ps)}))
	for _, p := range ps {
		key, errBudget := "tasks.line_pending", 160
		switch {
		case p.State == "held":
			key = "tasks.line_held"
		case p.State == "refused":
			// What the admin must fix: the tracker's words, whole where
			// they fit.
			key, errBudget = "tasks.line_refused", 300
		case p.Linked:
			key = "tasks.line_linked"
		case p.State == "pushed" && p.URL != "":
			key = "tasks.line_filed"
		case p.State == "pushed":
			key = "tasks.line_sent"
		case p.LastError != "":
			key = "tasks.line_waiting"
		}
		sb.WriteString("\n" + r.T(key, locales.Data{
			"Title": locales.HTML(clip(oneLine(p.Title), listTitleBudget)), "Destination": locales.HTML(clip(p.Destination.String(), 120)),
			"URL": p.URL, "Number": p.Number, "State": p.IssueState, "Error": locales.HTML(clip(oneLine(p.LastError), errBudget)),
			"Approved": r.Time(p.ApprovedAt),
			"Like":     p.Like.Number, "LikeURL": p.Like.URL,
		}))
	}
	kb, err := retryMarkup(r, ps)
	if err != nil {
		return err
	}
	if kb != nil {
		sb.WriteString("\n\n" + r.T("tasks.refused_hint"))
	}
	return r.Reply(sb.String(), kb)
}

// adminNotice is a notice for the admin chat (its Notices topic in a
// forum); nothing without an admin chat.
func (rd *Renderer) adminNotice(key string, data locales.Data) []domain.Message {
	if rd.rc.AdminChatID == 0 {
		return nil
	}
	return toTopic(domain.TopicNotices, Messages(rd.rc.AdminChatID, domain.KindNote, 0, rd.cat.T(rd.rc.AdminLang, key, data), nil))
}

// TrackerRefused renders the admin chat's notice that a destination
// refuses: our credentials (gone false) or the destination itself.
func (rd *Renderer) TrackerRefused(d tasks.Destination, gone bool, why string) []domain.Message {
	key := "tasks.refused_access"
	if gone {
		key = "tasks.refused_gone"
	}
	return rd.adminNotice(key, locales.Data{"Destination": locales.HTML(clip(d.String(), 200)), "Why": locales.HTML(clip(oneLine(why), 300))})
}

// TrackerBack renders the notice that a destination takes pushes again.
func (rd *Renderer) TrackerBack(d tasks.Destination) []domain.Message {
	return rd.adminNotice("tasks.back", locales.Data{"Destination": locales.HTML(clip(d.String(), 200))})
}

// AssigneeDropped renders the notice that a task was filed without the
// assignee its tracker refused.
func (rd *Renderer) AssigneeDropped(p tasks.Push, f tasks.Filed) []domain.Message {
	return rd.adminNotice("tasks.assignee_dropped", locales.Data{
		"Title": locales.HTML(clip(oneLine(p.Task.Title), listTitleBudget)), "Login": p.Task.Assignee, "URL": f.URL,
	})
}

// TaskRefused renders the admin chat's notice that a tracker refused a
// task for what it holds, and that it waits for a retry from /tasks.
func (rd *Renderer) TaskRefused(p tasks.Push, why string) []domain.Message {
	return rd.adminNotice("tasks.refused_task", locales.Data{
		"Title":       locales.HTML(clip(oneLine(p.Task.Title), listTitleBudget)),
		"Destination": locales.HTML(clip(p.Destination.String(), 200)), "Why": locales.HTML(clip(oneLine(why), 300)),
	})
}

// TaskClosed renders the admin chat's log line that a filed task was
// closed in its tracker.
func (rd *Renderer) TaskClosed(t tasks.Tracked) []domain.Message {
	if rd.rc.AdminChatID == 0 {
		return nil
	}
	text := rd.cat.T(rd.rc.AdminLang, "tasks.closed", locales.Data{
		"Title": locales.HTML(clip(oneLine(t.Title), listTitleBudget)), "Number": t.Number, "URL": t.URL,
	})
	return toTopic(domain.TopicLog, Messages(rd.rc.AdminChatID, domain.KindNote, 0, text, nil))
}
