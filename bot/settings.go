package bot

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	tele "gopkg.in/telebot.v3"

	"switchboard/domain"
	"switchboard/domain/vacancy"
	"switchboard/locales"
)

// Rhythms is what the bot needs of the job seeker's rhythm and digests
// (*vacancy.Service implements it).
type Rhythms interface {
	Rhythm(ctx context.Context, userID int64) (vacancy.Rhythm, error)
	Tune(ctx context.Context, userID int64, k vacancy.Knob, v int) (vacancy.Rhythm, error)
	NextDigest(u domain.User, r vacancy.Rhythm) time.Time
	DigestPage(ctx context.Context, userID, digestID int64, page int) (vacancy.Digest, error)
	OpenCard(ctx context.Context, u domain.User, matchID int64) error
}

var _ Rhythms = (*vacancy.Service)(nil)

// zoneLine says which zone /settings' times are in, and that it is a
// guess when the user never chose one.
func (u *rhythmUI) zoneLine(r *Request) string {
	key := "rhythm.zone"
	if _, from := u.b.readerZone(r.User.TimeZone, r.User.MasterCity, r.Lang); from == zoneLang {
		key = "rhythm.zone_guessed"
	}
	return r.T(key, locales.Data{"Zone": locales.ZoneLabel(r.Lang, r.Zone, u.b.today()), "Offset": locales.ZoneOffset(u.b.today(), r.Zone)})
}

// Button actions of /settings (one id: the knob's value, see vacancy.Knob)
// and of a digest. A digest time's button sets it on or off (yn, yf);
// yt, a toggle, is what /settings messages sent before them carry.
var (
	actionRhythmMode    = NewAction("ym", 1)
	actionRhythmTime    = NewAction("yt", 1)
	actionRhythmTimeOn  = NewAction("yn", 1)
	actionRhythmTimeOff = NewAction("yf", 1)
	actionRhythmSize    = NewAction("ys", 1)
	actionRhythmQuiet   = NewAction("yq", 1)
	actionRhythmCap     = NewAction("yc", 1)
	actionDigestOpen    = NewAction("vo", 1) // match id
	actionDigestPage    = NewAction("vg", 2) // digest id, page (from 0)
)

// digestTitleBudget and digestEmployerBudget keep a digest page of the
// largest size well inside one message.
const (
	digestTitleBudget    = 120
	digestEmployerBudget = 60
)

type rhythmUI struct {
	b *Bot
	r Rhythms
}

// RegisterRhythm adds /settings and the digests' buttons; call it before Run.
func (b *Bot) RegisterRhythm(r Rhythms) {
	u := &rhythmUI{b: b, r: r}
	b.Handle(Command{Name: "settings", Desc: "cmd.settings", Section: SectionJobs, Handle: u.settings})
	for a, k := range map[Action]vacancy.Knob{
		actionRhythmMode: vacancy.KnobMode, actionRhythmTime: vacancy.KnobTime, actionRhythmSize: vacancy.KnobSize,
		actionRhythmTimeOn: vacancy.KnobTimeOn, actionRhythmTimeOff: vacancy.KnobTimeOff,
		actionRhythmQuiet: vacancy.KnobQuiet, actionRhythmCap: vacancy.KnobCap,
	} {
		b.HandleButton(a, u.tune(k))
	}
	b.HandleButton(actionDigestOpen, u.open)
	b.HandleButton(actionDigestPage, u.page)
}

// settings is /settings (private only, as every job seeker's command):
// the rhythm with its buttons.
func (u *rhythmUI) settings(r *Request) error {
	rh, err := u.r.Rhythm(r.Ctx, r.User.ID)
	if err != nil {
		return err
	}
	return r.ReplyRendered(u.render(r, rh))
}

