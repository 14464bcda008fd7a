package bot

import (
	"errors"

	"switchboard/domain"
	"switchboard/domain/vacancy"
)

// link takes a private text carrying a vacancy's link (vacancy.VacancyLinkIn):
// the vacancy is judged against the user's profile now and its card comes
// through the outbox (vacancy.Service.Paste); what went wrong is said in
// the user's language. handled is false for any other text, which goes on
// to the memory chat.
func (u *vacancyUI) link(r *Request) (bool, error) {
	msg := r.Message()
	id, ok := vacancy.VacancyLinkIn(msg.Text)
	if !ok {
		return false, nil
	}
	// Judging takes the model a few seconds: show that it is at work, once,
	// as the memory chat does. Cosmetic, so a failure is only logged.
	if err := u.b.Typing(r.Ctx, msg.Chat.ID); err != nil {
		u.b.deps.Log.Debug("vacancy link: typing not shown", "user", r.User.ID, "err", err)
	}
	pasted, err := u.v.Paste(r.Ctx, r.User.ID, id, msg.ID)
	if ie := (*domain.InputError)(nil); errors.As(err, &ie) {
		return true, r.Reply(r.InputText(ie, ""), nil)
	}
	key := ""
	switch {
	case errors.Is(err, vacancy.ErrArchived):
		key = "link.not_found"
	case errors.Is(err, vacancy.ErrHHBlocked):
		key = "link.hh_blocked"
	case errors.Is(err, vacancy.ErrUnavailable):
		key = "link.hh_down"
	case errors.Is(err, vacancy.ErrNotJudged):
		key = "link.llm_down"
	case err != nil:
		return true, err
	case pasted == vacancy.PastedOnItsWay:
		key = "link.on_its_way"
	}
	if key != "" {
		if err != nil {
			u.b.deps.Log.Info("vacancy link not judged", "user", r.User.ID, "vacancy", id, "err", err)
		}
		return true, r.Reply(r.T(key), nil)
	}
	// The card is in the outbox: have the sender look now.
	u.b.deps.Direct.Wake()
	return true, nil
}
