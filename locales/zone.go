package locales

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	// The zones people choose must load on any host, the distroless
	// image included, whatever its /usr/share/zoneinfo holds.
	_ "time/tzdata"
)

// LangZone is the zone to assume for a reader of lang who has not chosen
// one: most of the bot's Russian readers live on Moscow time, its
// Ukrainian readers on Kyiv's; English says nothing about a place.
func LangZone(lang string) *time.Location {
	switch lang {
	case "ru":
		return mustZone("Europe/Moscow")
	case "uk":
		return mustZone("Europe/Kyiv")
	}
	return time.UTC
}

// zones caches loaded locations: time.LoadLocation reads and parses the
// zone's data on every call, and a reader's zone is resolved for every
// update and every time written. Only names that loaded are kept, so the
// cache is bounded by the tz database.
var zones sync.Map // name → *time.Location

func loadLocation(name string) (*time.Location, error) {
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	zones.Store(name, loc)
	return loc, nil
}

func mustZone(name string) *time.Location {
	loc, err := loadLocation(name)
	if err != nil {
		panic(fmt.Sprintf("embedded tzdata lacks %s: %v", name, err))
	}
	return loc
}

// city is a place people name when asked for their time zone, with its
// names in each language (the first is the label) and other spellings.
type city struct {
	zone    string
	names   map[string]string // language → the name a time's label shows
	aliases []string
}

// cities are the places /timezone knows by name. A zone's label is the
// first city listed with it.
var cities = []city{
	{"Europe/Moscow", map[string]string{"en": "Moscow", "ru": "Москва", "uk": "Москва"}, []string{"msk", "мск"}},
	{"Europe/Moscow", map[string]string{"en": "Saint Petersburg", "ru": "Санкт-Петербург", "uk": "Санкт-Петербург"},
		[]string{"st petersburg", "st. petersburg", "petersburg", "spb", "петербург", "спб", "питер"}},
	{"Europe/Moscow", map[string]string{"en": "Kazan", "ru": "Казань", "uk": "Казань"}, nil},
	{"Europe/Moscow", map[string]string{"en": "Nizhny Novgorod", "ru": "Нижний Новгород", "uk": "Нижній Новгород"}, nil},
	{"Europe/Kyiv", map[string]string{"en": "Kyiv", "ru": "Киев", "uk": "Київ"}, []string{"kiev"}},
	{"Europe/Kyiv", map[string]string{"en": "Kharkiv", "ru": "Харьков", "uk": "Харків"}, []string{"kharkov"}},
	{"Europe/Kyiv", map[string]string{"en": "Odesa", "ru": "Одесса", "uk": "Одеса"}, []string{"odessa"}},
	{"Europe/Kyiv", map[string]string{"en": "Lviv", "ru": "Львов", "uk": "Львів"}, []string{"lvov"}},
	{"Europe/Kyiv", map[string]string{"en": "Dnipro", "ru": "Днепр", "uk": "Дніпро"}, nil},
	{"Europe/Minsk", map[string]string{"en": "Minsk", "ru": "Минск", "uk": "Мінськ"}, nil},
	{"Asia/Almaty", map[string]string{"en": "Almaty", "ru": "Алматы", "uk": "Алмати"}, []string{"alma-ata", "алма-ата"}},
	{"Asia/Almaty", map[string]string{"en": "Astana", "ru": "Астана", "uk": "Астана"}, nil},
	{"Asia/Tashkent", map[string]string{"en": "Tashkent", "ru": "Ташкент", "uk": "Ташкент"}, nil},
	{"Asia/Bishkek", map[string]string{"en": "Bishkek", "ru": "Бишкек", "uk": "Бішкек"}, nil},
	{"Asia/Tbilisi", map[string]string{"en": "Tbilisi", "ru": "Тбилиси", "uk": "Тбілісі"}, nil},
	{"Asia/Yerevan", map[string]string{"en": "Yerevan", "ru": "Ереван", "uk": "Єреван"}, nil},
	{"Asia/Baku", map[string]string{"en": "Baku", "ru": "Баку", "uk": "Баку"}, nil},
	{"Europe/Chisinau", map[string]string{"en": "Chisinau", "ru": "Кишинёв", "uk": "Кишинів"}, nil},
	{"Europe/Kaliningrad", map[string]string{"en": "Kaliningrad", "ru": "Калининград", "uk": "Калінінград"}, nil},
	{"Europe/Samara", map[string]string{"en": "Samara", "ru": "Самара", "uk": "Самара"}, nil},
	{"Asia/Yekaterinburg", map[string]string{"en": "Yekaterinburg", "ru": "Екатеринбург", "uk": "Єкатеринбург"}, nil},
	{"Asia/Omsk", map[string]string{"en": "Omsk", "ru": "Омск", "uk": "Омськ"}, nil},
	{"Asia/Novosibirsk", map[string]string{"en": "Novosibirsk", "ru": "Новосибирск", "uk": "Новосибірськ"}, nil},
	{"Asia/Krasnoyarsk", map[string]string{"en": "Krasnoyarsk", "ru": "Красноярск", "uk": "Красноярськ"}, nil},
	{"Asia/Irkutsk", map[string]string{"en": "Irkutsk", "ru": "Иркутск", "uk": "Іркутськ"}, nil},
	{"Asia/Vladivostok", map[string]string{"en": "Vladivostok", "ru": "Владивосток", "uk": "Владивосток"}, nil},
	{"Europe/Warsaw", map[string]string{"en": "Warsaw", "ru": "Варшава", "uk": "Варшава"}, nil},
	{"Europe/Vilnius", map[string]string{"en": "Vilnius", "ru": "Вильнюс", "uk": "Вільнюс"}, nil},
	{"Europe/Riga", map[string]string{"en": "Riga", "ru": "Рига", "uk": "Рига"}, nil},
	{"Europe/Tallinn", map[string]string{"en": "Tallinn", "ru": "Таллин", "uk": "Таллінн"}, nil},
	{"Europe/Prague", map[string]string{"en": "Prague", "ru": "Прага", "uk": "Прага"}, nil},
	{"Europe/Berlin", map[string]string{"en": "Berlin", "ru": "Берлин", "uk": "Берлін"}, nil},
	{"Europe/Paris", map[string]string{"en": "Paris", "ru": "Париж", "uk": "Париж"}, nil},
	{"Europe/London", map[string]string{"en": "London", "ru": "Лондон", "uk": "Лондон"}, nil},
	{"Europe/Istanbul", map[string]string{"en": "Istanbul", "ru": "Стамбул", "uk": "Стамбул"}, nil},
	{"Asia/Dubai", map[string]string{"en": "Dubai", "ru": "Дубай", "uk": "Дубай"}, nil},
	{"America/New_York", map[string]string{"en": "New York", "ru": "Нью-Йорк", "uk": "Нью-Йорк"}, []string{"nyc"}},
	{"America/Los_Angeles", map[string]string{"en": "Los Angeles", "ru": "Лос-Анджелес", "uk": "Лос-Анджелес"}, nil},
}

