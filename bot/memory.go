package bot

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	tele "gopkg.in/telebot.v3"

	"switchboard/bot/delivery"
	"switchboard/bot/markdown"
	"switchboard/domain"
	"switchboard/domain/memory"
	"switchboard/locales"
)

// Memory is what the bot needs from the memory chat (*memory.Service
// implements it).
type Memory interface {
	Submit(ctx context.Context, userID, chatID int64, messageID int, query string) (memory.PipelineRun, int, error)
	QueueNote(ctx context.Context, msgs []domain.Message) error
	Memories(ctx context.Context, userID int64, page int) (memory.MemoryPage, error)
	MemoryHistory(ctx context.Context, userID, id int64) ([]memory.Summary, error)
	DeleteMemory(ctx context.Context, userID, id int64) (memory.Erased, bool, error)
	AskCorrection(ctx context.Context, userID, id int64) (memory.Summary, bool, error)
	CancelCorrection(ctx context.Context, userID, id int64) (bool, error)
	TakeCorrection(ctx context.Context, userID int64, messageID int, text string) (memory.Correction, error)
	ForgetAbout(ctx context.Context, userID int64, messageID int, topic string) (int64, []memory.Summary, error)
	ConfirmForget(ctx context.Context, userID, requestID int64) (memory.Erased, bool, error)
	KeepMemories(ctx context.Context, userID, requestID int64) (bool, error)
	Forget(ctx context.Context, userID int64, known time.Time) (memory.Forgotten, error)
	Held(ctx context.Context, userID int64) (memory.Held, error)
	Prompt(ctx context.Context, role string) (memory.Prompt, error)
	SetPrompt(ctx context.Context, role, text string, by domain.MessageRef) (memory.Prompt, error)
	Stop(ctx context.Context, userID, runID int64) (bool, error)
	MemoryPrivacy
}

var (
	_ Memory          = (*memory.Service)(nil)
	_ memory.Notifier = (*Renderer)(nil)
	_ memory.Typist   = Typist{}
	_ memory.Drafts   = Drafts{}
)

// Button actions of /forget; each carries the id of the user who asked, so
// nobody else can press them, and the creation time of their users row in
// microseconds, so a press after the forgetting (a second tap, which
// makes the row anew) changes nothing.
var (
	actionForget       = NewAction("mf", 2) // user id, users.created_at
	actionForgetCancel = NewAction("mc", 2) // user id, users.created_at
)

type memoryUI struct {
	b *Bot
	m Memory
}

// RegisterMemory makes plain private text the memory chat's and adds
// /memory, /forget and the admins' /prompt; call it before Run.
func (b *Bot) RegisterMemory(m Memory) {
	u := &memoryUI{b: b, m: m}
	b.tb.Handle(tele.OnText, b.textRoute(u.text))
	// A memory answer's draft is its run's (Drafts: draft_id is the run
	// id), so its stop button stops that run.
	b.stopAnswer = m.Stop
	b.Handle(Command{Name: "memory", Desc: "cmd.memory", Section: SectionMemory, Handle: u.list})
	b.Handle(Command{Name: "forget", Desc: "cmd.forget", Section: SectionMemory, Handle: u.forget})
	b.Handle(Command{Name: "prompt", Desc: "cmd.prompt", Section: SectionAdminSystem, Role: RoleAdmin, Handle: u.prompt})
	b.HandleButton(actionForget, u.forgetConfirmed)
	b.HandleButton(actionForgetCancel, u.forgetCancelled)
	u.registerMemories()
	u.registerPrivacy()
}

