package bot

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	tele "gopkg.in/telebot.v3"

	"switchboard/bot/delivery"
	"switchboard/domain"
	"switchboard/domain/dispatch"
	"switchboard/domain/vacancy"
	"switchboard/locales"
	"switchboard/storage"
)

// registerCore adds what every user has: greeting, help, language, and the
// routes for text, buttons and unknown commands. Workflows add the rest.
func (b *Bot) registerCore() {
	b.Handle(Command{Name: "start", Desc: "cmd.start", Handle: b.start})
	b.Handle(Command{Name: "help", Desc: "cmd.help", Handle: b.help})
	b.Handle(Command{Name: "lang", Desc: "cmd.lang", Handle: b.lang})
	b.Handle(Command{Name: "timezone", Desc: "cmd.timezone", Handle: b.timezone})
	b.Handle(Command{Name: "status", Desc: "cmd.status", Role: RoleAdmin, Section: SectionAdminSystem, Handle: b.status})
	b.HandleButton(actionStartStep, b.startStep)
	b.tb.Handle(tele.OnText, b.textRoute(b.hint))
	b.tb.Handle(tele.OnCallback, b.callback)
	b.tb.Handle(tele.OnEdited, b.editedRoute)
	b.tb.Handle(tele.OnLocation, b.locationRoute)
	// Whatever no workflow reads: OnMedia takes a photo, document,
	// sticker, voice note, video, audio, animation or video note that
	// has no handler of its own.
	for _, kind := range []string{tele.OnMedia, tele.OnContact, tele.OnDice, tele.OnVenue} {
		b.tb.Handle(kind, b.unreadRoute)
	}
}

// unreadRoute answers a message of a kind nothing reads (unread).
func (b *Bot) unreadRoute(c tele.Context) error {
	r := requestOf(c)
	if r == nil {
		return nil
	}
	return b.unread(r)
}

// unread answers, in a private chat, a message the bot does not read: a
// sticker, a voice note, a video, a contact, a poll, a dice, or a photo,
// document or location no workflow takes from this user. Left unanswered,
// the user would wait for a reply that never comes, and a caption's
// question would be lost without a word. An album is answered once, not
// once per photo: Telegram delivers its items as messages of their own,
// and the answer's outbox origin names the album, so the items after the
// first (on whichever replica, after whatever crash) write nothing. In a
// group such messages are the members' own business: nothing is said.
func (b *Bot) unread(r *Request) error {
	msg := r.Message()
	if msg == nil || !msg.Private() {
		return nil
	}
	if msg.AlbumID == "" {
		return b.queueReply(r.Ctx, msg.Chat.ID, msg.ID, r.T("error.unread_kind"), nil)
	}
	msgs := Messages(msg.Chat.ID, domain.KindReply, 0, r.T("error.unread_kind"), nil)
	for i := range msgs {
		msgs[i].Origin = fmt.Sprintf("album:%d:%s.%d", msg.Chat.ID, msg.AlbumID, i)
	}
	if len(msgs) > 0 {
		msgs[0].ReplyTo = msg.ID
	}
	return b.queueMessages(r.Ctx, msg.Chat.ID, msgs)
}

// editedRoute takes every edited message: a group's to b.groupEdit (the
// analysis workflow), a private live location's move to b.location (the
// dispatch workflow); any other private edit is told it was not read
// (nothing takes a correction: the memory chat answered the text as
// first sent, a command ran as first typed); anything else is left alone.
func (b *Bot) editedRoute(c tele.Context) error {
	r := requestOf(c)
	if r == nil || r.Message() == nil {
		return nil
	}
	switch msg := r.Message(); {
	case msg.Private() && msg.Location != nil && b.location != nil:
		return b.location(r, true)
	case !msg.Private() && b.groupEdit != nil:
		return b.groupEdit(r)
	case msg.Private() && msg.Location == nil:
		// The answer, if any, was to the text as first sent: say so,
		// rather than let the user believe the correction was read.
		return b.queueReply(r.Ctx, msg.Chat.ID, msg.ID, r.T("error.edit_unread"), nil)
	}
	return nil
}