// zoneLinks are old names tzdata still loads under which a label is
// looked up by its current name.
var zoneLinks = map[string]string{"Europe/Kiev": "Europe/Kyiv"}

var (
	cityByName  = map[string]string{} // normalised name → zone
	labelByZone = map[string]city{}
)

func init() {
	for _, c := range cities {
		for _, n := range c.names {
			cityByName[normName(n)] = c.zone
		}
		for _, n := range c.aliases {
			cityByName[normName(n)] = c.zone
		}
		if _, ok := labelByZone[c.zone]; !ok {
			labelByZone[c.zone] = c
		}
	}
}

// normName folds what people type for a city: case, ё, hyphens and
// repeated spaces.
func normName(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.NewReplacer("ё", "е", "-", " ", "_", " ", ".", ". ").Replace(s)
	return strings.Join(strings.Fields(s), " ")
}

// CityZone is the zone of a city /timezone knows by name ("Odesa",
// "Одеса", "odessa"), for a reader who named a city but no zone.
func CityZone(name string) (*time.Location, bool) {
	zone, ok := cityByName[normName(name)]
	if !ok {
		return nil, false
	}
	loc, err := loadLocation(zone)
	return loc, err == nil
}

// Zone errors say what was wrong with what the user wrote.
var (
	// ErrZoneUnknown: neither an IANA name, an offset nor a known city.
	ErrZoneUnknown = errors.New("unknown time zone")
	// ErrZoneOffset: an offset outside −12:00…+14:00 or not on a quarter hour.
	ErrZoneOffset = errors.New("UTC offset out of range")
)

// ParseZone reads a time zone as people write it: an IANA name
// ("Europe/Berlin", any case), a UTC offset ("+3", "-05:30", "UTC+3",
// "GMT+03:00", "UTC"), or a city in English, Russian or Ukrainian
// ("Berlin", "Москва", "Київ"). It returns the name to store (the IANA
// name, or "UTC+03:00" for an offset), which LoadZone reads back.
func ParseZone(s string) (string, *time.Location, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", nil, ErrZoneUnknown
	}
	if zone, ok := cityByName[normName(s)]; ok {
		loc, err := loadLocation(zone)
		return zone, loc, err
	}
	if name, loc, ok, err := parseOffset(s); ok {
		return name, loc, err
	}
	if loc, ok := loadIANA(s); ok {
		return loc.String(), loc, nil
	}
	return "", nil, ErrZoneUnknown
}