// text is intake: the message becomes a pipeline run, unless a correction
// of a memory waits for it or it asks to forget what the user told about
// something (memories.go): those are answered here and never stored as a
// chat message. Once Submit succeeded
// the message is stored and will be answered, so a failure to show "typing"
// or to queue the note is only logged: an error reply would invite a resend.
// The note goes through the outbox, like the answers: a direct reply would
// hold up the intake of the chat's next message for Telegram's pacing of
// the chat (one message a second).
func (u *memoryUI) text(r *Request) error {
	msg := r.Message()
	if handled, err := u.correction(r); handled || err != nil {
		return err
	}
	if topic, ok := memory.ForgetTopic(msg.Text); ok {
		return u.forgetAbout(r, topic)
	}
	run, ahead, err := u.m.Submit(r.Ctx, r.User.ID, msg.Chat.ID, msg.ID, msg.Text)
	switch {
	case errors.Is(err, memory.ErrEmptyQuery):
		return r.Reply(r.T("memory.empty_query"), nil)
	case errors.Is(err, memory.ErrQueryTooLong):
		return r.Reply(r.T("memory.too_long", locales.Data{"Max": memory.MaxQuery}), nil)
	case errors.Is(err, memory.ErrSubmitted):
		// This update ran before and its capture committed: the run is on
		// its way, and its note and "typing" were the first run's to send.
		u.b.deps.Log.Info("memory: message captured before, not again", "user", r.User.ID, "run", run.ID)
		return nil
	case err != nil:
		return err
	}
	if ahead > 0 {
		note := runMessages(run, domain.KindMemoryNote, r.T("memory.queued", locales.Data{"Ahead": ahead}))
		if err := u.m.QueueNote(r.Ctx, note); err != nil {
			u.b.deps.Log.Warn("memory: queue note not queued", "user", r.User.ID, "err", err)
		}
	}
	if err := u.b.Typing(r.Ctx, msg.Chat.ID); err != nil {
		u.b.deps.Log.Debug("memory: typing not shown", "user", r.User.ID, "err", err)
	}
	return nil
}

// forget asks to confirm, listing only what applies to the user: what
// they have of the memory chat, the job search and the groups, a master's
// record, an admin's work.
func (u *memoryUI) forget(r *Request) error {
	h, err := u.m.Held(r.Ctx, r.User.ID)
	if err != nil {
		return err
	}
	stamp := r.User.CreatedAt.UnixMicro()
	pair, err := buttonPair(confirmLoss, r.T("memory.forget_yes"), actionForget, r.T("memory.forget_cancel"), actionForgetCancel, r.User.ID, stamp)
	if err != nil {
		return err
	}
	lines := []string{r.T("memory.forget_confirm")}
	if h.Memory {
		lines = append(lines, r.T("memory.forget_memory"))
	}
	if h.JobSearch {
		lines = append(lines, r.T("memory.forget_jobs"))
	}
	if h.GroupMessages {
		lines = append(lines, r.T("memory.forget_groups"))
	}
	if h.Master && !h.MasterKept {
		lines = append(lines, r.T("memory.forget_master"))
	}
	lines = append(lines, r.T("memory.forget_settings"))
	if h.MasterKept {
		lines = append(lines, r.T("memory.forget_master_kept"))
	}
	if r.Admin {
		lines = append(lines, r.T("memory.forget_admin_kept"))
	}
	lines = append(lines, r.T("memory.forget_final"))
	return r.Reply(strings.Join(lines, "\n"), &tele.ReplyMarkup{InlineKeyboard: [][]tele.InlineButton{pair}})
}

