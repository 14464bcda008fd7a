package bot

import (
	"context"
	"errors"
	"fmt"
	"html"
	"strings"

	tele "gopkg.in/telebot.v3"

	"switchboard/bot/delivery"
	"switchboard/bot/markdown"
	"switchboard/domain"
	"switchboard/domain/resume"
	"switchboard/locales"
)

// Resumes is what the bot needs from the résumé workflow (*resume.Service
// implements it).
type Resumes interface {
	Accept(ctx context.Context, doc resume.Document, lang string, ack domain.Render[resume.Draft]) (resume.Draft, bool, error)
	Edit(ctx context.Context, userID, id int64, revision int) (resume.Draft, bool, error)
	Revise(ctx context.Context, userID int64, messageID int, text string, tell domain.Render[resume.Draft]) (bool, error)
	Confirm(ctx context.Context, userID, id int64, revision int) (resume.Draft, bool, error)
	Cancel(ctx context.Context, userID, id int64, revision int) (bool, error)
	MaxPages() int
}

var (
	_ Resumes         = (*resume.Service)(nil)
	_ resume.Notifier = (*Renderer)(nil)
	_ resume.Files    = TelegramFiles{}
)

// Button actions of a profile draft; each carries the user it was made
// for (nobody else may press it), the draft and its revision (a button of
// an earlier message of the draft is stale).
var (
	actionResumeUse    = NewAction("ru", 3)
	actionResumeEdit   = NewAction("re", 3)
	actionResumeCancel = NewAction("rc", 3)
)

type resumeUI struct {
	b *Bot
	r Resumes
}

// RegisterResume makes a document sent in private chat a profile draft,
// with its buttons, and the user's next text after Edit its corrected
// text; call it before Run (New does, for Deps.Resume).
func (b *Bot) RegisterResume(rs Resumes) {
	u := &resumeUI{b: b, r: rs}
	b.tb.Handle(tele.OnDocument, u.document)
	b.HandleButton(actionResumeUse, draftButton(u.use))
	b.HandleButton(actionResumeEdit, draftButton(u.edit))
	b.HandleButton(actionResumeCancel, draftButton(u.cancel))
	b.privateFirst = u.revise
}

// document takes a file sent in private chat. In a group a document is
// the group's business: nothing is read, nothing is said, and no profile
// is ever shown there.
func (u *resumeUI) document(c tele.Context) error {
	r := requestOf(c)
	if r == nil {
		return nil
	}
	msg := r.Message()
	if msg == nil || !msg.Private() || msg.Document == nil {
		return nil
	}
	doc := msg.Document
	ack := func(d resume.Draft) []domain.Message {
		out := toTopic(domain.TopicVacancies, Messages(d.ChatID, domain.KindReply, 0, r.T("cv.reading"), nil))
		out[0].ReplyTo = d.MessageID
		return out
	}
	_, created, err := u.r.Accept(r.Ctx, resume.Document{
		UserID: r.User.ID, ChatID: msg.Chat.ID, MessageID: msg.ID,
		FileID: doc.FileID, FileName: doc.FileName, MIMEType: doc.MIME, Size: doc.FileSize,
	}, r.Lang, ack)
	if ie := (*domain.InputError)(nil); errors.As(err, &ie) {
		return u.b.queueReply(r.Ctx, msg.Chat.ID, msg.ID, r.InputText(ie, ""), nil)
	}
	if err != nil {
		return err
	}
	if created {
		u.b.deps.Direct.Wake()
	}
	return nil
}

// revise takes the corrected text of a draft waiting for it; handled is
// false for any other text, which goes on to the memory chat.
func (u *resumeUI) revise(r *Request) (bool, error) {
	handled, err := u.r.Revise(r.Ctx, r.User.ID, r.Message().ID, r.Message().Text, func(d resume.Draft) []domain.Message {
		return u.b.ResumeDraft(d)
	})
	if ie := (*domain.InputError)(nil); errors.As(err, &ie) {
		return true, r.Reply(r.InputText(ie, ""), nil)
	}
	if err != nil || !handled {
		return handled, err
	}
	u.b.deps.Direct.Wake()
	return true, nil
}

// draftButton checks a draft button's presser and runs press with the
// draft and revision the button names; a draft no longer at that revision
// (used, cancelled, replaced, expired) is answered with the stale alert.
func draftButton(press func(r *Request, id int64, revision int) (bool, error)) CallbackHandler {
	return func(r *Request, cb Callback) error {
		if cb.IDs[0] != r.User.ID {
			return r.Forbidden()
		}
		ok, err := press(r, cb.IDs[1], int(cb.IDs[2]))
		if err != nil || ok {
			return err
		}
		return r.Alert("cv.stale")
	}
}

func (u *resumeUI) use(r *Request, id int64, rev int) (bool, error) {
	_, ok, err := u.r.Confirm(r.Ctx, r.User.ID, id, rev)
	if err != nil || !ok {
		return ok, err
	}
	u.b.editPressed(r, r.T("cv.used"), nil)
	return true, r.Toast(r.T("cv.used_toast"))
}