// locationRoute takes a location sent in a private chat to b.location (the
// dispatch workflow: a master on the way shares theirs with the customer).
func (b *Bot) locationRoute(c tele.Context) error {
	r := requestOf(c)
	if r == nil || r.Message() == nil || !r.Message().Private() {
		return nil
	}
	if b.location == nil {
		return b.unread(r)
	}
	return b.location(r, false)
}

// actionStartStep is a button under /start's greeting; its id is a first
// step (startSteps), which shows the usage of the command it names.
var actionStartStep = NewAction("ss", 1)

// startSteps are the commands /start's buttons run without arguments:
// each answers with its usage (or, once set, the user's current value).
var startSteps = map[int64]string{1: "profile", 2: "search", 3: "master", 4: "help"}

// maxStartPayload bounds a deep link's payload in the log (Telegram's own
// limit is 64 characters).
const maxStartPayload = 64

// start greets the user with what the bot does for their roles and a
// first step as buttons. A deep link's payload ("/start profile", from a
// group's pointer to the private chat) that names a command runs it
// without arguments; any other payload (an advert's "ref_…") is only
// logged as the source.
func (b *Bot) start(r *Request) error {
	if payload := strings.TrimSpace(r.Message().Payload); payload != "" {
		if token, ok := dispatch.OrderToken(payload); ok && b.joinOrder != nil {
			// An order's link: a capability, not to be logged.
			return b.joinOrder(r, token)
		}
		b.deps.Log.Info("start with a payload", "user", r.User.ID, "source", clipRunes(oneLine(payload), maxStartPayload))
		if cmd, ok := b.lookup(payload); ok && cmd.Name != "start" {
			return b.runBare(r, cmd)
		}
	}
	name := r.User.FirstName
	if name == "" {
		name = r.User.Username
	}
	parts := []string{r.T("start.hello", locales.Data{"Name": name})}
	var rows [][]tele.InlineButton
	step := func(text string, id int64) tele.InlineButton {
		data, err := Encode(actionStartStep, id)
		if err != nil {
			panic(err) // a registered action with one id always encodes
		}
		return tele.InlineButton{Text: text, Data: data}
	}
	if _, ok := b.lookup("profile"); ok {
		parts = append(parts, r.T("start.jobs"))
		rows = append(rows, []tele.InlineButton{step(r.T("start.button_profile"), 1), step(r.T("start.button_search"), 2)})
	}
	if _, ok := b.lookup("memory"); ok {
		parts = append(parts, r.T("start.memory"))
	}
	if b.masters != nil {
		if b.isMaster(r) {
			parts = append(parts, r.T("start.master"))
			rows = append(rows, []tele.InlineButton{step(r.T("start.button_master_card"), 3)})
		} else {
			parts = append(parts, r.T("start.master_join"))
			rows = append(rows, []tele.InlineButton{step(r.T("start.button_master_join"), 3)})
		}
	}
	if r.Admin {
		parts = append(parts, r.T("start.admin"))
		rows = append(rows, []tele.InlineButton{step(r.T("start.button_admin"), 4)})
	}
	parts = append(parts, r.T("start.more"))
	var kb *tele.ReplyMarkup
	if len(rows) > 0 {
		kb = &tele.ReplyMarkup{InlineKeyboard: rows}
	}
	return r.Reply(strings.Join(parts, "\n\n"), kb)
}

// startStep is a press of a /start button: the step's command runs as if
// the user had sent it without arguments.
func (b *Bot) startStep(r *Request, cb Callback) error {
	cmd, ok := b.lookup(startSteps[cb.IDs[0]])
	if !ok {
		return r.Alert("error.callback_invalid")
	}
	if err := b.runBare(r, cmd); err != nil {
		return err
	}
	return r.Ack()
}

// bareContext is an update seen as the bare command msg: a command run
// from a button or a deep link reads its arguments from msg, not from the
// message that carried the button or the payload.
type bareContext struct {
	Inbound
	msg *tele.Message
}

