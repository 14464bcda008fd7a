package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	tele "gopkg.in/telebot.v3"

	"switchboard/domain"
	"switchboard/domain/analysis"
	"switchboard/locales"
)

// Analysis is what the bot needs from the analysis workflow
// (*analysis.Service implements it).
type Analysis interface {
	Record(ctx context.Context, m analysis.Message) error
	Edited(ctx context.Context, chatID, messageID int64, text string) error
	TrackChat(ctx context.Context, id int64, title string, canRead bool) error
	Chats(ctx context.Context) ([]analysis.Chat, error)
	NewRun(ctx context.Context, adminID int64, args string) (analysis.Run, error)
	Start(ctx context.Context, id int64, rag bool) (analysis.Run, error)
	Close(ctx context.Context, id int64) (analysis.Run, error)
	Runs(ctx context.Context, page int) ([]analysis.Run, int, error)
	Run(ctx context.Context, id int64) (analysis.Run, error)
	Decide(ctx context.Context, proposalID, adminID int64, approve bool) (analysis.Proposal, analysis.Run, error)
}

var (
	_ Analysis          = (*analysis.Service)(nil)
	_ analysis.Notifier = (*Bot)(nil)
)

// Button actions of the analysis workflow. Only admins may press them; the
// handlers check before anything changes.
var (
	actionApprove  = RegisterAction("pa", 1) // proposal id
	actionReject   = RegisterAction("pj", 1) // proposal id
	actionRunsPage = RegisterAction("rp", 1) // page of /runs, from 0
)

// Budgets, in UTF-16 units of escaped HTML, for what group members and the
// LLM wrote. With the fixed texts a proposal stays one message (its buttons
// are edited away in place), and /chats and /runs fit one message each.
const (
	proposalTitleBudget = 300
	proposalDescBudget  = 2600
	assigneeBudget      = 120
	sourcesShown        = 10
	groupTitleBudget    = 100
	listTitleBudget     = 60
	runErrorBudget      = 600
	keywordsBudget      = 300
	adminNameBudget     = 64
	// progressCells is the width of the progress bar.
	progressCells = 10
)

type analysisUI struct {
	b *Bot
	a Analysis
	// tracked remembers the groups this replica has recorded as readable,
	// so that only a group's first message (after a start) tracks it.
	tracked sync.Map // chat id → true
}

// RegisterAnalysis makes group text and edits the analysis workflow's
// material, watches the bot's own membership of groups (to warn when
// privacy mode hides messages), and adds the admins' /chats, /run_new,
// /run_start, /run_close, /runs and /run with the Approve / Reject buttons;
// call it before Run. The bot is the workflow's Notifier too.
//
// The admin chat (ADMIN_CHAT_ID) is where the workflow reports; its own
// messages are never recorded.
func (b *Bot) RegisterAnalysis(a Analysis) {
	u := &analysisUI{b: b, a: a}
	b.groupText = u.record
	b.tb.Handle(tele.OnEdited, u.edited)
	b.tb.Handle(tele.OnMyChatMember, u.membership)
	b.Handle(Command{Name: "chats", Desc: "cmd.chats", Role: RoleAdmin, Handle: u.chats})
	b.Handle(Command{Name: "run_new", Desc: "cmd.run_new", Role: RoleAdmin, Handle: u.runNew})
	b.Handle(Command{Name: "run_start", Desc: "cmd.run_start", Role: RoleAdmin, Handle: u.runStart})
	b.Handle(Command{Name: "run_close", Desc: "cmd.run_close", Role: RoleAdmin, Handle: u.runClose})
	b.Handle(Command{Name: "runs", Desc: "cmd.runs", Role: RoleAdmin, Handle: u.runs})
	b.Handle(Command{Name: "run", Desc: "cmd.run", Role: RoleAdmin, Handle: u.run})
	b.HandleButton(actionApprove, u.decide(true))
	b.HandleButton(actionReject, u.decide(false))
	b.HandleButton(actionRunsPage, u.runsPage)
}

// --- group messages ----------------------------------------------------------

// analysed reports whether a chat's messages are material for runs: groups
// and supergroups other than the admin chat.
func (u *analysisUI) analysed(chat *tele.Chat) bool {
	return chat != nil && (chat.Type == tele.ChatGroup || chat.Type == tele.ChatSuperGroup) &&
		chat.ID != u.b.cfg.AdminChatID
}

