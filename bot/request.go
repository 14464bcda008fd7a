package bot

import (
	"context"
	"errors"
	"time"

	tele "gopkg.in/telebot.v3"

	"switchboard/domain"
	"switchboard/locales"
)

// Request is one update as handlers see it: who sent it, in which language,
// with what rights, and a context that ends with the handler's budget.
type Request struct {
	tele.Context
	Ctx  context.Context
	User domain.User
	Lang string
	// Zone is where the reader of the reply lives: times are written in
	// it (the user's zone in private, the admin chat's there).
	Zone  *time.Location
	Admin bool
	bot   *Bot
}

const requestKey = "sb.request"

func requestOf(c tele.Context) *Request {
	r, _ := c.Get(requestKey).(*Request)
	return r
}

// T renders a text in the request's language.
func (r *Request) T(key string, data ...locales.Data) string {
	return r.bot.deps.Catalog.T(r.Lang, key, data...)
}

// InputText renders a workflow's rejection of the user's input: its key with
// its args, more (what only the bot knows: the language's words for a
// filter's values, a number written the language's way) over them, and arg
// as the part of the input at fault, which the caller cuts to the width its
// reply allows (a word of /run_new, a field of /order).
func (r *Request) InputText(e *domain.InputError, arg any, more ...locales.Data) string {
	data := make(locales.Data, len(e.Args)+1)
	for k, v := range e.Args {
		data[k] = v
	}
	for _, m := range more {
		for k, v := range m {
			data[k] = v
		}
	}
	data["Arg"] = arg
	return r.T(e.Key, data)
}

// Reply sends HTML text to the update's chat, split at Telegram's limit; the
// markup goes on the last chunk so buttons sit under the whole text. It goes
// out at once, through the outbox's limiter and failure rules.
func (r *Request) Reply(text string, markup *tele.ReplyMarkup) error {
	ctx := r.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	return r.bot.sendDirect(ctx, r.Chat().ID, 0, text, markup)
}

// Alert answers a button press with a pop-up.
func (r *Request) Alert(key string, data ...locales.Data) error {
	return r.Respond(&tele.CallbackResponse{Text: r.T(key, data...), ShowAlert: true})
}

// Forbidden refuses a button press by someone who may not act on it (not the
// vacancy's owner, not the addressed master, not an admin); nothing changes.
func (r *Request) Forbidden() error {
	r.bot.deps.Log.Warn("button press refused", "user", r.User.ID, "data_len", len(r.Callback().Data))
	return r.Alert("error.callback_forbidden")
}

// Respond answers the button press. Telegram refuses an answer to a press
// it no longer waits for ("query is too old": some seconds on); that is an
// update run again after its replica died, whose first run answered it, or
// one that waited out an outage in the inbox. Nothing is left to answer, so
// the handler's work stands instead of failing over the toast.
func (r *Request) Respond(resp ...*tele.CallbackResponse) error {
	err := r.Context.Respond(resp...)
	if errors.Is(err, tele.ErrQueryTooOld) {
		r.bot.deps.Log.Info("button press answered too late for Telegram: no toast", "user", r.User.ID)
		return nil
	}
	return err
}