func (c bareContext) Message() *tele.Message { return c.msg }

// runBare runs cmd as if the user had sent it, without arguments, in this
// chat, with the usual checks of place and role.
func (b *Bot) runBare(r *Request, cmd Command) error {
	msg := &tele.Message{Text: "/" + cmd.Name, Chat: r.Chat(), Sender: r.Sender()}
	if m := r.Message(); m != nil && r.Callback() == nil {
		msg.ID = m.ID
	}
	bare := *r
	bare.Inbound = bareContext{Inbound: r.Inbound, msg: msg}
	return b.run(&bare, cmd)
}

func (b *Bot) help(r *Request) error {
	return r.Reply(b.helpText(r), nil)
}

// maxEcho is how much of what the user typed an error repeats.
const maxEcho = 40

func (b *Bot) lang(r *Request) error {
	want := strings.ToLower(commandArgs(r.Message()))
	if want == "" {
		return r.Reply(r.T("lang.usage", locales.Data{"Current": r.Lang}), nil)
	}
	if !locales.Supported(want) {
		return r.Reply(r.T("lang.unsupported", locales.Data{
			"Lang": clipRunes(oneLine(want), maxEcho), "Supported": strings.Join(locales.Languages, ", "),
		}), nil)
	}
	if err := b.deps.Users.SetLanguage(r.Ctx, r.User.ID, want); err != nil {
		return err
	}
	r.Lang = want
	return r.Reply(r.T("lang.changed"), nil)
}

// clipRunes cuts s to at most n characters, marking a cut with "…".
func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// textRoute handles every message no command claimed: an unknown command
// gets a hint in a private chat; plain private text goes to private (the
// memory chat once it is registered, else a hint); group text goes to
// b.groupText (the analysis workflow) and nothing in a group is ever
// answered here, not even an unknown command, which is usually meant for
// another bot (our own commands are routed by b.run). A workflow replaces
// the route before Run.
func (b *Bot) textRoute(private func(r *Request) error) tele.HandlerFunc {
	return func(c tele.Context) error {
		r := requestOf(c)
		if r == nil {
			return nil
		}
		msg := r.Message()
		if cmd, ok := b.commandIn(msg.Text); ok {
			return b.run(r, cmd)
		}
		if !msg.Private() {
			if b.groupText == nil || strings.HasPrefix(msg.Text, "/") {
				return nil
			}
			return b.groupText(r)
		}
		if strings.HasPrefix(msg.Text, "/") {
			cmd := strings.FieldsFunc(msg.Text, unicode.IsSpace)[0]
			cmd, _, _ = strings.Cut(cmd, "@")
			return r.Reply(r.T("error.unknown_command", locales.Data{"Command": clipRunes(cmd, maxEcho)}), nil)
		}
		if b.privateFirst != nil {
			if handled, err := b.privateFirst(r); handled || err != nil {
				return err
			}
		}
		// A reply to a message about an order is for the order's other
		// side, not a question for the memory chat.
		if b.orderRelay != nil {
			if handled, err := b.orderRelay(r); handled || err != nil {
				return err
			}
		}
		// A vacancy's link is a request to judge that vacancy, whatever
		// words come with it: asked of the memory chat, the model would
		// answer about a page it cannot open. A draft waiting for its
		// corrected text (privateFirst) still comes first: the user is
		// in the middle of it.
		if b.vacancyLink != nil {
			if handled, err := b.vacancyLink(r); handled || err != nil {
				return err
			}
		}
		return b.inTopic(r, private)
	}
}

// commandIn finds the command of ours text starts with in another case
// than its own ("/HELP", "/Start@OurBot"; telebot routes only the exact
// name, and has already dropped a command addressed to another bot).
// Telegram's clients show such a word as a command, and the user meant
// ours: answering "I don't know the command /HELP" would be wrong.
func (b *Bot) commandIn(text string) (Command, bool) {
	if !strings.HasPrefix(text, "/") {
		return Command{}, false
	}
	word := strings.FieldsFunc(text, unicode.IsSpace)[0]
	word, _, _ = strings.Cut(word[1:], "@")
	lower := strings.ToLower(word)
	if lower == word {
		return Command{}, false // ours would have been routed already
	}
	return b.lookup(lower)
}