// record stores a group's text message. Nothing is ever answered in the
// group; a failure is logged (see silent).
func (u *analysisUI) record(r *Request) error {
	msg := r.Message()
	if !u.analysed(msg.Chat) || strings.TrimSpace(msg.Text) == "" {
		return nil
	}
	u.track(r.Ctx, msg.Chat)
	m := analysis.Message{
		ChatID: msg.Chat.ID, MessageID: int64(msg.ID), Text: msg.Text, Date: msg.Time().UTC(),
	}
	if s := msg.Sender; s != nil {
		m.AuthorID, m.Author = s.ID, authorName(s)
	}
	if err := u.a.Record(r.Ctx, m); err != nil {
		return fmt.Errorf("record message %d of chat %d: %w", msg.ID, msg.Chat.ID, err)
	}
	return nil
}

// authorName is how a message's author appears to the model: the first
// name, else @username.
func authorName(s *tele.User) string {
	if name := strings.TrimSpace(s.FirstName); name != "" {
		return name
	}
	if s.Username != "" {
		return "@" + s.Username
	}
	return "id " + strconv.FormatInt(s.ID, 10)
}

// track records a group the first time this replica sees a message from
// it: a plain message reaching the bot proves it can read the group.
func (u *analysisUI) track(ctx context.Context, chat *tele.Chat) {
	if _, ok := u.tracked.Load(chat.ID); ok {
		return
	}
	if err := u.a.TrackChat(ctx, chat.ID, chat.Title, true); err != nil {
		u.b.deps.Log.Warn("analysis: track chat", "chat", chat.ID, "err", err)
		return
	}
	u.tracked.Store(chat.ID, true)
}

// edited applies an edit of a stored group message.
func (u *analysisUI) edited(c tele.Context) error {
	r := requestOf(c)
	if r == nil {
		return nil
	}
	msg := c.Message()
	if msg == nil || !u.analysed(msg.Chat) || strings.TrimSpace(msg.Text) == "" {
		return nil
	}
	if err := u.a.Edited(r.Ctx, msg.Chat.ID, int64(msg.ID), msg.Text); err != nil {
		return fmt.Errorf("edit message %d of chat %d: %w", msg.ID, msg.Chat.ID, err)
	}
	return nil
}

// membership follows the bot's own membership of a group (my_chat_member,
// which Telegram sends when the bot is added, promoted, demoted or
// removed). Added or demoted, it checks whether it can read ordinary
// messages and tells the admin chat how to fix it if not.
func (u *analysisUI) membership(c tele.Context) error {
	r := requestOf(c)
	upd := c.ChatMember()
	if r == nil || upd == nil || upd.NewChatMember == nil || !u.analysed(upd.Chat) {
		return nil
	}
	chat, now := upd.Chat, upd.NewChatMember.Role
	was := tele.Left
	if upd.OldChatMember != nil {
		was = upd.OldChatMember.Role
	}
	log := u.b.deps.Log.With("chat", chat.ID, "from", string(was), "to", string(now), "by", r.User.ID)
	if now == tele.Left || now == tele.Kicked {
		u.tracked.Delete(chat.ID)
		log.Info("analysis: the bot left a group")
		return nil
	}
	canRead, err := u.canRead(now)
	if err != nil {
		return fmt.Errorf("privacy check in chat %d: %w", chat.ID, err)
	}
	if err := u.a.TrackChat(r.Ctx, chat.ID, chat.Title, canRead); err != nil {
		return fmt.Errorf("track chat %d: %w", chat.ID, err)
	}
	log.Info("analysis: group tracked", "can_read", canRead)
	if canRead {
		u.tracked.Store(chat.ID, true)
	} else {
		// Not remembered: a plain message arriving later proves otherwise.
		u.tracked.Delete(chat.ID)
	}
	added := was == tele.Left || was == tele.Kicked
	demoted := was == tele.Administrator || was == tele.Creator
	var key string
	switch {
	case !canRead && (added || demoted):
		key = "analysis.privacy_hint"
	case canRead && added:
		key = "analysis.chat_added"
	default:
		return nil
	}
	if u.b.cfg.AdminChatID == 0 {
		log.Warn("analysis: no admin chat to tell about a group", "can_read", canRead)
		return nil
	}
	text := u.b.deps.Catalog.T(u.b.cfg.AdminLang, key, locales.Data{
		"Title": locales.HTML(clip(oneLine(chat.Title), groupTitleBudget)),
		"Chat":  chat.ID,
		"Bot":   u.b.tb.Me.Username,
	})
	if err := u.b.sendDirect(r.Ctx, u.b.cfg.AdminChatID, 0, text, nil); err != nil {
		return fmt.Errorf("tell the admin chat about chat %d: %w", chat.ID, err)
	}
	return nil
}