// forgetConfirmed erases everything of the presser's (memory.Forgotten;
// README "Forgetting a user"). The edit removes the buttons and says what
// went and what stayed. A press after that (a double tap, a stale client,
// another replica) finds the user's row made anew and only gets a toast:
// the message keeps the counts of the real forgetting.
func (u *memoryUI) forgetConfirmed(r *Request, cb Callback) error {
	if cb.IDs[0] != r.User.ID {
		return r.Forbidden()
	}
	known := time.UnixMicro(cb.IDs[1])
	if !r.User.CreatedAt.Equal(known) {
		return r.Alert("memory.forget_already")
	}
	f, err := u.m.Forget(r.Ctx, r.User.ID, known)
	if errors.Is(err, memory.ErrAlreadyForgotten) {
		return r.Alert("memory.forget_already")
	}
	if err != nil {
		return err
	}
	u.b.deps.Log.Info("user forgotten", "user", r.User.ID, "runs", f.Runs, "logs", f.Logs, "summaries", f.Summaries,
		"searches", f.Searches, "ban_words", f.BanWords, "matches", f.Matches, "group_messages", f.GroupMessages,
		"messages", f.Messages, "master_kept", f.MasterKept, "orders", f.Orders)
	// Only what there was: a job seeker who never chatted reads no
	// "summaries — 0".
	var items []string
	for _, c := range []struct {
		key string
		n   int64
	}{
		{"memory.forgotten_runs", int64(f.Runs)}, {"memory.forgotten_logs", int64(f.Logs)},
		{"memory.forgotten_summaries", int64(f.Summaries)}, {"memory.forgotten_searches", int64(f.Searches)},
		{"memory.forgotten_ban_words", int64(f.BanWords)}, {"memory.forgotten_matches", int64(f.Matches)},
		{"memory.forgotten_group_messages", int64(f.GroupMessages)}, {"memory.forgotten_messages", int64(f.Messages)},
	} {
		if c.n > 0 {
			items = append(items, r.T(c.key, locales.Data{"N": locales.Number(r.Lang, c.n)}))
		}
	}
	text := r.T("memory.forgotten_none")
	if len(items) > 0 {
		text = r.T("memory.forgotten", locales.Data{"Items": locales.HTML(strings.Join(items, ", "))})
	}
	if f.MasterKept {
		text += "\n" + r.T("memory.forgotten_master", locales.Data{"Orders": f.Orders})
	}
	u.b.editPressed(r, text, nil)
	return r.Ack()
}

// forgetCancelled keeps everything; after a forgetting it leaves the
// result in place.
func (u *memoryUI) forgetCancelled(r *Request, cb Callback) error {
	if cb.IDs[0] != r.User.ID {
		return r.Forbidden()
	}
	if !r.User.CreatedAt.Equal(time.UnixMicro(cb.IDs[1])) {
		return r.Alert("memory.forget_already")
	}
	u.b.editPressed(r, r.T("memory.forget_cancelled"), nil)
	return r.Ack()
}

// prompt shows (/prompt ROLE) or replaces (/prompt ROLE text…) a role's
// system prompt; the text keeps its line breaks.
func (u *memoryUI) prompt(r *Request) error {
	args := commandArgs(r.Message())
	role, text := args, ""
	if i := strings.IndexFunc(args, unicode.IsSpace); i >= 0 {
		role, text = args[:i], strings.TrimSpace(args[i:])
	}
	role = strings.ToLower(role)
	usage := func() error {
		return r.Reply(r.T("memory.prompt_usage", locales.Data{"Roles": strings.Join(memory.Roles, ", ")}), nil)
	}
	if role == "" {
		return usage()
	}
	unknown := func() error {
		return r.Reply(r.T("memory.prompt_unknown_role", locales.Data{
			"Role": locales.HTML(clip(role, 40)), "Roles": strings.Join(memory.Roles, ", "), "Example": memory.Roles[0],
		}), nil)
	}
	if text == "" {
		p, err := u.m.Prompt(r.Ctx, role)
		switch {
		case errors.Is(err, memory.ErrUnknownRole):
			return unknown()
		case errors.Is(err, domain.ErrNotFound):
			return r.Reply(r.T("memory.prompt_none", locales.Data{"Role": role}), nil)
		case err != nil:
			return err
		}
		return u.showPrompt(r, p)
	}
	p, err := u.m.SetPrompt(r.Ctx, role, text, domain.MessageRef{Chat: r.Chat().ID, ID: r.Message().ID})
	switch {
	case errors.Is(err, memory.ErrUnknownRole):
		return unknown()
	case errors.Is(err, memory.ErrEmptyQuery):
		return usage()
	case errors.Is(err, memory.ErrQueryTooLong):
		return r.Reply(r.T("memory.prompt_too_long", locales.Data{"Max": memory.MaxPrompt}), nil)
	case err != nil:
		return err
	}
	if !p.Active {
		// The message handled again (its first reply lost to a crash)
		// after another admin's newer set: its version is kept, not in use.
		return r.Reply(r.T("memory.prompt_saved_since_replaced", locales.Data{"Role": p.Role, "Version": p.Version}), nil)
	}
	u.b.deps.Log.Info("system prompt replaced", "role", p.Role, "version", p.Version, "admin", r.User.ID)
	return r.Reply(r.T("memory.prompt_saved", locales.Data{"Role": p.Role, "Version": p.Version}), nil)
}

