package bot

import (
	"errors"
	"math"
	"time"

	"switchboard/domain"
	"switchboard/domain/dispatch"
	"switchboard/locales"
)

// A master on the way shares their location in their private chat with the
// bot, and the order's customer sees it (dispatch.ShareLocation): a live
// location the customer watches move until the master presses Arrived, or a
// still point. The share itself is answered; its moves, which the client
// sends every few seconds, never are.

// shareLocation is a location the master sent (edited false) or the move
// or stop of the live one they share (edited true).
func (u *dispatchUI) shareLocation(r *Request, edited bool) error {
	msg := r.Message()
	loc := msg.Location
	w := dispatch.Where{
		Location: domain.Location{Lat: coordinate(loc.Lat), Lon: coordinate(loc.Lng), Heading: loc.Heading},
		Share:    msg.ID, Edit: msg.LastEdit, Started: !edited,
	}
	if a := loc.HorizontalAccuracy; a != nil && *a > 0 {
		w.Location.Accuracy = math.Round(float64(*a))
	}
	switch {
	case loc.LivePeriod > 0:
		w.Location.Live = livePeriod(loc.LivePeriod)
	case edited:
		// A live location's last edit has no live_period: its sharer
		// stopped it there.
		w.Location.Stop = true
	}
	o, err := u.d.ShareLocation(r.Ctx, r.User.ID, w)
	switch {
	case errors.Is(err, dispatch.ErrNotOnTheWay):
		if edited {
			return nil
		}
		if _, _, merr := u.d.Master(r.Ctx, r.User.ID); merr != nil {
			return u.b.unread(r) // not a master: no workflow reads it
		}
		return r.Reply(r.T("where.not_on_the_way"), nil)
	case err != nil:
		return err
	case edited:
		return nil
	case w.Location.Live > 0:
		return r.Reply(r.T("where.live_shared", locales.Data{"Order": o.ID}), nil)
	}
	return r.Reply(r.T("where.still_shared", locales.Data{"Order": o.ID}), nil)
}

// coordinate is a degree as telebot's float32 carried it (about 4e-6 of
// a degree off at worst), to five decimals: about a metre, finer than a
// phone's fix, and the float32's noise gone.
func coordinate(deg float32) float64 {
	return math.Round(float64(deg)*1e5) / 1e5
}

// livePeriod is how long the customer's copy of a live location lives:
// as long as the master's (the Bot API's 60 s to a day, or until stopped).
// Arrived stops it sooner.
func livePeriod(seconds int) time.Duration {
	if time.Duration(seconds)*time.Second == domain.LiveUntilStopped {
		return domain.LiveUntilStopped
	}
	return time.Duration(min(max(seconds, 60), 86400)) * time.Second
}