// canRead reports whether the bot sees a group's ordinary messages: as an
// admin it always does; otherwise only with privacy mode disabled, which
// getMe reports (asked now, since it can change while the bot runs).
func (u *analysisUI) canRead(status tele.MemberStatus) (bool, error) {
	if status == tele.Administrator || status == tele.Creator {
		return true, nil
	}
	data, err := u.b.tb.Raw("getMe", nil)
	if err != nil {
		return false, err
	}
	var resp struct {
		Result *tele.User `json:"result"`
	}
	if err := json.Unmarshal(data, &resp); err != nil || resp.Result == nil {
		return false, fmt.Errorf("getMe: unexpected answer: %w", err)
	}
	return resp.Result.CanReadMessages, nil
}

// --- /chats ------------------------------------------------------------------

func (u *analysisUI) chats(r *Request) error {
	list, err := u.a.Chats(r.Ctx)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		return r.Reply(r.T("chats.empty"), nil)
	}
	var sb strings.Builder
	sb.WriteString(r.T("chats.header", locales.Data{"Count": len(list)}))
	budget := MaxMessageLen - 100 // room for the "… and N more" line
	for i, c := range list {
		title := clip(oneLine(c.Title), listTitleBudget)
		if title == "" {
			title = "—"
		}
		last := r.T("chats.never")
		if !c.LastAt.IsZero() {
			last = stamp(c.LastAt)
		}
		entry := "\n" + r.T("chats.line", locales.Data{
			"Title": locales.HTML(title), "Chat": c.ID, "Messages": c.Messages, "Last": last,
		})
		if !c.CanRead {
			entry += "\n" + r.T("chats.cannot_read")
		}
		if utf16Len(sb.String())+utf16Len(entry) > budget {
			sb.WriteString("\n" + r.T("chats.more", locales.Data{"Count": len(list) - i}))
			break
		}
		sb.WriteString(entry)
	}
	return r.Reply(sb.String(), nil)
}

// --- /run_new, /run_start, /run_close ----------------------------------------

// runInputError renders a refusal of /run_new's arguments followed by the
// usage, unless it is the usage.
func runInputError(r *Request, e *analysis.InputError) string {
	const usage = "run_new.usage"
	limits := map[string]int{
		"run_new.error_min_len":  analysis.MaxMinLen,
		"run_new.error_keywords": analysis.MaxKeywords,
	}
	msg := r.T(e.Key, locales.Data{
		"Arg":    locales.HTML(clip(strings.ToValidUTF8(e.Arg, ""), argBudget)),
		"Max":    limits[e.Key],
		"MaxLen": analysis.MaxKeywordLen,
	})
	if e.Key != usage {
		msg += "\n\n" + r.T(usage)
	}
	return msg
}

func (u *analysisUI) runNew(r *Request) error {
	run, err := u.a.NewRun(r.Ctx, r.User.ID, commandArgs(r.Message()))
	var ie *analysis.InputError
	var ue *analysis.UnclosedError
	switch {
	case errors.As(err, &ie):
		return r.Reply(runInputError(r, ie), nil)
	case errors.As(err, &ue):
		return r.Reply(u.unclosed(r, ue.IDs), nil)
	case err != nil:
		return err
	}
	return r.Reply(r.T("run_new.created", locales.Data{
		"Run": run.ID, "Filters": locales.HTML(u.b.filtersText(r.Lang, run)),
	}), nil)
}

// unclosed names the runs in the way of a new one with their states.
func (u *analysisUI) unclosed(r *Request, ids []int64) string {
	var lines []string
	for _, id := range ids {
		state := "?"
		if run, err := u.a.Run(r.Ctx, id); err == nil {
			state = runStateName(u.b.deps.Catalog, r.Lang, run.State)
		} else if !errors.Is(err, domain.ErrNotFound) {
			u.b.deps.Log.Warn("analysis: load unclosed run", "run", id, "err", err)
		}
		lines = append(lines, "• "+r.T("run.ref", locales.Data{"Run": id, "State": state}))
	}
	return r.T("run_new.unclosed", locales.Data{"Runs": locales.HTML(strings.Join(lines, "\n"))})
}

// runArgs reads "ID" or "#ID" and the words after it.
func runArgs(r *Request) (int64, []string, bool) {
	fields := strings.Fields(commandArgs(r.Message()))
	if len(fields) == 0 {
		return 0, nil, false
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(fields[0], "#"), 10, 64)
	return id, fields[1:], err == nil && id > 0
}

