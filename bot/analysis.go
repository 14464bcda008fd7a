package bot

import (
	"context"
	"errors"
	"fmt"
	"html"
	"strconv"
	"strings"
	"sync"
	"time"

	tele "gopkg.in/telebot.v3"

	"switchboard/bot/markdown"
	"switchboard/domain"
	"switchboard/domain/analysis"
	"switchboard/locales"
)

// Analysis is what the bot needs from the analysis workflow
// (*analysis.Service implements it).
type Analysis interface {
	Record(ctx context.Context, m analysis.GroupMessage) error
	Edited(ctx context.Context, chatID, messageID int64, text string) error
	TrackChat(ctx context.Context, id int64, title string, canRead bool) error
	Chats(ctx context.Context) ([]analysis.Chat, error)
	NewRun(ctx context.Context, adminID int64, args string) (analysis.Run, error)
	Start(ctx context.Context, id int64, rag bool) (analysis.Run, error)
	Close(ctx context.Context, id int64) (analysis.Run, error)
	Runs(ctx context.Context, page int) ([]analysis.Run, int, error)
	Run(ctx context.Context, id int64) (analysis.Run, error)
	Decide(ctx context.Context, proposalID, adminID int64, approve bool) (analysis.Proposal, analysis.Run, error)
	TurnPage(ctx context.Context, runID int64, page int) (analysis.Run, error)
	AskApproveAll(ctx context.Context, runID int64) (analysis.Run, error)
	CancelApproveAll(ctx context.Context, runID int64) (analysis.Run, error)
	ApproveAll(ctx context.Context, runID, adminID int64) ([]analysis.Proposal, analysis.Run, error)
	RefreshBoard(ctx context.Context, runID int64) error
}

var (
	_ Analysis          = (*analysis.Service)(nil)
	_ analysis.Notifier = (*Renderer)(nil)
)

// Button actions of the analysis workflow. Only admins may press them; the
// handlers check before anything changes.
var (
	actionApprove  = NewAction("pa", 1) // proposal id
	actionReject   = NewAction("pj", 1) // proposal id
	actionRunsPage = NewAction("rp", 1) // page of /runs, from 0
	actionBoard    = NewAction("bp", 2) // run id, board page from 0
	actionAskAll   = NewAction("ba", 1) // run id: approve all remaining?
	actionAllYes   = NewAction("by", 1) // run id: yes, approve them
	actionAllNo    = NewAction("bn", 1) // run id: no
)

