package bot

import (
	"context"
	"errors"
	"strings"

	tele "gopkg.in/telebot.v3"

	"switchboard/bot/markdown"
	"switchboard/domain"
	"switchboard/domain/vacancy"
	"switchboard/locales"
)

// Letters is what the bot needs from the cover letters
// (*vacancy.Letters implements it).
type Letters interface {
	Ask(ctx context.Context, a vacancy.LetterAsk) (vacancy.Asked, error)
}

var (
	_ Letters                = (*vacancy.Letters)(nil)
	_ vacancy.LetterNotifier = (*Renderer)(nil)
)

// Button actions of the cover letters.
var (
	actionLetter         = NewAction("vl", 1) // match id: the card's first draft
	actionLetterAnother  = NewAction("la", 1) // letter id
	actionLetterShorter  = NewAction("ls", 1) // letter id
	actionLetterFormal   = NewAction("lf", 1) // letter id
	actionLetterRetry    = NewAction("lr", 1) // failed letter id
	actionLetterLanguage = NewAction("ll", 2) // letter id, 1 + index in vacancy.LetterLanguages
)

// letterLanguageNames label the language buttons, each in its own language.
var letterLanguageNames = map[string]string{"en": "English", "ru": "Русский", "uk": "Українська"}

// letterHeaderBudget bounds the vacancy's name in a letter's first line.
const letterHeaderBudget = 300

type letterUI struct {
	b *Bot
	l Letters
}

// RegisterLetters adds the cover letters' buttons; call it before Run.
func (b *Bot) RegisterLetters(l Letters) {
	u := &letterUI{b: b, l: l}
	b.HandleButton(actionLetter, u.ask(vacancy.StyleDraft))
	b.HandleButton(actionLetterAnother, u.ask(vacancy.StyleAnother))
	b.HandleButton(actionLetterShorter, u.ask(vacancy.StyleShorter))
	b.HandleButton(actionLetterFormal, u.ask(vacancy.StyleFormal))
	b.HandleButton(actionLetterRetry, u.ask(vacancy.StyleRetry))
	b.HandleButton(actionLetterLanguage, u.ask(vacancy.StyleAnother))
}

// ask takes a press asking for a letter and answers it at once: the
// letter is drafted by a letter worker and arrives through the outbox.
// Every refusal is an alert; nothing is written for it.
func (u *letterUI) ask(style vacancy.LetterStyle) CallbackHandler {
	return func(r *Request, cb Callback) error {
		a := vacancy.LetterAsk{UserID: r.User.ID, Style: style, PressID: r.Callback().ID}
		if style == vacancy.StyleDraft {
			a.MatchID = cb.IDs[0]
		} else {
			a.FromID = cb.IDs[0]
		}
		if len(cb.IDs) > 1 {
			i := cb.IDs[1] - 1
			if i < 0 || i >= int64(len(vacancy.LetterLanguages)) {
				return r.Alert("error.callback_invalid")
			}
			a.Language = vacancy.LetterLanguages[i]
		}
		asked, err := u.l.Ask(r.Ctx, a)
		var ie *domain.InputError
		switch {
		case errors.Is(err, vacancy.ErrForbidden):
			return r.Forbidden()
		case errors.Is(err, domain.ErrNotFound), errors.Is(err, vacancy.ErrNotLetterable):
			return r.Alert("error.callback_invalid")
		case errors.As(err, &ie):
			return r.AlertText(r.InputText(ie, ""))
		case err != nil:
			return err
		case asked.Limited:
			return r.Alert("letter.limit", locales.Data{"Max": asked.Limit, "Time": r.Time(asked.Resets)})
		case asked.Busy:
			return r.Toast(r.T("letter.busy"))
		}
		return r.Toast(r.T("letter.drafting"))
	}
}