func (u *analysisUI) runStart(r *Request) error {
	id, rest, ok := runArgs(r)
	rag := len(rest) == 1 && strings.EqualFold(rest[0], "rag")
	if !ok || len(rest) > 1 || len(rest) == 1 && !rag {
		return r.Reply(r.T("run_start.usage"), nil)
	}
	run, err := u.a.Start(r.Ctx, id, rag)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return r.Reply(r.T("run.not_found", locales.Data{"Run": id}), nil)
	case errors.Is(err, analysis.ErrState):
		return r.Reply(r.T("run_start.error_state", locales.Data{
			"Run": id, "State": runStateName(u.b.deps.Catalog, r.Lang, run.State),
		}), nil)
	case err != nil:
		return err
	}
	key := "run_start.ok"
	if run.RAG {
		key = "run_start.ok_rag"
	}
	text := r.T(key, locales.Data{"Run": run.ID})
	if u.b.cfg.AdminChatID == 0 {
		text += "\n" + r.T("run_start.no_admin_chat")
	}
	return r.Reply(text, nil)
}

func (u *analysisUI) runClose(r *Request) error {
	id, rest, ok := runArgs(r)
	if !ok || len(rest) > 0 {
		return r.Reply(r.T("run_close.usage"), nil)
	}
	run, err := u.a.Close(r.Ctx, id)
	var pe *analysis.PendingError
	switch {
	case errors.As(err, &pe):
		return r.Reply(r.T("run_close.error_pending", locales.Data{"Run": id, "Pending": pe.Pending}), nil)
	case errors.Is(err, domain.ErrNotFound):
		return r.Reply(r.T("run.not_found", locales.Data{"Run": id}), nil)
	case errors.Is(err, analysis.ErrState):
		return r.Reply(r.T("run_close.error_state", locales.Data{
			"Run": id, "State": runStateName(u.b.deps.Catalog, r.Lang, run.State),
		}), nil)
	case err != nil:
		return err
	}
	m := metricsOf(run)
	return r.Reply(r.T("run_close.ok", locales.Data{
		"Run": run.ID, "Total": m.ProposalsTotal, "Approval": percent(m.ApprovalRate), "Rejection": percent(m.RejectionRate),
	}), nil)
}

// metricsOf is a run's stored metrics, or the same figures from its
// counters when none are stored (a run not closed yet).
func metricsOf(r analysis.Run) analysis.Metrics {
	if r.Metrics != nil {
		return *r.Metrics
	}
	m := analysis.Metrics{ProposalsTotal: r.ProposalsTotal}
	if r.ProposalsTotal > 0 {
		m.ApprovalRate = float64(r.ProposalsApproved) / float64(r.ProposalsTotal)
		m.RejectionRate = float64(r.ProposalsRejected) / float64(r.ProposalsTotal)
	}
	return m
}

