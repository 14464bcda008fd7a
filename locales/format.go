package locales

import (
	"fmt"
	"html"
	"strings"
	"time"

	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Number writes n the way a reader of lang groups digits: 250,000 in
// English, 250 000 (a no-break space) in Russian and Ukrainian.
func Number(lang string, n int64) string {
	return message.NewPrinter(tag(lang)).Sprintf("%d", n)
}

// Decimal writes x with one digit after the point the way a reader of
// lang does: 4.7 in English, 4,7 in Russian and Ukrainian.
func Decimal(lang string, x float64) string {
	return message.NewPrinter(tag(lang)).Sprintf("%.1f", x)
}

func tag(lang string) language.Tag {
	if !Supported(lang) {
		lang = Languages[0]
	}
	return language.Make(lang)
}

// currencySigns are the symbols people write for the currencies HH
// quotes; HH's own code for the rouble is the pre-1998 RUR.
var currencySigns = map[string]string{
	"RUR": "₽", "RUB": "₽", "USD": "$", "EUR": "€", "KZT": "₸", "UAH": "₴",
	"BYR": "Br", "BYN": "Br", "UZS": "сўм", "GEL": "₾", "AZN": "₼", "KGS": "сом",
}

// Money writes an amount with its currency as lang writes it: "$3,000" and
// "250,000 ₽" in English, "250 000 ₽" in Russian and Ukrainian. An unknown
// code stays as the code after the number.
func Money(lang string, amount int64, currency string) string {
	code := strings.ToUpper(strings.TrimSpace(currency))
	sign, ok := currencySigns[code]
	if !ok {
		sign = code
	}
	n := Number(lang, amount)
	if sign == "" {
		return n
	}
	if lang == "en" && (code == "USD" || code == "EUR") {
		return sign + n
	}
	return n + "\u00a0" + sign
}

// durationUnits are each language's short unit names, largest first.
var durationUnits = map[string][4]string{
	"en": {"d", "h", "min", "s"},
	"ru": {"д", "ч", "мин", "с"},
	"uk": {"д", "год", "хв", "с"},
}

// Duration writes d for a reader: at most two units, largest first, e.g.
// "5 min 58 s", "2 ч 5 мин", "3 д 4 год"; under a second "less than a
// second" in lang's words, never Go's "5m58s" or "1ms".
func Duration(lang string, d time.Duration) string {
	units, ok := durationUnits[lang]
	if !ok {
		units = durationUnits[Languages[0]]
	}
	if d < 0 {
		d = -d
	}
	if d < time.Second {
		return lessThanSecond[langOrDefault(lang)]
	}
	d = d.Round(time.Second)
	parts := []int64{int64(d / (24 * time.Hour)), int64(d / time.Hour % 24), int64(d / time.Minute % 60), int64(d / time.Second % 60)}
	var out []string
	for i, v := range parts {
		if v == 0 && len(out) == 0 {
			continue
		}
		if len(out) == 2 {
			break
		}
		if v != 0 {
			out = append(out, fmt.Sprintf("%d\u00a0%s", v, units[i]))
		} else if len(out) == 1 {
			// "2 h" rather than "2 h 0 min": the second unit is dropped
			// when it is zero, and nothing smaller replaces it.
			break
		}
	}
	return strings.Join(out, " ")
}

var lessThanSecond = map[string]string{"en": "under a second", "ru": "меньше секунды", "uk": "менше секунди"}

func langOrDefault(lang string) string {
	if Supported(lang) {
		return lang
	}
	return Languages[0]
}

// monthNames are each language's abbreviated month names as a date
// writes them (the genitive in Russian and Ukrainian: "26 нояб.").
var monthNames = map[string][12]string{
	"en": {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"},
	"ru": {"янв.", "февр.", "мар.", "апр.", "мая", "июн.", "июл.", "авг.", "сент.", "окт.", "нояб.", "дек."},
	"uk": {"січ.", "лют.", "бер.", "квіт.", "трав.", "черв.", "лип.", "серп.", "вер.", "жовт.", "лист.", "груд."},
}

// Time writes the moment t for a reader of lang in the zone loc, naming
// the zone so nobody takes it for their own: "26 Nov, 04:07 (Moscow)",
// "26 нояб., 04:07 (Москва)", "26 лист., 04:07 (Київ)". The year is
// written only when it is not now's in loc. now is the caller's clock's,
// not the host's: a demo or test set in another year (CLOCK_START) reads
// as it would then. A nil loc is UTC.
func Time(lang string, t time.Time, loc *time.Location, now time.Time) string {
	if loc == nil {
		loc = time.UTC
	}
	local := t.In(loc)
	return fmt.Sprintf("%s, %02d:%02d (%s)", Date(lang, local, now), local.Hour(), local.Minute(), ZoneLabel(lang, loc, t))
}

// TimeTag is Time as Telegram HTML that also carries the moment itself:
// a date_time entity (<tg-time>, Bot API 9.5), which a client that knows
// it shows in its own locale and zone ("dt": the date and the time). The
// text stays in loc for clients that do not, and with its zone's name
// inside the entity, so a client that rewrites the time drops the name
// with it. The sender takes the tags out for a server that refuses them.
func TimeTag(lang string, t time.Time, loc *time.Location, now time.Time) HTML {
	return Stamp(Time(lang, t, loc, now), t, "dt")
}

// DateTag is Date as HTML with a date_time entity showing the day ("d").
// The entity's moment is noon of that day in t's location, so the day
// it names is the same in every zone within twelve hours of it.
func DateTag(lang string, t, now time.Time) HTML {
	y, m, d := t.Date()
	return Stamp(Date(lang, t, now), time.Date(y, m, d, 12, 0, 0, 0, t.Location()), "d")
}

// Stamp writes text, which says the moment t, as a date_time entity of
// format ("t" a time of day, "d" a date, "dt" both; see the Bot API's
// date-time entity formatting).
func Stamp(text string, t time.Time, format string) HTML {
	return HTML(fmt.Sprintf(`<tg-time unix="%d" format="%s">%s</tg-time>`, t.Unix(), format, html.EscapeString(text)))
}

// Date writes t's calendar day as it stands in t's own location, for a
// reader of lang: "23 Nov", "23 нояб.", with the year when it is not
// now's there ("23 нояб. 2024"), now being the caller's clock's (Time).
func Date(lang string, t, now time.Time) string {
	s := fmt.Sprintf("%d %s", t.Day(), monthNames[langOrDefault(lang)][t.Month()-1])
	if t.Year() != now.In(t.Location()).Year() {
		s += fmt.Sprintf(" %d", t.Year())
	}
	return s
}