// tune takes a /settings press: only on the presser's own /settings
// message (their private chat), and only a value the buttons offer; the
// message is edited in place to the rhythm stored.
func (u *rhythmUI) tune(k vacancy.Knob) CallbackHandler {
	return func(r *Request, cb Callback) error {
		if chatID, _, ok := pressedMessage(r); !ok || chatID != r.User.ID {
			return r.Forbidden()
		}
		rh, err := u.r.Tune(r.Ctx, r.User.ID, k, int(cb.IDs[0]))
		var ie *domain.InputError
		switch {
		case errors.Is(err, vacancy.ErrBadKnob):
			return r.Alert("error.callback_invalid")
		case errors.As(err, &ie):
			return r.AlertText(r.InputText(ie, ""))
		case err != nil:
			return err
		}
		text, kb, err := u.render(r, rh)
		if err != nil {
			return err
		}
		u.b.editPressed(r, text, kb)
		return r.Toast(r.T("rhythm.saved"))
	}
}

// clockTime writes a minute of the day as 24-hour time, as all three
// languages' readers write a schedule.
func clockTime(m int) string { return fmt.Sprintf("%02d:%02d", m/60, m%60) }

func spanText(q vacancy.Span) string { return clockTime(q.From) + "–" + clockTime(q.To) }

// dailyTag writes a minute of the day (a setting: a digest time, an end
// of the quiet hours) in the reader's zone, with the moment it next comes
// at or after from, its words kept (format ""): a daily time is the
// reader's wall clock, which a client rewriting it into its device's zone
// would misstate.
func dailyTag(r *Request, minute int, from time.Time) (locales.HTML, time.Time) {
	zone := r.Zone
	if zone == nil {
		zone = time.UTC
	}
	l := from.In(zone)
	at := time.Date(l.Year(), l.Month(), l.Day(), minute/60, minute%60, 0, 0, zone)
	if at.Before(from) {
		at = time.Date(l.Year(), l.Month(), l.Day()+1, minute/60, minute%60, 0, 0, zone)
	}
	return locales.Stamp(clockTime(minute), at, ""), at
}

// checked marks the button of the current choice.
func checked(on bool, label string) string {
	if on {
		return "✓ " + label
	}
	return label
}

// render is the /settings message for rh.
func (u *rhythmUI) render(r *Request, rh vacancy.Rhythm) (string, *tele.ReplyMarkup, error) {
	kb, err := rhythmButtons(r, rh)
	if err != nil {
		return "", nil, err
	}
	return u.rhythmText(r, rh), kb, nil
}

// rhythmText is the /settings message's text: the rhythm as it stands.
func (u *rhythmUI) rhythmText(r *Request, rh vacancy.Rhythm) string {
	digest := rh.Mode == vacancy.ModeDigest
	lines := []string{r.T("rhythm.header"), ""}
	// The daily times carry the moments they next come, from the next
	// digest on where there is one (the rhythm's own clock).
	from := u.b.today()
	if digest {
		next := u.r.NextDigest(r.User, rh)
		if !next.IsZero() {
			from = next
		}
		times := make([]string, len(rh.DigestTimes))
		for i, m := range rh.DigestTimes {
			tag, _ := dailyTag(r, m, from)
			times[i] = string(tag)
		}
		lines = append(lines, r.T("rhythm.mode_digest"),
			r.T("rhythm.times", locales.Data{"Times": locales.HTML(strings.Join(times, ", "))}),
			r.T("rhythm.size", locales.Data{"Size": rh.DigestSize}))
		if !next.IsZero() {
			lines = append(lines, r.T("rhythm.next", locales.Data{"When": r.Time(next)}))
		}
	} else {
		lines = append(lines, r.T("rhythm.mode_instant"))
	}
	if rh.Quiet.On() {
		start, at := dailyTag(r, rh.Quiet.From, from)
		end, _ := dailyTag(r, rh.Quiet.To, at)
		lines = append(lines, r.T("rhythm.quiet_on", locales.Data{"Hours": start + "–" + end}))
	} else {
		lines = append(lines, r.T("rhythm.quiet_off"))
	}
	switch {
	case rh.DailyCap > 0 && digest:
		lines = append(lines, r.T("rhythm.cap_digest", locales.Data{"Cap": rh.DailyCap}))
	case rh.DailyCap > 0:
		lines = append(lines, r.T("rhythm.cap_on", locales.Data{"Cap": rh.DailyCap}))
	default:
		lines = append(lines, r.T("rhythm.cap_off"))
	}
	lines = append(lines, "", u.zoneLine(r))
	return strings.Join(lines, "\n")
}