// percent renders a rate (a fraction of 1) as a percentage with at most
// one decimal: 0.5 → "50", 0.3333 → "33.3".
func percent(rate float64) string {
	s := strconv.FormatFloat(rate*100, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0")
}

// --- /runs and /run ------------------------------------------------------------

func (u *analysisUI) runs(r *Request) error {
	text, kb, err := u.runsList(r, 0)
	if err != nil {
		return err
	}
	return r.Reply(text, kb)
}

// runsPage turns /runs' page in place.
func (u *analysisUI) runsPage(r *Request, cb Callback) error {
	if !r.Admin {
		return r.Forbidden()
	}
	text, kb, err := u.runsList(r, int(min(cb.IDs[0], 1<<30)))
	if err != nil {
		return err
	}
	u.editPressed(r, text, kb)
	return r.Respond()
}

// runsList is one page of /runs with ◀ ▶ buttons; it must stay one message
// because the buttons edit it in place. A page past the end shows the last.
func (u *analysisUI) runsList(r *Request, page int) (string, *tele.ReplyMarkup, error) {
	list, total, err := u.a.Runs(r.Ctx, page)
	if err != nil {
		return "", nil, err
	}
	pages := max((total+analysis.PageSize-1)/analysis.PageSize, 1)
	if len(list) == 0 && total > 0 && page >= pages {
		page = pages - 1
		if list, total, err = u.a.Runs(r.Ctx, page); err != nil {
			return "", nil, err
		}
	}
	if total == 0 {
		return r.T("runs.empty"), nil, nil
	}
	cat := u.b.deps.Catalog
	var sb strings.Builder
	sb.WriteString(r.T("runs.header", locales.Data{"Page": page + 1, "Pages": pages, "Total": total}))
	for _, run := range list {
		sb.WriteString("\n" + r.T("runs.line", locales.Data{
			"Run": run.ID, "State": runStateName(cat, r.Lang, run.State),
			"Created": stamp(run.CreatedAt), "Window": windowLabel(run.Filters.Window),
			"Total": run.ProposalsTotal, "Approved": run.ProposalsApproved,
			"Rejected": run.ProposalsRejected, "Pending": run.ProposalsPending,
		}))
	}
	var row []tele.InlineButton
	if page > 0 {
		data, err := Encode(actionRunsPage, int64(page-1))
		if err != nil {
			return "", nil, err
		}
		row = append(row, tele.InlineButton{Text: r.T("runs.newer"), Data: data})
	}
	if page+1 < pages {
		data, err := Encode(actionRunsPage, int64(page+1))
		if err != nil {
			return "", nil, err
		}
		row = append(row, tele.InlineButton{Text: r.T("runs.older"), Data: data})
	}
	if len(row) == 0 {
		return sb.String(), nil, nil
	}
	return sb.String(), &tele.ReplyMarkup{InlineKeyboard: [][]tele.InlineButton{row}}, nil
}

func (u *analysisUI) run(r *Request) error {
	id, rest, ok := runArgs(r)
	if !ok || len(rest) > 0 {
		return r.Reply(r.T("run.usage"), nil)
	}
	run, err := u.a.Run(r.Ctx, id)
	if errors.Is(err, domain.ErrNotFound) {
		return r.Reply(r.T("run.not_found", locales.Data{"Run": id}), nil)
	}
	if err != nil {
		return err
	}
	return r.Reply(u.b.renderRun(r.Lang, run), nil)
}

// renderRun is /run: every field of a run.
func (b *Bot) renderRun(lang string, r analysis.Run) string {
	cat := b.deps.Catalog
	t := func(key string, data locales.Data) string { return cat.T(lang, key, data) }
	rag := cat.T(lang, "run.rag_off")
	if r.RAG {
		rag = cat.T(lang, "run.rag_on")
	}
	lines := []string{
		t("run.header", locales.Data{"Run": r.ID, "State": runStateName(cat, lang, r.State)}),
		t("run.created", locales.Data{"Created": stamp(r.CreatedAt), "Admin": r.CreatedBy}),
		t("run.filters", locales.Data{"Filters": locales.HTML(b.filtersText(lang, r))}),
		t("run.rag", locales.Data{"RAG": rag}),
		t("run.messages", locales.Data{"Messages": r.Messages, "Filtered": r.Filtered, "Processed": r.Processed}),
		t("run.batches", locales.Data{"Done": r.BatchesDone, "Batches": r.Batches}),
		t("run.proposals", locales.Data{
			"Total": r.ProposalsTotal, "Approved": r.ProposalsApproved,
			"Rejected": r.ProposalsRejected, "Pending": r.ProposalsPending,
		}),
	}
	for _, at := range []struct {
		key  string
		when time.Time
	}{
		{"run.started", r.StartedAt}, {"run.completed", r.CompletedAt},
		{"run.closed", r.ClosedAt}, {"run.failed", r.FailedAt},
	} {
		if !at.when.IsZero() {
			lines = append(lines, t(at.key, locales.Data{"Time": stamp(at.when)}))
		}
	}
	if e := r.ErrorLog; e != nil {
		data := locales.Data{
			"Step": e.Step, "Batch": e.Batch,
			"Error": locales.HTML(clip(oneLine(e.Error), runErrorBudget)),
		}
		if e.Batch > 0 {
			lines = append(lines, t("run.error_batch", data))
		} else {
			lines = append(lines, t("run.error", data))
		}
	}
	if r.Metrics != nil {
		lines = append(lines, t("run.metrics", locales.Data{
			"Total": r.Metrics.ProposalsTotal, "Approval": percent(r.Metrics.ApprovalRate),
			"Rejection": percent(r.Metrics.RejectionRate),
		}))
	}
	return strings.Join(lines, "\n")
}

// filtersText is a run's window and filters in one line of escaped HTML.
func (b *Bot) filtersText(lang string, r analysis.Run) string {
	cat := b.deps.Catalog
	parts := []string{cat.T(lang, "run.filter_window", locales.Data{
		"Window": windowLabel(r.Filters.Window), "From": stamp(r.From), "To": stamp(r.To),
	})}
	if r.Filters.ChatID != 0 {
		parts = append(parts, cat.T(lang, "run.filter_chat", locales.Data{"Chat": r.Filters.ChatID}))
	} else {
		parts = append(parts, cat.T(lang, "run.filter_all_chats"))
	}
	if len(r.Filters.Keywords) > 0 {
		parts = append(parts, cat.T(lang, "run.filter_keywords", locales.Data{
			"Keywords": locales.HTML(clip(strings.Join(r.Filters.Keywords, ", "), keywordsBudget)),
		}))
	}
	if r.Filters.MinLen > 0 {
		parts = append(parts, cat.T(lang, "run.filter_min_len", locales.Data{"Min": r.Filters.MinLen}))
	}
	if r.Filters.Mentions {
		parts = append(parts, cat.T(lang, "run.filter_mentions"))
	}
	return strings.Join(parts, "; ")
}

// windowLabel spells a window as /run_new takes it: "24h", "7d".
func windowLabel(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d <= 0:
		return "—"
	case d%day == 0 && d > day:
		return strconv.FormatInt(int64(d/day), 10) + "d"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	}
	return d.String()
}