// loadIANA loads an IANA name whatever its case: "europe/moscow" and
// "AMERICA/NEW_YORK" are what people type too.
func loadIANA(s string) (*time.Location, bool) {
	if !strings.Contains(s, "/") || strings.ContainsAny(s, " \\.") {
		return nil, false
	}
	try := []string{s}
	parts := strings.Split(strings.ToLower(s), "/")
	for i, p := range parts {
		words := strings.Split(p, "_")
		for j, w := range words {
			if w != "" {
				words[j] = strings.ToUpper(w[:1]) + w[1:]
			}
		}
		parts[i] = strings.Join(words, "_")
	}
	try = append(try, strings.Join(parts, "/"))
	for _, name := range try {
		if loc, err := loadLocation(name); err == nil {
			return loc, true
		}
	}
	return nil, false
}

// parseOffset reads "+3", "-5:30", "+0530", "UTC+03:00", "GMT-4" and a
// bare "UTC"/"GMT"/"Z". ok is false when s is not written as an offset at
// all; err is set when it is one but out of range.
func parseOffset(s string) (name string, loc *time.Location, ok bool, err error) {
	u := strings.ToUpper(strings.ReplaceAll(s, " ", ""))
	u = strings.ReplaceAll(u, "−", "-") // a typographic minus
	for _, p := range []string{"UTC", "GMT"} {
		u = strings.TrimPrefix(u, p)
	}
	if u == "" || u == "Z" {
		return "UTC", time.UTC, true, nil
	}
	if len(u) < 2 || (u[0] != '+' && u[0] != '-') {
		return "", nil, false, nil
	}
	sign := 1
	if u[0] == '-' {
		sign = -1
	}
	body := u[1:]
	hh, mm, colon := strings.Cut(body, ":")
	if !colon && len(body) > 2 {
		hh, mm = body[:len(body)-2], body[len(body)-2:]
	}
	h, err1 := strconv.Atoi(hh)
	m := 0
	var err2 error
	if mm != "" || colon {
		m, err2 = strconv.Atoi(mm)
	}
	// Atoi takes a sign of its own: "--5" or "+-5" is no offset.
	if err1 != nil || err2 != nil || len(hh) > 2 || len(mm) > 2 || !digits(hh) || !digits(mm) {
		return "", nil, false, nil
	}
	off := sign * (h*60 + m)
	if m%15 != 0 || m > 59 || off < -12*60 || off > 14*60 {
		return "", nil, true, ErrZoneOffset
	}
	name = offsetName(off)
	return name, time.FixedZone(name, off*60), true, nil
}

// digits reports whether s holds only ASCII digits ("" does).
func digits(s string) bool {
	return strings.Trim(s, "0123456789") == ""
}

// offsetName is "UTC", "UTC+03:00" or "UTC-05:30" for an offset in minutes.
func offsetName(min int) string {
	if min == 0 {
		return "UTC"
	}
	sign := '+'
	if min < 0 {
		sign, min = '-', -min
	}
	return fmt.Sprintf("UTC%c%02d:%02d", sign, min/60, min%60)
}

// LoadZone reads back a name ParseZone returned.
func LoadZone(name string) (*time.Location, error) {
	if strings.HasPrefix(name, "UTC+") || strings.HasPrefix(name, "UTC-") {
		_, loc, ok, err := parseOffset(name)
		if !ok || err != nil {
			return nil, fmt.Errorf("time zone %q: %w", name, ErrZoneUnknown)
		}
		return loc, nil
	}
	if name == "" || name == "Local" {
		return nil, fmt.Errorf("time zone %q: %w", name, ErrZoneUnknown)
	}
	loc, err := loadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("time zone %q: %w", name, err)
	}
	return loc, nil
}

// ZoneLabel names loc at the moment at for a reader of lang: a city
// ("Москва", "Berlin") when the zone is one of the known cities', else
// the zone's abbreviation then ("CET" in winter, "CEST" in summer), else
// its offset then ("UTC+05:00"). A time is named with its own moment's:
// a summer time labelled with the winter's abbreviation is an hour off.
func ZoneLabel(lang string, loc *time.Location, at time.Time) string {
	if loc == nil {
		loc = time.UTC
	}
	name := loc.String()
	if n, ok := zoneLinks[name]; ok {
		name = n
	}
	if c, ok := labelByZone[name]; ok {
		return c.names[langOrDefault(lang)]
	}
	if name == "UTC" || strings.HasPrefix(name, "UTC+") || strings.HasPrefix(name, "UTC-") {
		return name
	}
	abbr, off := at.In(loc).Zone()
	if abbr != "" && (abbr[0] < '0' || abbr[0] > '9') && abbr[0] != '+' && abbr[0] != '-' {
		return abbr
	}
	return offsetName(off / 60)
}

// ZoneOffset is loc's offset from UTC at t, "UTC+03:00".
func ZoneOffset(t time.Time, loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	_, off := t.In(loc).Zone()
	return offsetName(off / 60)
}