// inTopic routes plain private text by the workflow topic it was written
// in: a search's link in Vacancies is that search; anything else there,
// or in Orders or Admin, gets that topic's hint, which points questions to
// the memory chat. Text in Memory chat, or in a chat without topics, goes
// to private.
func (b *Bot) inTopic(r *Request, private func(r *Request) error) error {
	switch r.Topic {
	case domain.TopicVacancies:
		if b.searchLink != nil {
			if handled, err := b.searchLink(r); handled || err != nil {
				return err
			}
		}
		return r.Reply(r.T("text.hint_vacancies"), nil)
	case domain.TopicOrders:
		return r.Reply(r.T("text.hint_orders"), nil)
	case domain.TopicAdmin:
		return r.Reply(r.T("text.hint_admin"), nil)
	}
	return private(r)
}

func (b *Bot) hint(r *Request) error { return r.Reply(r.T("text.hint"), nil) }

// callback decodes button data before anything else: forged, stale or
// unknown data gets an alert and changes nothing.
func (b *Bot) callback(c tele.Context) error {
	r := requestOf(c)
	if r == nil {
		return b.answerCallback(context.Background(), c, "", false)
	}
	cb, err := b.actions.Decode(c.Callback().Data)
	btn, ok := b.buttons[cb.Action]
	if err != nil || !ok {
		b.deps.Log.Warn("bad callback data", "user", r.User.ID, "data_len", len(c.Callback().Data))
		return r.Alert("error.callback_invalid")
	}
	if b.pressedIn(r)&btn.where == 0 {
		return r.Forbidden()
	}
	return btn.handle(r, cb)
}

// status answers /status. Its rich form has each section collapsible, the
// jobs and the data's tables as tables; the text says the same, line by
// line.
func (b *Bot) status(r *Request) error {
	now := b.deps.Clock.Now()
	var sb strings.Builder
	var rich richDoc
	sb.WriteString(r.T("status.header", locales.Data{
		"Replica": b.deps.Replica,
		"Uptime":  locales.Duration(r.Lang, now.Sub(b.started)),
	}))
	rich.para(sb.String())
	if b.deps.Status == nil {
		return r.ReplyRich(sb.String(), rich.String(), nil)
	}
	// Without the replicas and the jobs the database is down: say so, and
	// nothing more.
	for _, section := range []func(*Request, *strings.Builder, *richDoc, time.Time) error{b.statusReplicas, b.statusJobs} {
		if err := section(r, &sb, &rich, now); err != nil {
			line := r.T("status.db_down", locales.Data{"Error": err.Error()})
			sb.WriteString("\n" + line)
			rich.para(line)
			return r.ReplyRich(sb.String(), rich.String(), nil)
		}
	}
	from := sb.Len()
	b.statusHealth(r, &sb)
	b.statusServer(r, &sb)
	rich.para(sb.String()[from:])
	b.statusData(r, &sb, &rich)
	return r.ReplyRich(sb.String(), rich.String(), nil)
}

// statusList writes a /status section of the rows list reads: its header,
// then each row's lines, or the line saying there are none; in the rich
// form, a section open at first whose rows are lines or, with cells, a
// table headed by columns.
func statusList[T any](r *Request, sb *strings.Builder, rich *richDoc, header, none string,
	list func(context.Context) ([]T, error), lines func(T) string, columns []string, cells func(T) []string) error {
	rows, err := list(r.Ctx)
	if err != nil {
		return err
	}
	sb.WriteString("\n\n" + r.T(header))
	if len(rows) == 0 {
		sb.WriteString("\n" + r.T(none))
	}
	var text []string
	var table [][]string
	for _, row := range rows {
		line := lines(row)
		sb.WriteString("\n" + line)
		text = append(text, line)
		if cells != nil {
			table = append(table, cells(row))
		}
	}
	rich.details(r.T(header), true, func(d *richDoc) {
		switch {
		case len(rows) == 0:
			d.para(r.T(none))
		case cells != nil:
			head := make([]string, 0, len(columns))
			for _, k := range columns {
				head = append(head, r.T(k))
			}
			d.table(head, table)
		default:
			d.para(strings.Join(text, "\n\n"))
		}
	})
	return nil
}