// runStateKeys names every run state; spelled out so the catalogue test
// sees them used.
var runStateKeys = map[analysis.State]string{
	analysis.Pending:   "analysis.state.pending",
	analysis.Running:   "analysis.state.running",
	analysis.Completed: "analysis.state.completed",
	analysis.Reviewed:  "analysis.state.reviewed",
	analysis.Closed:    "analysis.state.closed",
	analysis.Failed:    "analysis.state.failed",
	analysis.Cancelled: "analysis.state.cancelled",
}

func runStateName(cat *locales.Catalog, lang string, s analysis.State) string {
	if k, ok := runStateKeys[s]; ok {
		return cat.T(lang, k)
	}
	return string(s)
}

// --- proposal buttons ----------------------------------------------------------

// editPressed edits the message whose button was pressed, at once through
// the direct path (the limiter and Telegram's rules, waiting out a 429); a
// failure only leaves the message as it was, so it is logged.
func (u *analysisUI) editPressed(r *Request, text string, kb *tele.ReplyMarkup) {
	msg := r.Callback().Message
	if msg == nil {
		return // too old for Telegram to say which message it was
	}
	if err := u.b.editDirect(r.Ctx, msg.Chat.ID, msg.ID, text, kb); err != nil {
		u.b.deps.Log.Warn("analysis: edit pressed message", "user", r.User.ID, "chat", msg.Chat.ID, "message", msg.ID, "err", err)
	}
}

// decide is Approve (true) and Reject (false). Only admins may press them;
// a proposal decided already is refused with what it became.
func (u *analysisUI) decide(approve bool) CallbackHandler {
	return func(r *Request, cb Callback) error {
		if !r.Admin {
			return r.Forbidden()
		}
		p, run, err := u.a.Decide(r.Ctx, cb.IDs[0], r.User.ID, approve)
		switch {
		case errors.Is(err, analysis.ErrDecided):
			if p.Decision == analysis.Approved {
				return r.Alert("proposal.already_approved")
			}
			return r.Alert("proposal.already_rejected")
		case errors.Is(err, domain.ErrNotFound):
			return r.Alert("error.callback_invalid")
		case err != nil:
			return err
		}
		// The message is the admin chat's, so it stays in that chat's
		// language whoever pressed.
		lang := u.b.cfg.AdminLang
		key, toast := "proposal.decided_rejected", "proposal.rejected_toast"
		if approve {
			key, toast = "proposal.decided_approved", "proposal.approved_toast"
		}
		text := u.b.renderProposal(lang, run, p) + "\n\n" +
			u.b.deps.Catalog.T(lang, key, locales.Data{"Admin": locales.HTML(adminName(r.User))})
		u.editPressed(r, fitMessage(text), nil)
		return r.Respond(&tele.CallbackResponse{Text: r.T(toast)})
	}
}

// adminName is who decided, as escaped HTML: "Ann (@ann)".
func adminName(u domain.User) string {
	name := clip(oneLine(u.FirstName), adminNameBudget)
	switch {
	case name != "" && u.Username != "":
		return name + " (@" + clip(u.Username, adminNameBudget) + ")"
	case name != "":
		return name
	case u.Username != "":
		return "@" + clip(u.Username, adminNameBudget)
	}
	return "id " + strconv.FormatInt(u.ID, 10)
}

// priorityKeys name the priorities the domain keeps.
var priorityKeys = map[string]string{
	"low":    "analysis.priority.low",
	"medium": "analysis.priority.medium",
	"high":   "analysis.priority.high",
}