func (u *resumeUI) edit(r *Request, id int64, rev int) (bool, error) {
	d, ok, err := u.r.Edit(r.Ctx, r.User.ID, id, rev)
	if err != nil || !ok {
		return ok, err
	}
	if chatID, msgID, ok := pressedMessage(r); ok {
		if err := u.b.editMarkupDirect(r.Ctx, chatID, msgID, nil); err != nil {
			u.b.deps.Log.Warn("resume: draft's buttons not removed", "user", r.User.ID, "err", err)
		}
	}
	kb, err := u.b.resumeMarkup(r.Lang, d, false)
	if err != nil {
		return true, err
	}
	text := r.T("cv.edit_prompt", locales.Data{"Draft": locales.HTML("<pre>" + html.EscapeString(d.Text) + "</pre>")})
	if err := r.Reply(text, kb); err != nil {
		return true, err
	}
	return true, r.Ack()
}

func (u *resumeUI) cancel(r *Request, id int64, rev int) (bool, error) {
	ok, err := u.r.Cancel(r.Ctx, r.User.ID, id, rev)
	if err != nil || !ok {
		return ok, err
	}
	u.b.editPressed(r, r.T("cv.cancelled"), nil)
	return true, r.Ack()
}

// resumeMarkup is a draft's buttons: Use this profile, Edit (unless the
// draft already waits for its text) and Cancel.
func (rd *Renderer) resumeMarkup(lang string, d resume.Draft, withEdit bool) (*tele.ReplyMarkup, error) {
	button := func(a Action, key string) (tele.InlineButton, error) {
		data, err := Encode(a, d.UserID, d.ID, int64(d.Revision))
		return tele.InlineButton{Text: rd.cat.T(lang, key), Data: data}, err
	}
	keys := []struct {
		a   Action
		key string
	}{{actionResumeUse, "cv.button_use"}, {actionResumeEdit, "cv.button_edit"}, {actionResumeCancel, "cv.button_cancel"}}
	var row []tele.InlineButton
	for _, k := range keys {
		if k.a == actionResumeEdit && !withEdit {
			continue
		}
		b, err := button(k.a, k.key)
		if err != nil {
			return nil, err
		}
		row = append(row, b)
	}
	return &tele.ReplyMarkup{InlineKeyboard: [][]tele.InlineButton{row}}, nil
}

// ResumeDraft is the draft as the user checks it, with its buttons: the
// model's text through the Markdown path, as all model text is shown.
func (rd *Renderer) ResumeDraft(d resume.Draft) []domain.Message {
	kb, err := rd.resumeMarkup(d.Lang, d, true)
	if err != nil {
		rd.log.Error("resume: draft's buttons", "draft", d.ID, "err", err)
		return nil
	}
	text := rd.cat.T(d.Lang, "cv.draft", locales.Data{"Draft": locales.HTML(markdown.HTML(d.Text))})
	return toTopic(domain.TopicVacancies, Messages(d.ChatID, domain.KindReply, 0, text, kb))
}

// ResumeFailed says why no draft was made from the file, and what to send
// instead.
func (rd *Renderer) ResumeFailed(d resume.Draft, why error) []domain.Message {
	key, data := "cv.error_unreadable", locales.Data{}
	var pages *resume.TooManyPagesError
	switch {
	case errors.Is(why, resume.ErrNoText) && d.Format == resume.PDF:
		key = "cv.error_scanned"
	case errors.Is(why, resume.ErrNoText):
		key = "cv.error_empty"
	case errors.As(why, &pages):
		key, data = "cv.error_pages", locales.Data{"Pages": pages.Pages, "Max": pages.Max}
	case errors.Is(why, resume.ErrFileTooBig):
		key = "cv.error_download_too_big"
	case errors.Is(why, resume.ErrGaveUp):
		key = "cv.error_gave_up"
	}
	out := toTopic(domain.TopicVacancies, Messages(d.ChatID, domain.KindReply, 0, rd.cat.T(d.Lang, key, data), nil))
	out[0].ReplyTo = d.MessageID
	return out
}

// ResumeWaiting tells the user that the model is not answering and the
// draft comes when it is back, in reply to the file: the wait may last as
// long as an outage, and "in a minute or two" would otherwise read as a
// file lost.
func (rd *Renderer) ResumeWaiting(d resume.Draft) []domain.Message {
	out := toTopic(domain.TopicVacancies, Messages(d.ChatID, domain.KindReply, 0, rd.cat.T(d.Lang, "cv.waiting_llm"), nil))
	out[0].ReplyTo = d.MessageID
	return out
}

// TelegramFiles downloads documents users sent through the port's
// client: getFile, then the file's path. Errors never carry a URL, which
// would hold the token.
type TelegramFiles struct{ Client *delivery.Client }

// Download implements resume.Files.
func (f TelegramFiles) Download(ctx context.Context, fileID string, max int64) ([]byte, error) {
	file, err := f.Client.GetFile(ctx, fileID)
	var apiErr *delivery.APIError
	switch {
	case errors.As(err, &apiErr) && strings.Contains(apiErr.Description, "file is too big"):
		return nil, fmt.Errorf("getFile: %w: %s", resume.ErrFileTooBig, apiErr.Description)
	case err != nil:
		return nil, fmt.Errorf("getFile: %w", err)
	case file.Size > max:
		return nil, fmt.Errorf("%w: %d bytes", resume.ErrFileTooBig, file.Size)
	}
	data, err := f.Client.DownloadFile(ctx, file.Path, max)
	if errors.Is(err, delivery.ErrFileTooBig) {
		return nil, fmt.Errorf("%w: %w", resume.ErrFileTooBig, err)
	}
	return data, err
}