// statusReplicas writes /status's live replicas.
func (b *Bot) statusReplicas(r *Request, sb *strings.Builder, rich *richDoc, now time.Time) error {
	return statusList(r, sb, rich, "status.replicas_header", "status.no_replicas", b.deps.Status.Replicas, func(rp storage.Replica) string {
		version := rp.Version
		if version == "" {
			version = "?"
		}
		return r.T("status.replica", locales.Data{
			"Instance": rp.Instance, "Version": version,
			"Uptime": locales.Duration(r.Lang, max(now.Sub(rp.StartedAt), 0)),
			"Seen":   locales.Duration(r.Lang, max(now.Sub(rp.SeenAt), 0)),
		})
	}, nil, nil)
}

// statusJobColumns head the rich form's table of jobs.
var statusJobColumns = []string{"status.col_job", "status.col_last_run", "status.col_took", "status.col_runs", "status.col_failures"}

// statusJobs writes /status's jobs, each one's last run on any replica.
func (b *Bot) statusJobs(r *Request, sb *strings.Builder, rich *richDoc, _ time.Time) error {
	return statusList(r, sb, rich, "status.jobs_header", "status.no_jobs", b.deps.Status.JobRuns, func(j domain.JobRunSummary) string {
		line := r.T("status.job", locales.Data{
			"Name": j.Name, "Replica": j.Replica,
			"Runs": locales.Number(r.Lang, j.Runs), "Failures": locales.Number(r.Lang, j.Failures),
			"Started":  r.Time(j.StartedAt),
			"Duration": locales.Duration(r.Lang, j.Duration),
		})
		if j.Err != "" {
			line += "\n" + r.T("status.job_error", locales.Data{"Name": j.Name, "Error": j.Err})
		}
		return line
	}, statusJobColumns, func(j domain.JobRunSummary) []string {
		name := Escape(j.Name)
		if j.Err != "" {
			name += "\n" + r.T("status.job_error", locales.Data{"Name": j.Name, "Error": j.Err})
		}
		return []string{name, string(r.Time(j.StartedAt)) + " · " + Escape(j.Replica), locales.Duration(r.Lang, j.Duration),
			locales.Number(r.Lang, j.Runs), locales.Number(r.Lang, j.Failures)}
	})
}

// statusHealth writes the LLM's and HH's lines, when the source has them.
func (b *Bot) statusHealth(r *Request, sb *strings.Builder) {
	if ls, ok := b.deps.Status.(LLMSource); ok {
		if reason := ls.LLMReason(); reason != "" {
			sb.WriteString("\n\n" + llmDown(r, reason))
		} else {
			sb.WriteString("\n\n" + r.T("status.llm_ok"))
		}
	}
	if hs, ok := b.deps.Status.(HHSource); ok {
		if reason := hs.HHReason(); reason != "" {
			sb.WriteString("\n" + r.T("status.hh_refused", locales.Data{"Reason": reason}))
		} else {
			sb.WriteString("\n" + r.T("status.hh_ok"))
		}
	}
}

// lacksKeys name, for each Bot API feature the sender falls back from,
// /status's line saying this replica's server lacks it; spelled out so the
// catalogue test sees them used.
var lacksKeys = map[string]string{
	delivery.FeatureTopics.ID:          "status.lacks_topics",
	delivery.FeatureDrafts.ID:          "status.lacks_drafts",
	delivery.FeatureCopyButtons.ID:     "status.lacks_copy_buttons",
	delivery.FeatureDateTime.ID:        "status.lacks_date_time",
	delivery.FeatureEphemeral.ID:       "status.lacks_ephemeral",
	delivery.FeatureDisabledButtons.ID: "status.lacks_disabled_buttons",
	delivery.FeatureRichMessages.ID:    "status.lacks_rich_messages",
}