// renderProposal is a proposal message without its decision: everything
// from the LLM escaped and clipped, so it is one message of valid HTML.
func (b *Bot) renderProposal(lang string, r analysis.Run, p analysis.Proposal) string {
	cat := b.deps.Catalog
	title := clip(oneLine(p.Title), proposalTitleBudget)
	if title == "" {
		title = "—"
	}
	lines := []string{
		cat.T(lang, "proposal.header", locales.Data{"Proposal": p.ID, "Run": r.ID}),
		"<b>" + title + "</b>",
	}
	if d := clip(strings.TrimSpace(p.Description), proposalDescBudget); d != "" {
		lines = append(lines, d)
	}
	lines = append(lines, "")
	priority := clip(oneLine(p.Priority), 20)
	if k, ok := priorityKeys[p.Priority]; ok {
		priority = cat.T(lang, k)
	}
	lines = append(lines, cat.T(lang, "proposal.priority", locales.Data{"Priority": locales.HTML(priority)}))
	if a := clip(oneLine(p.Assignee), assigneeBudget); a != "" {
		lines = append(lines, cat.T(lang, "proposal.assignee", locales.Data{"Assignee": locales.HTML(a)}))
	}
	if d := clip(oneLine(p.Deadline), 20); d != "" {
		lines = append(lines, cat.T(lang, "proposal.deadline", locales.Data{"Deadline": locales.HTML(d)}))
	}
	if len(p.Sources) > 0 {
		var refs []string
		for _, s := range p.Sources[:min(len(p.Sources), sourcesShown)] {
			refs = append(refs, strconv.FormatInt(s.ChatID, 10)+":"+strconv.FormatInt(s.MessageID, 10))
		}
		sources := strings.Join(refs, ", ")
		if n := len(p.Sources) - sourcesShown; n > 0 {
			sources += " " + cat.T(lang, "proposal.sources_more", locales.Data{"Count": n})
		}
		lines = append(lines, cat.T(lang, "proposal.sources", locales.Data{"Sources": locales.HTML(sources)}))
	}
	return fitMessage(strings.Join(lines, "\n"))
}

// fitMessage keeps a message that is edited in place to one message.
// Unreachable with the budgets above unless a translation grows absurdly;
// losing the tail beats losing the buttons.
func fitMessage(text string) string {
	if utf16Len(text) > MaxMessageLen {
		return Split(text, MaxMessageLen)[0]
	}
	return text
}

func proposalMarkup(cat *locales.Catalog, lang string, proposalID int64) (*tele.ReplyMarkup, error) {
	approve, err := Encode(actionApprove, proposalID)
	if err != nil {
		return nil, err
	}
	reject, err := Encode(actionReject, proposalID)
	if err != nil {
		return nil, err
	}
	return &tele.ReplyMarkup{InlineKeyboard: [][]tele.InlineButton{{
		{Text: cat.T(lang, "proposal.button_approve"), Data: approve},
		{Text: cat.T(lang, "proposal.button_reject"), Data: reject},
	}}}, nil
}

// --- analysis.Notifier ---------------------------------------------------------

// runEventKeys give every run event posted to the admin chat its line;
// spelled out so the catalogue test sees them used. progress_updated is
// not among them: it edits the progress message instead (Progress).
var runEventKeys = map[analysis.EventKind]string{
	analysis.EventCreated:          "analysis.event.run_created",
	analysis.EventStarted:          "analysis.event.run_started",
	analysis.EventProposalsCreated: "analysis.event.proposals_created",
	analysis.EventCompleted:        "analysis.event.run_completed",
	analysis.EventFailed:           "analysis.event.run_failed",
	analysis.EventClosed:           "analysis.event.run_closed",
}

// renderRunEvent is one line of the admin chat's log.
func (b *Bot) renderRunEvent(lang string, e analysis.Event) string {
	r := e.Run
	key, ok := runEventKeys[e.Kind]
	if !ok {
		key = "analysis.event.other"
	}
	data := locales.Data{
		"Kind": string(e.Kind), "Run": r.ID, "Count": len(e.Proposals), "Total": r.ProposalsTotal,
		"Done": r.BatchesDone, "Batches": r.Batches,
	}
	switch e.Kind {
	case analysis.EventCreated:
		data["Filters"] = locales.HTML(b.filtersText(lang, r))
	case analysis.EventFailed:
		step, batch, msg := "?", 0, ""
		if r.ErrorLog != nil {
			step, batch, msg = r.ErrorLog.Step, r.ErrorLog.Batch, r.ErrorLog.Error
		}
		data["Step"], data["Batch"] = step, batch
		data["Error"] = locales.HTML(clip(oneLine(msg), runErrorBudget))
		if batch > 0 {
			key = "analysis.event.run_failed_batch"
		}
	case analysis.EventClosed:
		m := metricsOf(r)
		data["Total"], data["Approval"], data["Rejection"] = m.ProposalsTotal, percent(m.ApprovalRate), percent(m.RejectionRate)
	}
	return b.deps.Catalog.T(lang, key, data)
}

