package bot

import (
	"errors"
	"strings"
	"time"

	tele "gopkg.in/telebot.v3"

	"switchboard/domain"
	"switchboard/locales"
)

// Where a reader's zone came from, for /timezone to say.
const (
	zoneChosen = iota
	zoneCity
	zoneLang
	zoneAdminChat
)

// readerZone is the zone to write times in for a user: the one they chose
// with /timezone; else, for a master, their city's (its DISPATCH_CITIES
// entry, the zone of a city /timezone knows by name, or DISPATCH_TIMEZONE
// once an operator set it to a real place); else the one their language
// suggests.
func (rd *Renderer) readerZone(chosen, city, lang string) (*time.Location, int) {
	if chosen != "" {
		if loc, err := locales.LoadZone(chosen); err == nil {
			return loc, zoneChosen
		}
	}
	if city != "" {
		if rd.rc.Calendar.Has(city) {
			return rd.rc.Calendar.Zone(city), zoneCity
		}
		// A city the dispatch calendar does not list but the world knows:
		// its own zone, not the calendar's default or the language's guess.
		if loc, ok := locales.CityZone(city); ok {
			return loc, zoneCity
		}
		if loc := rd.rc.Calendar.Default.Zone; loc != nil && loc != time.UTC && loc.String() != "UTC" {
			return loc, zoneCity
		}
	}
	return locales.LangZone(lang), zoneLang
}

// chatZone is the zone of replies in c: the admin chat's in the admin
// chat, which several admins read; the user's own elsewhere.
func (b *Bot) chatZone(c *tele.Chat, u domain.User) *time.Location {
	if b.inAdminChat(c) {
		return b.AdminZone()
	}
	loc, _ := b.readerZone(u.TimeZone, u.MasterCity, u.Lang())
	return loc
}

// AdminZone is the admin chat's (ADMIN_CHAT_TIMEZONE), for what goes
// there and for what the model reads of a run (analysis.Notifier); a
// reply to an admin elsewhere is in their own (Request.Zone).
func (rd *Renderer) AdminZone() *time.Location {
	if rd.rc.AdminZone == nil {
		return time.UTC
	}
	return rd.rc.AdminZone
}

// Time writes t for the request's reader, in r.Zone, as HTML that also
// carries the moment for clients that show it in their own clock.
func (r *Request) Time(t time.Time) locales.HTML { return r.bot.timeTag(r.Lang, t, r.Zone) }

// zoneResets are the words that forget a chosen zone.
var zoneResets = map[string]bool{"auto": true, "reset": true, "авто": true, "сброс": true, "скинути": true}

// timezone is /timezone: without an argument it shows the zone times are
// written in and where it came from; with one it sets it.
func (b *Bot) timezone(r *Request) error {
	if !r.Message().Private() {
		return r.Reply(r.T("time.zone_private_only"), nil)
	}
	arg := strings.TrimSpace(commandArgs(r.Message()))
	// The time the user is shown is the calendar's (CLOCK_START's in a
	// demo), which their quiet hours and digests keep.
	now := b.today()
	if arg == "" {
		loc, from := b.readerZone(r.User.TimeZone, r.User.MasterCity, r.Lang)
		key := map[int]string{
			zoneChosen: "time.zone_current_chosen", zoneCity: "time.zone_current_city", zoneLang: "time.zone_current_lang",
		}[from]
		return r.Reply(r.T(key, locales.Data{
			"Zone": locales.ZoneLabel(r.Lang, loc, now), "Offset": locales.ZoneOffset(now, loc),
			"Now": b.timeTag(r.Lang, now, loc), "City": r.User.MasterCity,
		})+"\n\n"+r.T("time.zone_usage"), nil)
	}
	if zoneResets[strings.ToLower(arg)] {
		if err := b.deps.Users.SetTimeZone(r.Ctx, r.User.ID, ""); err != nil {
			return err
		}
		loc, _ := b.readerZone("", r.User.MasterCity, r.Lang)
		return r.Reply(r.T("time.zone_reset", locales.Data{
			"Zone": locales.ZoneLabel(r.Lang, loc, now), "Offset": locales.ZoneOffset(now, loc), "Now": b.timeTag(r.Lang, now, loc),
		}), nil)
	}
	name, loc, err := locales.ParseZone(arg)
	switch {
	case errors.Is(err, locales.ErrZoneOffset):
		return r.Reply(r.T("time.zone_error_offset", locales.Data{"Arg": shortArg(arg)}), nil)
	case err != nil:
		return r.Reply(r.T("time.zone_error_unknown", locales.Data{"Arg": shortArg(arg)}), nil)
	}
	if err := b.deps.Users.SetTimeZone(r.Ctx, r.User.ID, name); err != nil {
		return err
	}
	r.Zone = loc
	return r.Reply(r.T("time.zone_changed", locales.Data{
		"Zone": locales.ZoneLabel(r.Lang, loc, now), "Offset": locales.ZoneOffset(now, loc), "Now": b.timeTag(r.Lang, now, loc),
	}), nil)
}