// showPrompt sends the header and the template in <pre>. A long template
// takes several messages, each with a <pre> of its own, since a tag cut
// between messages would make Telegram refuse both.
func (u *memoryUI) showPrompt(r *Request, p memory.Prompt) error {
	header := r.T("memory.prompt_show", locales.Data{
		"Role": p.Role, "Version": p.Version, "Updated": r.Time(p.UpdatedAt),
	})
	const pre, endPre = "<pre>", "</pre>"
	budget := MaxMessageLen - utf16Len(header) - utf16Len("\n"+pre+endPre)
	for i, chunk := range Split(Escape(p.Template), budget) {
		text := pre + chunk + endPre
		if i == 0 {
			text = header + "\n" + text
		}
		if err := r.Reply(text, nil); err != nil {
			return err
		}
	}
	return nil
}

// Typist shows "typing…" in a chat (memory.Typist) through the sender's
// ChatAction, the one way the bot sends it, so it is paced with the chat's
// messages. It is cosmetic: the pipeline ignores the error.
type Typist struct{ Sender Direct }

// Typing sends the chat action.
func (t Typist) Typing(ctx context.Context, chatID int64) error {
	return t.Sender.ChatAction(ctx, chatID, domain.TopicMemory, "typing")
}

// Typing shows "typing…" in a chat as a message comes in, the same way as
// the pipeline's Typist. It is cosmetic: intake ignores the error.
func (b *Bot) Typing(ctx context.Context, chatID int64) error {
	return Typist{Sender: b.deps.Direct}.Typing(ctx, chatID)
}

// Answer renders a run's final answer (memory.Notifier): the model's
// Markdown as Telegram HTML (raw HTML in it shown as text), split at
// Telegram's limit, the first part a reply to
// the user's message. The pipeline queues the messages with the run's
// COMPLETED step; the outbox's senders deliver them (a deleted original
// does not stop the answer; an unreachable user's rows are dropped).
func (rd *Renderer) Answer(r memory.PipelineRun) []domain.Message {
	if r.Stopped {
		// What was written when the user stopped it, and that it stops
		// there; maybe nothing yet.
		text := rd.cat.T(r.Lang, "memory.stopped_empty")
		if strings.TrimSpace(r.FinalAnswer) != "" {
			text = markdown.HTML(r.FinalAnswer) + "\n\n" + rd.cat.T(r.Lang, "memory.stopped")
		}
		return replacePlaceholder(r, runMessages(r, domain.KindMemoryAnswer, rd.incognitoLine(r, text)))
	}
	if strings.TrimSpace(r.FinalAnswer) == "" {
		// The pipeline never completes a run without an answer; should one
		// slip through, an empty message would fail for ever.
		return rd.Failed(r)
	}
	return replacePlaceholder(r, runMessages(r, domain.KindMemoryAnswer, rd.incognitoLine(r, markdown.HTML(r.FinalAnswer))))
}