// Event renders a run event for the admin chat (analysis.Notifier):
// its line and, for a run that ended, the final state of its progress
// message. progress_updated renders nothing (see Progress), and nothing is
// rendered without an admin chat.
func (b *Bot) Event(e analysis.Event) []domain.Message {
	if b.cfg.AdminChatID == 0 || e.Kind == analysis.EventProgress {
		return nil
	}
	out := Messages(b.cfg.AdminChatID, domain.KindRunEvent, e.Run.ID, b.renderRunEvent(b.cfg.AdminLang, e), nil)
	// The progress message is edited with each batch, while the run is
	// still running; its end is shown here.
	if (e.Kind == analysis.EventCompleted || e.Kind == analysis.EventFailed) && progressPosted(e.Run) {
		out = append(out, b.Progress(e.Run, false)...)
	}
	return out
}

// progressPosted reports whether a run's progress message was written: it
// is written with the window's counts (SetProgress), which a completed run
// has passed, as has one failed at a later step or with counts recorded.
// A run failed before (at fetch or batch) has none to finish.
func progressPosted(r analysis.Run) bool {
	if r.State == analysis.Completed || r.ProgressMessageID != 0 || r.Batches > 0 || r.Messages > 0 {
		return true
	}
	if e := r.ErrorLog; e != nil {
		switch e.Step {
		case analysis.StepProposals, analysis.StepSave, analysis.StepComplete:
			return true
		}
	}
	return false
}

// progressKeys head the progress message by the run's state.
var progressKeys = map[analysis.State]string{
	analysis.Running:   "analysis.progress.running",
	analysis.Completed: "analysis.progress.completed",
	analysis.Failed:    "analysis.progress.failed",
}

// renderProgress is the progress message: a bar over the batches, then
// batches, messages and proposals so far.
func (b *Bot) renderProgress(lang string, r analysis.Run) string {
	cat := b.deps.Catalog
	pct := 0
	if r.Batches > 0 {
		pct = min(max(r.BatchesDone*100/r.Batches, 0), 100)
	}
	if r.State == analysis.Completed {
		pct = 100
	}
	filled := pct * progressCells / 100
	bar := strings.Repeat("▓", filled) + strings.Repeat("░", progressCells-filled) + " " + strconv.Itoa(pct) + "%"
	key, ok := progressKeys[r.State]
	if !ok {
		key = progressKeys[analysis.Running]
	}
	return cat.T(lang, key, locales.Data{"Run": r.ID}) + "\n" + cat.T(lang, "analysis.progress.body", locales.Data{
		"Bar": bar, "Done": r.BatchesDone, "Batches": r.Batches,
		"Processed": r.Processed, "Filtered": r.Filtered, "Messages": r.Messages,
		"Total": r.ProposalsTotal,
	})
}

// progressKey names a run's progress message for its edits.
func progressKey(runID int64) string { return MessageKey(domain.KindProgress, runID) }

// Progress renders the run's progress message (analysis.Notifier): the
// message itself the first time, afterwards an edit of it, which posts it
// anew if it is gone (deleted, or never delivered). An edit that changes
// nothing is no error. Without an admin chat it renders nothing.
func (b *Bot) Progress(r analysis.Run, first bool) []domain.Message {
	if b.cfg.AdminChatID == 0 {
		return nil
	}
	text := fitMessage(b.renderProgress(b.cfg.AdminLang, r))
	if first {
		return []domain.Message{Keyed(b.cfg.AdminChatID, domain.KindProgress, r.ID, progressKey(r.ID), text, nil)}
	}
	return []domain.Message{EditOf(b.cfg.AdminChatID, domain.KindProgress, r.ID, progressKey(r.ID), text, nil, domain.IfGoneSend)}
}

// Proposal renders a proposal with Approve / Reject for the admin chat
// (analysis.Notifier); the delivery records its message on the proposal.
// Without an admin chat it renders nothing.
func (b *Bot) Proposal(r analysis.Run, p analysis.Proposal) []domain.Message {
	if b.cfg.AdminChatID == 0 {
		return nil
	}
	lang := b.cfg.AdminLang
	kb, err := proposalMarkup(b.deps.Catalog, lang, p.ID)
	if err != nil {
		// Unreachable: a proposal id always fits callback data.
		b.deps.Log.Error("analysis: proposal buttons", "proposal", p.ID, "err", err)
		kb = nil
	}
	return Messages(b.cfg.AdminChatID, domain.KindProposal, p.ID, b.renderProposal(lang, r, p), kb)
}