// statusServer writes a line for each Bot API feature this replica's
// server was seen to refuse, and what the bot does instead.
func (b *Bot) statusServer(r *Request, sb *strings.Builder) {
	for _, f := range b.deps.Direct.Lacking() {
		if key, ok := lacksKeys[f.ID]; ok {
			sb.WriteString("\n" + r.T(key, locales.Data{"Version": f.Since}))
		}
	}
}

// statusData writes the data's footprint, the delivery and the work held
// past its lease, when the source has them; a section it cannot read is
// left out. The rich form has the footprint as a table in a section shown
// collapsed.
func (b *Bot) statusData(r *Request, sb *strings.Builder, rich *richDoc) {
	if ss, ok := b.deps.Status.(StorageSource); ok {
		if st, err := ss.Storage(r.Ctx); err == nil {
			sb.WriteString("\n\n" + storageLines(r, st))
			rich.details(r.T("status.data_header"), false, func(d *richDoc) { storageRich(r, st, d) })
		}
	}
	from := sb.Len()
	if os, ok := b.deps.Status.(OutboxSource); ok {
		if st, err := os.OutboxStats(r.Ctx); err == nil {
			sb.WriteString("\n\n" + r.T("status.outbox", locales.Data{
				"Pending": locales.Number(r.Lang, st.Pending), "Oldest": locales.Duration(r.Lang, st.OldestAge),
				"Throttled": locales.Number(r.Lang, st.Throttled), "Unreachable": locales.Number(r.Lang, st.Unreachable),
				"Dropped": locales.Number(r.Lang, st.Dropped), "Failed": locales.Number(r.Lang, st.Failed),
			}))
		}
	}
	if is, ok := b.deps.Status.(InboxSource); ok {
		if st, err := is.InboxStats(r.Ctx); err == nil {
			sb.WriteString("\n" + r.T("status.inbox", locales.Data{
				"Pending": locales.Number(r.Lang, st.Pending), "Oldest": locales.Duration(r.Lang, st.OldestAge),
				"Failed": locales.Number(r.Lang, st.FailedDay),
			}))
		}
	}
	if vs, ok := b.deps.Status.(VacancyQueueSource); ok {
		if q, err := vs.VacancyQueue(r.Ctx); err == nil {
			sb.WriteString("\n" + vacancyQueueLine(r, q))
		}
	}
	if hs, ok := b.deps.Status.(HeldSource); ok {
		// Only when there is some: held work means users wait for a reaper.
		if h, err := hs.Held(r.Ctx); err == nil && h.PipelineRuns+h.VacancyMatches+h.OutboxRows+h.InboxUpdates > 0 {
			sb.WriteString("\n" + r.T("status.held", locales.Data{"Runs": locales.Number(r.Lang, h.PipelineRuns),
				"Matches": locales.Number(r.Lang, h.VacancyMatches), "Rows": locales.Number(r.Lang, h.OutboxRows),
				"Updates": locales.Number(r.Lang, h.InboxUpdates)}))
		}
	}
	rich.para(strings.ReplaceAll(sb.String()[from:], "\n", "\n\n"))
}

// VacancyQueueSource, when the StatusSource has it, adds the vacancy
// queue to /status.
type VacancyQueueSource interface {
	VacancyQueue(ctx context.Context) (storage.MatchQueue, error)
}

// waitKeys name, for each reason a match is given back unjudged
// (vacancy.Reason*), how /status says it; spelled out so the catalogue
// test sees them used. A reason without one is shown as stored.
var waitKeys = map[string]string{
	vacancy.ReasonBreakerOpen:    "status.wait_breaker_open",
	vacancy.ReasonLLMBusy:        "status.wait_llm_busy",
	vacancy.ReasonLLMRefused:     "status.wait_llm_refused",
	vacancy.ReasonHHBlocked:      "status.wait_hh_blocked",
	vacancy.ReasonDetailFetching: "status.wait_detail_fetching",
	vacancy.ReasonShutdown:       "status.wait_shutdown",
	vacancy.ReasonLeaseLost:      "status.wait_lease_lost",
	vacancy.ReasonUnsaved:        "status.wait_unsaved",
}