// Letter renders a ready cover letter (vacancy.LetterNotifier): the
// vacancy it is for, the letter in a <pre> block (Telegram offers to copy
// it whole), the apply link and the buttons asking for another version.
// The model's Markdown goes through the same parser as every model text,
// as plain text, since a <pre> holds no tags; a letter too long for one
// message is cut, and Shorter is one press away.
func (rd *Renderer) Letter(d vacancy.LetterData) []domain.Message {
	cat, lang, l := rd.cat, d.Lang, d.Letter
	head := rd.letterHeader(d)
	hint := cat.T(lang, "letter.copy_hint")
	if l.Language == "" {
		// Nothing else says why a Russian vacancy got a Russian letter.
		hint += "\n" + cat.T(lang, "letter.language_auto")
	}
	plain := strings.TrimSpace(markdown.Text(l.Text))
	fixed := utf16Len(head) + utf16Len(hint) + len("\n\n<pre></pre>\n\n")
	text := head + "\n\n<pre>" + clip(plain, MaxMessageLen-fixed) + "</pre>\n\n" + hint

	kb := &tele.ReplyMarkup{}
	// A copy button holds 256 characters: a short letter gets one, a longer
	// one is copied from its <pre> block.
	if b, ok := copyButton(cat.T(lang, "letter.button_copy"), plain); ok {
		kb.InlineKeyboard = append(kb.InlineKeyboard, []tele.InlineButton{b})
	}
	if row := applyRow(cat, lang, d.Vacancy); row != nil {
		kb.InlineKeyboard = append(kb.InlineKeyboard, row)
	}
	var styles, languages []tele.InlineButton
	for _, b := range []struct {
		key string
		a   Action
	}{
		{"letter.button_another", actionLetterAnother},
		{"letter.button_shorter", actionLetterShorter},
		{"letter.button_formal", actionLetterFormal},
	} {
		data, err := Encode(b.a, l.ID)
		if err != nil {
			rd.log.Error("render letter buttons", "letter", l.ID, "err", err)
			return nil
		}
		styles = append(styles, tele.InlineButton{Text: cat.T(lang, b.key), Data: data})
	}
	for i, code := range vacancy.LetterLanguages {
		data, err := Encode(actionLetterLanguage, l.ID, int64(i+1))
		if err != nil {
			rd.log.Error("render letter buttons", "letter", l.ID, "err", err)
			return nil
		}
		label := letterLanguageNames[code]
		if code == l.Language {
			label = "✓ " + label
		}
		languages = append(languages, tele.InlineButton{Text: label, Data: data})
	}
	kb.InlineKeyboard = append(kb.InlineKeyboard, styles, languages)
	return []domain.Message{{ChatID: l.UserID, Kind: domain.KindCoverLetter, Ref: l.ID, Text: text, Buttons: Buttons(kb)}}
}

// LetterFailed tells the user a letter could not be drafted and why, with
// a button that asks for it again (vacancy.LetterNotifier).
func (rd *Renderer) LetterFailed(d vacancy.LetterData) []domain.Message {
	cat, lang, l := rd.cat, d.Lang, d.Letter
	key := "letter.failed_llm"
	switch l.Failure {
	case vacancy.LetterFailedRefused:
		key = "letter.failed_refused"
	case vacancy.LetterFailedInvalid:
		key = "letter.failed_invalid"
	case vacancy.LetterFailedAttempts:
		key = "letter.failed_interrupted"
	case vacancy.LetterFailedPanic:
		key = "letter.failed_bug"
	}
	text := cat.T(lang, key, locales.Data{"Vacancy": locales.HTML(letterVacancy(d.Vacancy))})
	data, err := Encode(actionLetterRetry, l.ID)
	if err != nil {
		rd.log.Error("render letter retry button", "letter", l.ID, "err", err)
		return nil
	}
	buttons := [][]domain.Button{{{Text: cat.T(lang, "letter.button_retry"), Data: data}}}
	return []domain.Message{{ChatID: l.UserID, Kind: domain.KindCoverLetter, Ref: l.ID, Text: text, Buttons: buttons}}
}

// letterHeader is a letter message's first line: which vacancy, which version.
func (rd *Renderer) letterHeader(d vacancy.LetterData) string {
	data := locales.Data{"Vacancy": locales.HTML(letterVacancy(d.Vacancy)), "Version": d.Letter.Version}
	if d.Letter.Version > 1 {
		return rd.cat.T(d.Lang, "letter.header_version", data)
	}
	return rd.cat.T(d.Lang, "letter.header", data)
}

// letterVacancy names the vacancy in a letter's messages, escaped:
// "<b>Title</b>, Employer".
func letterVacancy(v vacancy.Vacancy) string {
	title := clip(oneLine(v.Title), letterHeaderBudget/2)
	if title == "" {
		title = "—"
	}
	s := "<b>" + title + "</b>"
	if e := clip(oneLine(v.Employer), letterHeaderBudget/2); e != "" {
		s += ", " + e
	}
	return s
}

// applyRow is the row of a vacancy's links: the page on hh.ru and where to
// apply (the employer's site for a direct vacancy), each only when it is a
// web address, since Telegram refuses the whole message for a bad one.
func applyRow(cat *locales.Catalog, lang string, v vacancy.Vacancy) []tele.InlineButton {
	var row []tele.InlineButton
	if webURL(v.URL) {
		row = append(row, tele.InlineButton{Text: cat.T(lang, "vacancy.button_open"), URL: v.URL})
	}
	if link := v.ApplyLink(); webURL(link) {
		key := "vacancy.button_apply"
		if v.ResponseURL != "" {
			key = "vacancy.button_apply_direct"
		}
		row = append(row, tele.InlineButton{Text: cat.T(lang, key), URL: link})
	}
	return row
}

// requirementsLine says what the employer asks of applicants beyond the
// form: a cover letter, a test, or both ("" for neither).
func requirementsLine(cat *locales.Catalog, lang string, v vacancy.Vacancy) string {
	switch {
	case v.LetterRequired && v.HasTest:
		return cat.T(lang, "vacancy.requires_letter_and_test")
	case v.LetterRequired:
		return cat.T(lang, "vacancy.requires_letter")
	case v.HasTest:
		return cat.T(lang, "vacancy.requires_test")
	}
	return ""
}