// Budgets, in UTF-16 units of escaped HTML, for what group members and the
// LLM wrote. With the fixed texts a proposal stays one message (its buttons
// are edited away in place), and /chats and /runs fit one message each.
const (
	proposalTitleBudget = 300
	proposalDescBudget  = 2600
	// proposalDescShown is the longest description a proposal shows
	// whole; a longer one is an expandable quotation.
	proposalDescShown = 300
	assigneeBudget    = 120
	sourcesShown      = 10
	groupTitleBudget  = 100
	listTitleBudget   = 60
	runErrorBudget    = 600
	keywordsBudget    = 300
	adminNameBudget   = 64
	// progressCells is the width of the progress bar.
	progressCells = 10
	// A board page's proposal: with the fixed texts eight of them and the
	// progress stay one message.
	boardTitleBudget    = 120
	boardDescBudget     = 220
	boardAssigneeBudget = 40
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
// call it before Run (New does, for Deps.Analysis).
//
// The admin chat (ADMIN_CHAT_ID) is where the workflow reports; its own
// messages are never recorded.
func (b *Bot) RegisterAnalysis(a Analysis) {
	u := &analysisUI{b: b, a: a}
	b.groupText = u.record
	b.groupEdit = u.edited
	b.tb.Handle(tele.OnMyChatMember, u.membership)
	b.Handle(Command{Name: "chats", Desc: "cmd.chats", Section: SectionAdminRuns, Role: RoleAdmin, Handle: u.chats})
	b.Handle(Command{Name: "run_new", Desc: "cmd.run_new", Section: SectionAdminRuns, Role: RoleAdmin, Handle: u.runNew})
	b.Handle(Command{Name: "run_start", Desc: "cmd.run_start", Section: SectionAdminRuns, Role: RoleAdmin, Handle: u.runStart})
	b.Handle(Command{Name: "run_close", Desc: "cmd.run_close", Section: SectionAdminRuns, Role: RoleAdmin, Handle: u.runClose})
	b.Handle(Command{Name: "runs", Desc: "cmd.runs", Section: SectionAdminRuns, Role: RoleAdmin, Handle: u.runs})
	b.Handle(Command{Name: "run", Desc: "cmd.run", Section: SectionAdminRuns, Role: RoleAdmin, Handle: u.run})
	// The board and the proposals are in the admin chat; /runs is where
	// an admin asked for it.
	admins := InPrivate | InAdminChat
	b.HandleButtonIn(actionApprove, admins, u.decide(true))
	b.HandleButtonIn(actionReject, admins, u.decide(false))
	b.HandleButtonIn(actionRunsPage, admins, pageTurn(b, u.runsList))
	b.HandleButtonIn(actionBoard, admins, u.turnPage)
	b.HandleButtonIn(actionAskAll, admins, u.askAll())
	b.HandleButtonIn(actionAllYes, admins, u.approveAll())
	b.HandleButtonIn(actionAllNo, admins, u.cancelAll())
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
	m := analysis.GroupMessage{
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
func (u *analysisUI) edited(r *Request) error {
	msg := r.Message()
	if !u.analysed(msg.Chat) || strings.TrimSpace(msg.Text) == "" {
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
	canRead, err := u.canRead(r.Ctx, now)
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
	if err := u.b.queueReply(withPlace(r.Ctx, place{chatID: u.b.cfg.AdminChatID, topic: domain.TopicNotices}), u.b.cfg.AdminChatID, 0, text, nil); err != nil {
		return fmt.Errorf("tell the admin chat about chat %d: %w", chat.ID, err)
	}
	return nil
}

// canRead reports whether the bot sees a group's ordinary messages: as an
// admin it always does; otherwise only with privacy mode disabled, which
// getMe reports (asked now, since it can change while the bot runs).
func (u *analysisUI) canRead(ctx context.Context, status tele.MemberStatus) (bool, error) {
	if status == tele.Administrator || status == tele.Creator {
		return true, nil
	}
	me, err := u.b.tg.GetMe(ctx)
	if err != nil {
		return false, fmt.Errorf("getMe: %w", err)
	}
	return me.CanReadAllGroupMessages, nil
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
		last := locales.HTML(r.T("chats.never"))
		if !c.LastAt.IsZero() {
			last = r.Time(c.LastAt)
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

// runInputError renders the rejection of /run_new's arguments followed by the
// usage, unless it is the usage.
func runInputError(r *Request, e *domain.InputError) string {
	const usage = "run_new.usage"
	msg := r.InputText(e, locales.HTML(clip(strings.ToValidUTF8(e.Arg(), ""), argBudget)))
	if e.Key != usage {
		msg += "\n\n" + r.T(usage)
	}
	return msg
}

func (u *analysisUI) runNew(r *Request) error {
	run, err := u.a.NewRun(r.Ctx, r.User.ID, commandArgs(r.Message()))
	var ie *domain.InputError
	var ue *analysis.UnclosedError
	switch {
	case errors.As(err, &ie):
		return r.Reply(runInputError(r, ie), nil)
	case errors.As(err, &ue):
		return r.Reply(u.unclosed(r, ue.IDs), nil)
	case err != nil:
		return err
	}
	if u.b.inAdminChat(r.Message().Chat) {
		// The admin chat has just read the run's creation as an event; the
		// reply adds only what to do next instead of saying it twice.
		return r.Reply(r.T("run_new.next", locales.Data{"Run": run.ID}), nil)
	}
	return r.Reply(r.T("run_new.created", locales.Data{
		"Run": run.ID, "Filters": locales.HTML(u.b.filtersText(r.Lang, r.Zone, run)),
	}), nil)
}

// unclosed names the runs in the way of a new one with their states.
func (u *analysisUI) unclosed(r *Request, ids []int64) string {
	var lines []string
	for _, id := range ids {
		state := "?"
		if run, err := u.a.Run(r.Ctx, id); err == nil {
			state = runStateKeys.name(u.b.deps.Catalog, r.Lang, run.State)
		} else if !errors.Is(err, domain.ErrNotFound) {
			u.b.deps.Log.Warn("analysis: load unclosed run", "run", id, "err", err)
		}
		lines = append(lines, "• "+r.T("run.ref", locales.Data{"Run": id, "State": state}))
	}
	return r.T("run_new.unclosed", locales.Data{"Runs": locales.HTML(strings.Join(lines, "\n"))})
}

// runArgsError says what is wrong with a run command's arguments: none
// given (the usage), a run number that is not one, or a word after it that
// the command does not take (extra names the one it does, if any).
func runArgsError(r *Request, usage, extra string) string {
	fields := strings.Fields(commandArgs(r.Message()))
	if len(fields) == 0 {
		return r.T(usage)
	}
	_, rest, ok := runArgs(r)
	if !ok {
		return r.T("run.error_id", locales.Data{"Value": clipRunes(fields[0], maxEcho)}) + "\n" + r.T(usage)
	}
	key := "run.error_extra"
	if extra != "" {
		key = "run.error_extra_rag"
	}
	return r.T(key, locales.Data{"Value": clipRunes(strings.Join(rest, " "), maxEcho)}) + "\n" + r.T(usage)
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
		return r.Reply(runArgsError(r, "run_start.usage", "rag"), nil)
	}
	run, err := u.a.Start(r.Ctx, id, rag)
	return u.runAnswer(r, id, run, err, "run_start.error_state", func(run analysis.Run) (string, string) {
		key := "run_start.ok"
		if run.RAG {
			key = "run_start.ok_rag"
		}
		text := r.T(key, locales.Data{"Run": run.ID})
		if u.b.cfg.AdminChatID == 0 {
			text += "\n" + r.T("run_start.no_admin_chat")
		}
		return text, ""
	})
}

// runAnswer answers a command on run id that returned run and err: no
// such run, or the run in a state the command does not take (stateKey);
// in the admin chat nothing, since the run's own messages answer there
// (the "run started" event and the board next, or the board edited to
// its final state in the close's transaction) and a reply would say it
// twice; elsewhere ok's text and rich form ("": none).
func (u *analysisUI) runAnswer(r *Request, id int64, run analysis.Run, err error, stateKey string, ok func(analysis.Run) (string, string)) error {
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return r.Reply(r.T("run.not_found", locales.Data{"Run": id}), nil)
	case errors.Is(err, analysis.ErrState):
		return r.Reply(r.T(stateKey, locales.Data{
			"Run": id, "State": runStateKeys.name(u.b.deps.Catalog, r.Lang, run.State),
		}), nil)
	case err != nil:
		return err
	}
	if u.b.inAdminChat(r.Message().Chat) {
		return nil
	}
	text, rich := ok(run)
	return r.ReplyRich(text, rich, nil)
}

func (u *analysisUI) runClose(r *Request) error {
	id, rest, ok := runArgs(r)
	if !ok || len(rest) > 0 {
		return r.Reply(runArgsError(r, "run_close.usage", ""), nil)
	}
	run, err := u.a.Close(r.Ctx, id)
	if pe := (*analysis.PendingError)(nil); errors.As(err, &pe) {
		return r.Reply(r.T("run_close.error_pending", locales.Data{"Run": id, "Pending": pe.Pending}), nil)
	}
	return u.runAnswer(r, id, run, err, "run_close.error_state", func(run analysis.Run) (string, string) {
		m := metricsOf(run)
		text := r.T("run_close.ok", locales.Data{
			"Run": run.ID, "Total": m.ProposalsTotal, "Approval": percent(m.ApprovalRate), "Rejection": percent(m.RejectionRate),
		})
		if m.ProposalsTotal == 0 {
			return text, ""
		}
		return text, metricsRich(r, run, m)
	})
}

// metricsRich is a closed run's figures as a rich message: a table of its
// proposals, how many were approved and rejected, and their shares.
func metricsRich(r *Request, run analysis.Run, m analysis.Metrics) string {
	var d richDoc
	d.para(r.T("run_close.closed", locales.Data{"Run": run.ID}))
	d.table([]string{"", r.T("run.col_count"), r.T("run.col_share")}, [][]string{
		{r.T("run.row_proposals"), strconv.Itoa(m.ProposalsTotal), "100%"},
		{r.T("run.row_approved"), strconv.Itoa(run.ProposalsApproved), percent(m.ApprovalRate) + "%"},
		{r.T("run.row_rejected"), strconv.Itoa(run.ProposalsRejected), percent(m.RejectionRate) + "%"},
	})
	return d.String()
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
	return r.ReplyRendered(u.runsList(r, 0))
}

// runsList is one page of /runs with ◀ ▶ buttons (pageTurn); it must stay
// one message because the buttons edit it in place. A page past the end
// shows the last.
func (u *analysisUI) runsList(r *Request, page int) (string, *tele.ReplyMarkup, error) {
	p, err := pageOf(page, analysis.PageSize, func(page int) ([]analysis.Run, int, error) { return u.a.Runs(r.Ctx, page) })
	if err != nil {
		return "", nil, err
	}
	if p.total == 0 {
		return r.T("runs.empty"), nil, nil
	}
	cat := u.b.deps.Catalog
	var sb strings.Builder
	sb.WriteString(r.T("runs.header", locales.Data{"Page": p.page + 1, "Pages": p.pages, "Total": p.total}))
	for _, run := range p.items {
		sb.WriteString("\n" + r.T("runs.line", locales.Data{
			"Run": run.ID, "State": runStateKeys.name(cat, r.Lang, run.State),
			"Created": r.Time(run.CreatedAt), "Window": u.b.windowText(r.Lang, run.Filters.Window),
			"Total": run.ProposalsTotal, "Approved": run.ProposalsApproved,
			"Rejected": run.ProposalsRejected, "Pending": run.ProposalsPending,
		}))
	}
	kb, err := pageTurns(r, actionRunsPage, p.page, p.pages, "runs.newer", "runs.older")
	if err != nil {
		return "", nil, err
	}
	return sb.String(), kb, nil
}

func (u *analysisUI) run(r *Request) error {
	id, rest, ok := runArgs(r)
	if !ok || len(rest) > 0 {
		return r.Reply(runArgsError(r, "run.usage", ""), nil)
	}
	run, err := u.a.Run(r.Ctx, id)
	if errors.Is(err, domain.ErrNotFound) {
		return r.Reply(r.T("run.not_found", locales.Data{"Run": id}), nil)
	}
	if err != nil {
		return err
	}
	return r.Reply(u.b.renderRun(r.Lang, r.Zone, run), nil)
}

// renderRun is /run: every field of a run, its times in zone, the
// reader's.
func (b *Bot) renderRun(lang string, zone *time.Location, r analysis.Run) string {
	cat := b.deps.Catalog
	t := func(key string, data locales.Data) string { return cat.T(lang, key, data) }
	rag := cat.T(lang, "run.rag_off")
	if r.RAG {
		rag = cat.T(lang, "run.rag_on")
	}
	lines := []string{
		t("run.header", locales.Data{"Run": r.ID, "State": runStateKeys.name(cat, lang, r.State)}),
		t("run.created", locales.Data{"Created": b.timeTag(lang, r.CreatedAt, zone), "Admin": locales.HTML(adminName(domain.User{
			ID: r.CreatedBy, FirstName: r.CreatorName, Username: r.CreatorUsername,
		}))}),
		t("run.filters", locales.Data{"Filters": locales.HTML(b.filtersText(lang, zone, r))}),
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
			lines = append(lines, t(at.key, locales.Data{"Time": b.timeTag(lang, at.when, zone)}))
		}
	}
	if e := r.ErrorLog; e != nil {
		data := locales.Data{
			"Step": stepKeys.name(b.cat, lang, e.Step), "Batch": e.Batch,
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

// filtersText is a run's window and filters in one line of escaped HTML,
// the window's ends in zone, the reader's.
func (rd *Renderer) filtersText(lang string, zone *time.Location, r analysis.Run) string {
	cat := rd.cat
	parts := []string{cat.T(lang, "run.filter_window", locales.Data{
		"Window": rd.windowText(lang, r.Filters.Window), "From": rd.timeTag(lang, r.From, zone), "To": rd.timeTag(lang, r.To, zone),
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

// windowText names a run's window in words: /run_new offers a day and a
// week; any other (which /run_new does not make) reads in hours.
func (rd *Renderer) windowText(lang string, d time.Duration) string {
	cat := rd.cat
	switch d {
	case 24 * time.Hour:
		return cat.T(lang, "run.window_24h")
	case 7 * 24 * time.Hour:
		return cat.T(lang, "run.window_7d")
	}
	return cat.T(lang, "run.window_hours", locales.Data{"Hours": int64(d.Round(time.Hour) / time.Hour)})
}

// runStateKeys names every run state; spelled out so the catalogue test
// sees them used.
var runStateKeys = stateKeys[analysis.State]{
	analysis.Pending:   "analysis.state.pending",
	analysis.Running:   "analysis.state.running",
	analysis.Completed: "analysis.state.completed",
	analysis.Reviewed:  "analysis.state.reviewed",
	analysis.Closed:    "analysis.state.closed",
	analysis.Failed:    "analysis.state.failed",
	analysis.Cancelled: "analysis.state.cancelled",
}

// --- proposal buttons ----------------------------------------------------------

// decide is Approve (true) and Reject (false). Only admins may press them;
// a proposal decided already is refused with what it became. The board
// shows the decision with its next edit (written with the decision); the
// toast answers at once.
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
		if msg := r.Callback().Message; msg != nil && run.ProgressMessageID != 0 && msg.ID != run.ProgressMessageID {
			// A proposal's own message, from before the board: it shows
			// its decision in place. Not while the board's message id is
			// unknown: the board delivered, its delivery not yet recorded
			// (a press as the board appears, a slow database), would be
			// taken for one and overwritten, its buttons gone.
			lang := u.b.cfg.AdminLang
			key := "proposal.decided_rejected"
			if approve {
				key = "proposal.decided_approved"
			}
			text := u.b.renderProposal(lang, run, p) + "\n\n" +
				u.b.deps.Catalog.T(lang, key, locales.Data{"Admin": locales.HTML(adminName(r.User))})
			u.b.editPressed(r, fitMessage(text), nil)
		}
		toast := "board.rejected_toast"
		if approve {
			toast = "board.approved_toast"
		}
		return r.Toast(r.T(toast, locales.Data{"N": p.Ordinal}))
	}
}

// turnPage shows another page of a run's proposals on its board.
func (u *analysisUI) turnPage(r *Request, cb Callback) error {
	if !r.Admin {
		return r.Forbidden()
	}
	run, err := u.a.TurnPage(r.Ctx, cb.IDs[0], int(cb.IDs[1]))
	if errors.Is(err, domain.ErrNotFound) {
		return r.Alert("error.callback_invalid")
	}
	if err != nil {
		return err
	}
	page := min(int(cb.IDs[1]), analysis.PagesOf(run.ProposalsTotal)-1)
	return r.Toast(r.T("board.page_toast", locales.Data{
		"Page": page + 1, "Pages": analysis.PagesOf(run.ProposalsTotal)}))
}

// boardPress is a board button that changes the run: admins only; a run
// gone is an invalid callback, a run no longer in the state the press
// needs gets the stale alert, a change made gets its toast.
func (u *analysisUI) boardPress(stale string, change func(r *Request, runID int64) (string, locales.Data, error)) CallbackHandler {
	return func(r *Request, cb Callback) error {
		if !r.Admin {
			return r.Forbidden()
		}
		toast, data, err := change(r, cb.IDs[0])
		switch {
		case errors.Is(err, analysis.ErrState):
			return r.Alert(stale)
		case errors.Is(err, domain.ErrNotFound):
			return r.Alert("error.callback_invalid")
		case err != nil:
			return err
		}
		return r.Toast(r.T(toast, data))
	}
}

// askAll makes the board ask to confirm approving every proposal left.
func (u *analysisUI) askAll() CallbackHandler {
	return u.boardPress("board.nothing_to_approve", func(r *Request, run int64) (string, locales.Data, error) {
		_, err := u.a.AskApproveAll(r.Ctx, run)
		return "board.confirm_toast", nil, err
	})
}

// approveAll is the confirmation's yes: every proposal still pending is
// approved. A confirmation answered already (or withdrawn) is refused.
func (u *analysisUI) approveAll() CallbackHandler {
	return u.boardPress("board.confirm_stale", func(r *Request, run int64) (string, locales.Data, error) {
		ps, _, err := u.a.ApproveAll(r.Ctx, run, r.User.ID)
		return "board.all_approved_toast", locales.Data{"Count": len(ps)}, err
	})
}

// cancelAll is the confirmation's no.
func (u *analysisUI) cancelAll() CallbackHandler {
	return u.boardPress("board.confirm_stale", func(r *Request, run int64) (string, locales.Data, error) {
		_, err := u.a.CancelApproveAll(r.Ctx, run)
		return "board.cancelled_toast", nil, err
	})
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

// stepKeys name an executor's step in the admins' language; spelled out so
// the catalogue test sees them used. A step not listed shows as stored.
var stepKeys = stateKeys[string]{
	analysis.StepFetch:       "analysis.step.fetch",
	analysis.StepBatch:       "analysis.step.batch",
	analysis.StepProposals:   "analysis.step.proposals",
	analysis.StepSave:        "analysis.step.save",
	analysis.StepComplete:    "analysis.step.complete",
	analysis.StepInterrupted: "analysis.step.interrupted",
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
	title := clip(oneLine(markdown.Text(p.Title)), proposalTitleBudget)
	if title == "" {
		title = "—"
	}
	lines := []string{
		cat.T(lang, "proposal.header", locales.Data{"Proposal": p.ID, "Run": r.ID}),
		"<b>" + title + "</b>",
	}
	if d := clipHTML(markdown.HTML(p.Description), proposalDescBudget); d != "" {
		if utf16Len(d) > proposalDescShown {
			// A quotation the reader expands (Bot API 7.3, older than any
			// server the bot supports); a quotation inside it would be
			// a nested one, which Telegram does not take.
			d = "<blockquote expandable>" + strings.NewReplacer("<blockquote>", "", "</blockquote>", "").Replace(d) + "</blockquote>"
		}
		lines = append(lines, d)
	}
	lines = append(lines, "")
	priority := clip(oneLine(p.Priority), 20)
	if k, ok := priorityKeys[p.Priority]; ok {
		priority = cat.T(lang, k)
	}
	lines = append(lines, cat.T(lang, "proposal.priority", locales.Data{"Priority": locales.HTML(priority)}))
	if a := clip(oneLine(markdown.Text(p.Assignee)), assigneeBudget); a != "" {
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

// clipHTML cuts Telegram HTML to at most budget UTF-16 units, marking a
// cut with "…"; the tags open at the cut are closed (Split).
func clipHTML(s string, budget int) string {
	s = strings.TrimSpace(s)
	if utf16Len(s) <= budget {
		return s
	}
	return Split(s, budget-1)[0] + "…"
}

// --- analysis.Notifier ---------------------------------------------------------

// runEventKeys give every run event posted to the admin chat its line;
// spelled out so the catalogue test sees them used. progress_updated and
// proposals_created are not among them: the board shows them (Board).
var runEventKeys = map[analysis.EventKind]string{
	analysis.EventCreated:   "analysis.event.run_created",
	analysis.EventStarted:   "analysis.event.run_started",
	analysis.EventCompleted: "analysis.event.run_completed",
	analysis.EventFailed:    "analysis.event.run_failed",
	analysis.EventClosed:    "analysis.event.run_closed",
}

// renderRunEvent is one line of the admin chat's log.
func (rd *Renderer) renderRunEvent(lang string, e analysis.Event) string {
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
		data["Filters"] = locales.HTML(rd.filtersText(lang, rd.AdminZone(), r))
	case analysis.EventFailed:
		step, batch, msg := "?", 0, ""
		if r.ErrorLog != nil {
			step, batch, msg = r.ErrorLog.Step, r.ErrorLog.Batch, r.ErrorLog.Error
		}
		data["Step"], data["Batch"] = stepKeys.name(rd.cat, lang, step), batch
		data["Error"] = locales.HTML(clip(oneLine(msg), runErrorBudget))
		if batch > 0 {
			key = "analysis.event.run_failed_batch"
		}
	case analysis.EventCompleted:
		if r.ProposalsTotal == 0 {
			// "Decide them on the board" would send admins to a board
			// with nothing on it.
			key = "analysis.event.run_completed_none"
		}
	case analysis.EventClosed:
		m := metricsOf(r)
		data["Total"], data["Approval"], data["Rejection"] = m.ProposalsTotal, percent(m.ApprovalRate), percent(m.RejectionRate)
	}
	return rd.cat.T(lang, key, data)
}

// Event renders a run event for the admin chat (analysis.Notifier): its
// line and, for a run that ended or closed, its board's edit. A closed
// run's board, edited to its final state, is the only message of the
// close: a line saying so beside it would repeat it. progress_updated and
// proposals_created render nothing (the board shows them), and nothing is
// rendered without an admin chat.
func (rd *Renderer) Event(e analysis.Event) []domain.Message {
	if rd.rc.AdminChatID == 0 || e.Kind == analysis.EventProgress || e.Kind == analysis.EventProposalsCreated {
		return nil
	}
	var out []domain.Message
	if e.Kind != analysis.EventClosed || !progressPosted(e.Run) {
		out = Messages(rd.rc.AdminChatID, domain.KindRunEvent, e.Run.ID, rd.renderRunEvent(rd.rc.AdminLang, e), nil)
	}
	switch e.Kind {
	case analysis.EventCompleted, analysis.EventFailed, analysis.EventClosed:
		if progressPosted(e.Run) {
			rv := e.Board
			if rv.Run.ID != e.Run.ID {
				rv = analysis.Review{Run: e.Run}
			}
			out = append(out, rd.Board(rv, false)...)
		}
	}
	return out
}

// progressPosted reports whether a run's progress message was written: it
// is written with the window's counts (Runs.SetProgress), which a completed run
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

// progressTexts are the progress message's heading and lines by the
// run's state; the lines give the proposals so far while it runs, their
// number once it ended, and the decisions once it is closed.
var progressTexts = map[analysis.State]struct{ head, body string }{
	analysis.Running:   {"analysis.progress.running", "analysis.progress.body"},
	analysis.Completed: {"analysis.progress.completed", "analysis.progress.body_done"},
	analysis.Failed:    {"analysis.progress.failed", "analysis.progress.body_done"},
	analysis.Closed:    {"analysis.progress.closed", "analysis.progress.body_closed"},
}

// renderProgress is the progress message: a bar over the batches, then
// batches, messages and proposals (see progressTexts).
func (rd *Renderer) renderProgress(lang string, r analysis.Run) string {
	cat := rd.cat
	pct := 0
	if r.Batches > 0 {
		pct = min(max(r.BatchesDone*100/r.Batches, 0), 100)
	}
	if r.State == analysis.Completed || r.State == analysis.Closed {
		pct = 100
	}
	filled := pct * progressCells / 100
	bar := strings.Repeat("▓", filled) + strings.Repeat("░", progressCells-filled) + " " + strconv.Itoa(pct) + "%"
	texts, ok := progressTexts[r.State]
	if !ok {
		texts = progressTexts[analysis.Running]
	}
	m := metricsOf(r)
	return cat.T(lang, texts.head, locales.Data{"Run": r.ID}) + "\n" + cat.T(lang, texts.body, locales.Data{
		"Bar": bar, "Done": r.BatchesDone, "Batches": r.Batches,
		"Processed": r.Processed, "Filtered": r.Filtered, "Messages": r.Messages,
		"Total": r.ProposalsTotal, "Approved": r.ProposalsApproved, "Rejected": r.ProposalsRejected,
		"Approval": percent(m.ApprovalRate), "Rejection": percent(m.RejectionRate),
	})
}

// progressKey names a run's board for its edits; the board's edits go in
// a lane of that name, paced by Config.BoardEvery.
func progressKey(runID int64) string { return MessageKey(domain.KindProgress, runID) }

// Board renders the run's board (analysis.Notifier): the progress, a page
// of the proposals with a ✅ / ❌ pair for each one pending, ◀ ▶ between
// pages and, once the run is completed, "approve all remaining" with its
// confirmation. The first time it is the message itself; afterwards an
// edit in the board's own lane, so it waits out its interval without
// holding the admin chat's other messages, coalesces with the edits
// before it (the latest state wins) and posts the board anew if it is
// gone. Without an admin chat it renders nothing.
func (rd *Renderer) Board(rv analysis.Review, first bool) []domain.Message {
	if rd.rc.AdminChatID == 0 {
		return nil
	}
	lang := rd.rc.AdminLang
	text := rd.renderProgress(lang, rv.Run)
	if page := rd.renderPage(lang, rv); page != "" {
		text += "\n\n" + page
	}
	if r := rv.Run; r.State == analysis.Completed && r.ProposalsPending == 0 {
		// Every proposal decided (or none made): the board's buttons are
		// gone, so it says what is left to do.
		text += "\n\n" + rd.cat.T(lang, "board.close_hint", locales.Data{"Run": r.ID})
	}
	kb, err := rd.boardMarkup(lang, rv)
	if err != nil {
		// Unreachable: run and proposal ids always fit callback data.
		rd.log.Error("analysis: board buttons", "run", rv.Run.ID, "err", err)
		kb = nil
	}
	text = fitMessage(text)
	id := rv.Run.ID
	if first {
		return []domain.Message{Keyed(rd.rc.AdminChatID, domain.KindProgress, id, progressKey(id), text, kb)}
	}
	m := EditOf(rd.rc.AdminChatID, domain.KindProgress, id, progressKey(id), text, kb, domain.IfGoneSend)
	m.Lane, m.Every = progressKey(id), rd.rc.BoardEvery
	return []domain.Message{m}
}

// decisionMarks show a proposal's decision on the board.
var decisionMarks = map[analysis.Decision]string{
	analysis.Approved: "✅",
	analysis.Rejected: "❌",
}

// renderPage is the board's page of proposals: a header with the counts,
// then each proposal numbered, marked, clipped to fit.
func (rd *Renderer) renderPage(lang string, rv analysis.Review) string {
	r := rv.Run
	if r.ProposalsTotal == 0 || len(rv.Proposals) == 0 {
		return ""
	}
	cat := rd.cat
	lines := []string{cat.T(lang, "board.page", locales.Data{
		"From": rv.Proposals[0].Ordinal, "To": rv.Proposals[len(rv.Proposals)-1].Ordinal, "Total": r.ProposalsTotal,
		"Approved": r.ProposalsApproved, "Rejected": r.ProposalsRejected, "Pending": r.ProposalsPending,
	})}
	if r.ReviewConfirm && r.State == analysis.Completed && r.ProposalsPending > 0 {
		lines = append(lines, "", cat.T(lang, "board.confirm", locales.Data{"Count": r.ProposalsPending}))
	}
	for _, p := range rv.Proposals {
		mark, ok := decisionMarks[p.Decision]
		if !ok {
			mark = "⏳"
		}
		title := clip(oneLine(markdown.Text(p.Title)), boardTitleBudget)
		if title == "" {
			title = "—"
		}
		head := strconv.Itoa(p.Ordinal) + ". " + mark + " <b>" + title + "</b>"
		var meta []string
		if k, ok := priorityKeys[p.Priority]; ok {
			meta = append(meta, cat.T(lang, k))
		}
		if a := clip(oneLine(markdown.Text(p.Assignee)), boardAssigneeBudget); a != "" {
			meta = append(meta, a)
		}
		if d := clip(oneLine(p.Deadline), 20); d != "" {
			meta = append(meta, cat.T(lang, "board.due", locales.Data{"Deadline": locales.HTML(d)}))
		}
		if p.FiledNumber > 0 {
			meta = append(meta, issueLink(p.FiledURL, p.FiledNumber))
		}
		if len(meta) > 0 {
			head += " · " + strings.Join(meta, " · ")
		}
		lines = append(lines, "", head)
		if l := p.Like; l.Number > 0 {
			lines = append(lines, cat.T(lang, "board.looks_like", locales.Data{
				"Link":  locales.HTML(issueLink(l.URL, l.Number)),
				"Title": locales.HTML(clip(oneLine(l.Title), boardTitleBudget)),
			}))
		}
		if d := clip(oneLine(markdown.Text(p.Description)), boardDescBudget); d != "" && mark == "⏳" {
			lines = append(lines, "<i>"+d+"</i>")
		}
	}
	return strings.Join(lines, "\n")
}

// issueLink is a tracker's issue as the board shows it: #number, linked
// where the tracker gave a web address (anything else in an href would
// make Telegram refuse the whole board).
func issueLink(url string, number int) string {
	n := "#" + strconv.Itoa(number)
	if !strings.HasPrefix(url, "https://") && !strings.HasPrefix(url, "http://") {
		return n
	}
	return `<a href="` + html.EscapeString(url) + `">` + n + `</a>`
}

// boardMarkup is the board's buttons: a ✅ / ❌ pair for each pending
// proposal of the page, two proposals a row; ⏮ ◀ ▶ ⏭ to the other pages; and on a completed run with proposals pending, "approve all
// remaining" or, once pressed, its confirmation.
func (b *Renderer) boardMarkup(lang string, rv analysis.Review) (*tele.ReplyMarkup, error) {
	cat := b.cat
	r := rv.Run
	var rows [][]tele.InlineButton
	var row []tele.InlineButton
	for _, p := range rv.Proposals {
		if _, decided := decisionMarks[p.Decision]; decided {
			continue
		}
		n := locales.Data{"N": p.Ordinal}
		pair, err := buttonPair(yesNo, cat.T(lang, "board.button_approve", n), actionApprove,
			cat.T(lang, "board.button_reject", n), actionReject, p.ID)
		if err != nil {
			return nil, err
		}
		row = append(row, pair...)
		if len(row) == 4 {
			rows, row = append(rows, row), nil
		}
	}
	if len(row) > 0 {
		rows = append(rows, row)
	}
	for _, p := range rv.Proposals {
		if p.Like.Number == 0 {
			continue
		}
		// A pushed proposal that looks like an open issue: link it there,
		// or file it anyway. A row of its own, the choice being about one.
		n := locales.Data{"N": p.Ordinal, "Number": p.Like.Number}
		pair, err := buttonPair(confirmGo, cat.T(lang, "board.button_link", n), actionTaskLink,
			cat.T(lang, "board.button_file", n), actionTaskFile, p.ID)
		if err != nil {
			return nil, err
		}
		rows = append(rows, pair)
	}
	if pages := rv.Pages(); pages > 1 {
		// ⏮ and ⏭ jump to the ends, where they are more than one step
		// away: the last page holds the newest proposals.
		nav, err := pageRow(cat, lang, actionBoard, []int64{r.ID},
			pageButton{"board.button_first", 0, rv.Page > 1},
			pageButton{"board.button_prev", rv.Page - 1, rv.Page > 0},
			pageButton{"board.button_next", rv.Page + 1, rv.Page < pages-1},
			pageButton{"board.button_last", pages - 1, rv.Page < pages-2})
		if err != nil {
			return nil, err
		}
		rows = append(rows, nav)
	}
	if r.State == analysis.Completed && r.ProposalsPending > 0 {
		count := locales.Data{"Count": r.ProposalsPending}
		if r.ReviewConfirm {
			pair, err := buttonPair(confirmGo, cat.T(lang, "board.button_confirm", count), actionAllYes,
				cat.T(lang, "board.button_cancel"), actionAllNo, r.ID)
			if err != nil {
				return nil, err
			}
			rows = append(rows, pair)
		} else {
			ask, err := Encode(actionAskAll, r.ID)
			if err != nil {
				return nil, err
			}
			rows = append(rows, []tele.InlineButton{{Text: cat.T(lang, "board.button_all", count), Data: ask}})
		}
	}
	if len(rows) == 0 {
		return nil, nil
	}
	return &tele.ReplyMarkup{InlineKeyboard: rows}, nil
}