// vacancyQueueLine is /status's line of the vacancy queue: what waits for
// a worker, what of it is held back and why, what is retried after a
// failure of its own, and what recovery still owes.
func vacancyQueueLine(r *Request, q storage.MatchQueue) string {
	reason := Escape(q.WaitReason)
	if key, ok := waitKeys[q.WaitReason]; ok {
		reason = r.T(key)
	}
	return r.T("status.vacancy_queue", locales.Data{
		"Queued": locales.Number(r.Lang, q.Queued), "Waiting": q.Waiting, "WaitingN": locales.Number(r.Lang, q.Waiting),
		"Reason": reason, "Retrying": q.Retrying, "RetryingN": locales.Number(r.Lang, q.Retrying),
		"Skipped": locales.Number(r.Lang, q.Skipped),
	})
}

// HeldSource, when the StatusSource has it, adds the work held past its
// lease to /status.
type HeldSource interface {
	Held(ctx context.Context) (storage.HeldWork, error)
}

// StorageStatus is the data's footprint as /status shows it: the largest
// tables and the prune job's last run per kind.
type StorageStatus struct {
	Tables []storage.TableSize
	Prune  []storage.PruneRun
}

// StorageSource, when the StatusSource has it, adds the data's footprint
// to /status.
type StorageSource interface {
	Storage(ctx context.Context) (StorageStatus, error)
}

func storageLines(r *Request, st StorageStatus) string {
	var sb strings.Builder
	sb.WriteString(r.T("status.data_header"))
	for _, t := range st.Tables {
		key := "status.table"
		if t.Rows < 0 {
			key = "status.table_uncounted"
		}
		sb.WriteString("\n" + r.T(key, locales.Data{"Name": t.Name, "Size": sizeText(r.Lang, t.Bytes), "Rows": locales.Number(r.Lang, t.Rows)}))
	}
	if len(st.Prune) == 0 {
		sb.WriteString("\n" + r.T("status.prune_never"))
		return sb.String()
	}
	last := st.Prune[0].At
	for _, p := range st.Prune {
		if p.At.After(last) {
			last = p.At
		}
	}
	sb.WriteString("\n" + r.T("status.prune", locales.Data{"At": r.Time(last)}))
	for _, p := range st.Prune {
		sb.WriteString("\n" + r.T("status.prune_kind", locales.Data{
			"Kind": p.Kind, "Rows": locales.Number(r.Lang, p.Rows), "Total": locales.Number(r.Lang, p.Total),
		}))
		if p.Timeouts > 0 || p.Err != "" {
			sb.WriteString(" " + r.T("status.prune_trouble", locales.Data{"Timeouts": p.Timeouts, "Error": p.Err}))
		}
	}
	return sb.String()
}

// storageRich is storageLines' rich form: the tables as a table, then the
// prune job's last run.
func storageRich(r *Request, st StorageStatus, d *richDoc) {
	rows := make([][]string, 0, len(st.Tables))
	for _, t := range st.Tables {
		n := locales.Number(r.Lang, t.Rows)
		if t.Rows < 0 {
			n = "—"
		}
		rows = append(rows, []string{Escape(t.Name), sizeText(r.Lang, t.Bytes), n})
	}
	d.table([]string{r.T("status.col_table"), r.T("status.col_size"), r.T("status.col_rows")}, rows)
	lines := strings.Split(storageLines(r, StorageStatus{Prune: st.Prune}), "\n")
	d.para(strings.Join(lines[1:], "\n\n")) // its header is the section's
}

// sizeUnits are each language's binary size units, bytes first.
var sizeUnits = map[string][]string{
	"en": {"B", "KiB", "MiB", "GiB", "TiB"},
	"ru": {"Б", "КБ", "МБ", "ГБ", "ТБ"},
	"uk": {"Б", "КБ", "МБ", "ГБ", "ТБ"},
}