// rhythmButtons are the /settings message's buttons: a row a setting,
// its current choice checked.
func rhythmButtons(r *Request, rh vacancy.Rhythm) (*tele.ReplyMarkup, error) {
	digest := rh.Mode == vacancy.ModeDigest
	kb := &tele.ReplyMarkup{}
	var rowErr error
	type bt = struct {
		label string
		v     int
		a     Action
	}
	// A button's own action, where it has one, is its row's otherwise.
	row := func(a Action, buttons ...bt) {
		var out []tele.InlineButton
		for _, b := range buttons {
			act := a
			if b.a != (Action{}) {
				act = b.a
			}
			data, err := Encode(act, int64(b.v))
			if err != nil {
				rowErr = err
				return
			}
			out = append(out, tele.InlineButton{Text: b.label, Data: data})
		}
		kb.InlineKeyboard = append(kb.InlineKeyboard, out)
	}
	row(actionRhythmMode, bt{checked(!digest, r.T("rhythm.button_instant")), 0, Action{}}, bt{checked(digest, r.T("rhythm.button_digest")), 1, Action{}})
	if digest {
		var times []bt
		for _, m := range vacancy.DigestTimePresets {
			on := false
			for _, t := range rh.DigestTimes {
				on = on || t == m
			}
			// The button sets what pressing it means now: a press run
			// twice sets it twice, never back.
			set := actionRhythmTimeOn
			if on {
				set = actionRhythmTimeOff
			}
			times = append(times, bt{checked(on, clockTime(m)), m, set})
		}
		row(actionRhythmTime, times...)
		var sizes []bt
		for _, n := range vacancy.DigestSizePresets {
			sizes = append(sizes, bt{checked(rh.DigestSize == n, r.T("rhythm.button_size", locales.Data{"Size": n})), n, Action{}})
		}
		row(actionRhythmSize, sizes...)
	}
	var quiet []bt
	for i, q := range vacancy.QuietPresets {
		quiet = append(quiet, bt{checked(rh.Quiet == q, spanText(q)), i + 1, Action{}})
	}
	quiet = append(quiet, bt{checked(!rh.Quiet.On(), r.T("rhythm.button_quiet_off")), 0, Action{}})
	row(actionRhythmQuiet, quiet...)
	if !digest {
		var caps []bt
		for _, n := range vacancy.CapPresets {
			caps = append(caps, bt{checked(rh.DailyCap == n, r.T("rhythm.button_cap", locales.Data{"Cap": n})), n, Action{}})
		}
		caps = append(caps, bt{checked(rh.DailyCap == 0, r.T("rhythm.button_cap_off")), 0, Action{}})
		row(actionRhythmCap, caps...)
	}
	return kb, rowErr
}

// Zone is the zone the user reads times in (vacancy.Notifier): the one
// /timezone shows them.
func (rd *Renderer) Zone(u domain.User) *time.Location {
	loc, _ := rd.readerZone(u.TimeZone, u.MasterCity, u.Lang())
	return loc
}

// Digest renders a page of a digest (vacancy.Notifier): a line per
// vacancy, best score first, a numbered button per vacancy for its card
// and ◀ ▶ for the other pages.
func (rd *Renderer) Digest(d vacancy.Digest) []domain.Message {
	text, kb, err := rd.digestPage(d.Lang, d)
	if err != nil {
		rd.log.Error("render digest", "digest", d.ID, "err", err)
		return nil
	}
	return Messages(d.UserID, domain.KindDigest, d.ID, text, kb)
}

// statusMarks mark a digest's vacancies the user has already seen or decided.
var statusMarks = map[vacancy.Status]string{
	vacancy.SentToUser: "📨 ", vacancy.Applied: "✅ ", vacancy.NotInterested: "✖️ ",
}