// Failed renders, in the user's language, the notice that this message
// could not be answered (memory.Notifier), a reply to it. An incognito
// run's text is erased with it, so its notice does not say it was saved.
func (rd *Renderer) Failed(r memory.PipelineRun) []domain.Message {
	key := "memory.failed"
	if r.Incognito {
		key = "memory.failed_incognito"
	}
	return replacePlaceholder(r, runMessages(r, domain.KindMemoryAnswer, rd.incognitoLine(r, rd.cat.T(r.Lang, key))))
}

// Waiting renders, in the user's language, the notice that the model is
// not answering and this message will be answered once it is back
// (memory.Notifier), a reply to it. The answer comes as a message of its
// own, not as this one's edit: an outage may last hours, and only a new
// message notifies the user that it came.
func (rd *Renderer) Waiting(r memory.PipelineRun) []domain.Message {
	return runMessages(r, domain.KindMemoryNote, rd.cat.T(r.Lang, "memory.waiting_llm"))
}

// Partial renders the answer so far where drafts are refused
// (memory.Notifier): the placeholder message, a reply to the user's
// message, when first, else its edit. It shows what fits one message, and
// an ellipsis that says more is coming.
func (rd *Renderer) Partial(r memory.PipelineRun, text string, first bool) []domain.Message {
	m := EditOf(r.ChatID, domain.KindMemoryDraft, r.ID, answerKey(r.ID), PartialHTML(text), nil, domain.IfGoneDrop)
	if first {
		m = Keyed(r.ChatID, domain.KindMemoryDraft, r.ID, answerKey(r.ID), PartialHTML(text), nil)
		m.ReplyTo = r.MessageID
	}
	m.Ephemeral = r.Incognito // as the answer it becomes
	return []domain.Message{m}
}

// PartialHTML is an answer being written as one message's HTML: the
// model's Markdown so far (an unclosed ** shows as typed until it closes),
// cut to what fits one message, and "…" to say more is coming.
func PartialHTML(text string) string {
	parts := Split(markdown.HTML(text), MaxMessageLen-2)
	if len(parts) == 0 {
		return "…"
	}
	return parts[0] + " …"
}

// answerKey names the placeholder of a run's streamed answer.
func answerKey(runID int64) string { return MessageKey("answer", runID) }

// replacePlaceholder makes a finished run's first message the edit of its
// placeholder, where its answer streamed into one: the chat is left with
// the answer, not the answer under a half-written copy. A placeholder
// that is gone (deleted, never delivered) gets the message anew.
func replacePlaceholder(r memory.PipelineRun, msgs []domain.Message) []domain.Message {
	if r.Placeholder && len(msgs) > 0 {
		msgs[0].Key, msgs[0].Edit, msgs[0].IfGone = answerKey(r.ID), true, domain.IfGoneSend
	}
	return msgs
}

// runMessages is text for a run's chat, the first part a reply to the
// user's message (the answer, the failure notice, the queue note).
func runMessages(r memory.PipelineRun, kind, text string) []domain.Message {
	msgs := Messages(r.ChatID, kind, r.ID, text, nil)
	if len(msgs) > 0 {
		msgs[0].ReplyTo = r.MessageID
	}
	for i := range msgs {
		msgs[i].Ephemeral = r.Incognito // nothing of an incognito exchange outlives its delivery
	}
	return msgs
}

// Drafts shows a streamed answer as Telegram message drafts
// (memory.Drafts) through the delivery path's pacing.
type Drafts struct{ Sender *delivery.Sender }

// Draft shows the answer so far in the run's private chat; the run's id is
// the draft's, so every showing of one answer animates one draft.
func (d Drafts) Draft(ctx context.Context, r memory.PipelineRun, text string) error {
	err := d.Sender.Draft(ctx, r.ChatID, domain.TopicMemory, r.ID, PartialHTML(text))
	if errors.Is(err, delivery.ErrDraftsRefused) {
		return fmt.Errorf("%w: %w", memory.ErrDraftsRefused, err)
	}
	return err
}