// sizeText renders a size in binary units as lang writes it: "12.3 MiB",
// "12,3 МБ".
func sizeText(lang string, n int64) string {
	units, ok := sizeUnits[lang]
	if !ok {
		units = sizeUnits[locales.Languages[0]]
	}
	if n < 1024 {
		return locales.Number(lang, n) + "\u00a0" + units[0]
	}
	v, exp := float64(n)/1024, 1
	for v >= 1024 && exp < len(units)-1 {
		v /= 1024
		exp++
	}
	num := fmt.Sprintf("%.1f", v)
	if lang == "ru" || lang == "uk" {
		num = strings.Replace(num, ".", ",", 1)
	}
	return num + "\u00a0" + units[exp]
}

// llmDown says the AI model is not answering, in plain words: why, when
// it is a refusal with a fix (a model not pulled, a key refused); else
// that it failed repeatedly and is being retried, with the last error.
func llmDown(r *Request, reason string) string {
	// The LLM client's breaker states, as its Health words them.
	const open, probing = "circuit breaker open after repeated failures", "circuit breaker half-open: probing the model server after failures"
	key := "status.llm_refused"
	detail := reason
	switch {
	case strings.HasPrefix(reason, open):
		key, detail = "status.llm_failing", strings.TrimPrefix(strings.TrimPrefix(reason, open), "; last: ")
	case strings.HasPrefix(reason, probing):
		key, detail = "status.llm_probing", strings.TrimPrefix(strings.TrimPrefix(reason, probing), "; last: ")
	}
	text := r.T(key)
	if detail != "" {
		text += "\n" + r.T("status.llm_detail", locales.Data{"Detail": detail})
	}
	return text
}

// HHSource, when the StatusSource has it, adds HH's state to /status:
// how HH blocks us ("" while it answers).
type HHSource interface {
	HHReason() string
}

// LLMSource, when the StatusSource has it, adds the LLM's health to
// /status: why it refuses or fails ("" while it answers).
type LLMSource interface {
	LLMReason() string
}

// notice is a system notice for the admin chat: its Notices topic in a
// forum.
func (b *Bot) notice(text string) []domain.Message {
	return toTopic(domain.TopicNotices, Messages(b.cfg.AdminChatID, domain.KindNote, 0, text, nil))
}

// LLMNotice renders the admin chat's notice that the LLM refuses the
// model or key (reason says what to fix), or with reason "" that it
// answers again. Nothing without an admin chat.
func (b *Bot) LLMNotice(reason string) []domain.Message {
	if b.cfg.AdminChatID == 0 {
		return nil
	}
	text := b.deps.Catalog.T(b.cfg.AdminLang, "admin.llm_back")
	if reason != "" {
		text = b.deps.Catalog.T(b.cfg.AdminLang, "admin.llm_refused", locales.Data{"Reason": reason})
	}
	return b.notice(text)
}

// HHNotice renders the admin chat's notice that HH blocks our requests
// (reason says how, captcha the URL HH gave, if any), or with reason ""
// that it answers again. Nothing without an admin chat.
func (b *Bot) HHNotice(reason, captcha string) []domain.Message {
	if b.cfg.AdminChatID == 0 {
		return nil
	}
	text := b.deps.Catalog.T(b.cfg.AdminLang, "admin.hh_back")
	if reason != "" {
		text = b.deps.Catalog.T(b.cfg.AdminLang, "admin.hh_refused", locales.Data{"Reason": reason})
		if captcha != "" {
			text += "\n" + b.deps.Catalog.T(b.cfg.AdminLang, "admin.hh_captcha", locales.Data{"URL": captcha})
		}
	}
	return b.notice(text)
}

// InboxSource, when the StatusSource has it, adds the incoming updates to
// /status.
type InboxSource interface {
	InboxStats(ctx context.Context) (storage.InboxStats, error)
}

// OutboxSource, when the StatusSource has it, adds the delivery to /status.
type OutboxSource interface {
	OutboxStats(ctx context.Context) (storage.OutboxStats, error)
}