func (rd *Renderer) digestPage(lang string, d vacancy.Digest) (string, *tele.ReplyMarkup, error) {
	cat := rd.cat
	lines := []string{cat.T(lang, "rhythm.digest_header", locales.Data{"Total": d.Total})}
	if d.Pages() > 1 {
		lines = append(lines, cat.T(lang, "rhythm.digest_page", locales.Data{"Page": d.Page + 1, "Pages": d.Pages()}))
	}
	lines = append(lines, "")
	kb := &tele.ReplyMarkup{}
	var numbers []tele.InlineButton
	for i, it := range d.Items {
		rank := d.Page*d.Size + i + 1
		parts := []string{"<b>" + clip(oneLine(it.Vacancy.Title), digestTitleBudget) + "</b>"}
		if e := clip(oneLine(it.Vacancy.Employer), digestEmployerBudget); e != "" {
			parts = append(parts, e)
		}
		if s := clip(salaryLine(cat, lang, it.Vacancy.Salary), salaryBudget); s != "" {
			parts = append(parts, s)
		}
		parts = append(parts, "⭐ "+strconv.Itoa(min(max(it.Score, 0), 100)))
		lines = append(lines, strconv.Itoa(rank)+". "+statusMarks[it.Status]+strings.Join(parts, " · "))
		data, err := Encode(actionDigestOpen, it.MatchID)
		if err != nil {
			return "", nil, err
		}
		numbers = append(numbers, tele.InlineButton{Text: strconv.Itoa(rank), Data: data})
	}
	for len(numbers) > 0 {
		n := min(len(numbers), 5)
		kb.InlineKeyboard = append(kb.InlineKeyboard, numbers[:n])
		numbers = numbers[n:]
	}
	if d.Pages() > 1 {
		var nav []tele.InlineButton
		if d.Page > 0 {
			data, err := Encode(actionDigestPage, d.ID, int64(d.Page-1))
			if err != nil {
				return "", nil, err
			}
			nav = append(nav, tele.InlineButton{Text: "◀", Data: data})
		}
		if d.Page+1 < d.Pages() {
			data, err := Encode(actionDigestPage, d.ID, int64(d.Page+1))
			if err != nil {
				return "", nil, err
			}
			nav = append(nav, tele.InlineButton{Text: cat.T(lang, "rhythm.button_more", locales.Data{"Left": d.Total - (d.Page+1)*d.Size}), Data: data})
		}
		kb.InlineKeyboard = append(kb.InlineKeyboard, nav)
	}
	lines = append(lines, "", cat.T(lang, "rhythm.digest_hint"))
	return strings.Join(lines, "\n"), kb, nil
}

// page turns a digest's page, editing it in place; only its user's press.
func (u *rhythmUI) page(r *Request, cb Callback) error {
	d, err := u.r.DigestPage(r.Ctx, r.User.ID, cb.IDs[0], int(min(cb.IDs[1], 1<<20)))
	switch {
	case errors.Is(err, vacancy.ErrForbidden):
		return r.Forbidden()
	case errors.Is(err, domain.ErrNotFound):
		return r.Alert("error.callback_invalid")
	case err != nil:
		return err
	}
	text, kb, err := u.b.digestPage(r.Lang, d)
	if err != nil {
		return err
	}
	u.b.editPressed(r, text, kb)
	return r.Ack()
}

// open sends the full card of a digest's vacancy, once; only its user's press.
func (u *rhythmUI) open(r *Request, cb Callback) error {
	err := u.r.OpenCard(r.Ctx, r.User, cb.IDs[0])
	switch {
	case errors.Is(err, vacancy.ErrForbidden):
		return r.Forbidden()
	case errors.Is(err, domain.ErrNotFound):
		return r.Alert("error.callback_invalid")
	case errors.Is(err, vacancy.ErrCardSent):
		return r.Alert("rhythm.card_sent")
	case err != nil:
		return err
	}
	return r.Toast(r.T("rhythm.card_coming"))
}
