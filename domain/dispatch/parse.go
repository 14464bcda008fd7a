package dispatch

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"switchboard/domain"
)

// fields splits command arguments at spaces; a double-quoted part is one
// field, so a city like "Saint Petersburg" fits. An unclosed quote runs to
// the end.
func fields(s string) []string {
	f, _ := fieldsN(s, -1)
	return f
}

// fieldsN reads up to n fields (all if n < 0) and returns the text after
// them as it was written, line breaks included.
func fieldsN(s string, n int) (fields []string, rest string) {
	var cur strings.Builder
	inQuote, have := false, false
	for i, r := range s {
		if n >= 0 && len(fields) == n {
			return fields, strings.TrimSpace(s[i:])
		}
		switch {
		case r == '"' || r == '«' || r == '»' || r == '“' || r == '”':
			inQuote = !inQuote
			have = true
		case unicode.IsSpace(r) && !inQuote:
			if have {
				fields = append(fields, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		fields = append(fields, cur.String())
	}
	return fields, ""
}

// cleanPlace trims and collapses a city or district; "" if unusable.
func cleanPlace(s string) (string, error) {
	return cleanField(s, MaxPlace, "dispatch.error_place", "dispatch.error_place_long")
}

func cleanSkill(s string) (string, error) {
	return cleanField(strings.ToLower(s), MaxSkill, "dispatch.error_skill", "dispatch.error_skill_long")
}

// cleanField collapses s's white space and refuses it, with the key empty
// or long, when nothing or more than limit characters are left.
func cleanField(s string, limit int, empty, long string) (string, error) {
	s = strings.Join(strings.Fields(s), " ")
	switch {
	case s == "":
		return "", inputError(empty, "")
	case utf8.RuneCountInString(s) > limit:
		return "", inputError(long, s)
	}
	return s, nil
}

// missingMaster names what is missing from `/master` by how many fields
// were given, with the last field read (Arg) so the user sees where the
// reading stopped.
var missingMaster = []string{"master.usage", "master.error_no_district", "master.error_no_skills"}

// ParseMaster reads `/master <city> <district> <skill[,skill]>`.
func ParseMaster(args string) (city, district string, skills []string, err error) {
	f := fields(args)
	if len(f) < 3 {
		return "", "", nil, missing(missingMaster, f)
	}
	if city, err = cleanPlace(f[0]); err != nil {
		return "", "", nil, err
	}
	if district, err = cleanPlace(f[1]); err != nil {
		return "", "", nil, err
	}
	seen := map[string]bool{}
	// Skills may be written "a,b", "a, b" or "a b".
	for _, part := range strings.FieldsFunc(strings.Join(f[2:], ","), func(r rune) bool { return r == ',' || r == ';' }) {
		if strings.TrimSpace(part) == "" {
			continue
		}
		sk, err := cleanSkill(part)
		if err != nil {
			return "", "", nil, err
		}
		if !seen[sk] {
			seen[sk] = true
			skills = append(skills, sk)
		}
	}
	switch {
	case len(skills) == 0:
		return "", "", nil, inputError("dispatch.error_skill", "")
	case len(skills) > MaxSkills:
		return "", "", nil, inputError("dispatch.error_skills_many", "")
	}
	return city, district, skills, nil
}

// missingOrder names what is missing from `/order`, as missingMaster.
var missingOrder = []string{"order.usage", "order.error_no_district", "order.error_no_skill", "order.error_no_price"}

// missing is the refusal of a command that stopped after the fields f:
// keys[len(f)], with the last field read.
func missing(keys []string, f []string) *domain.InputError {
	arg := ""
	if len(f) > 0 {
		arg = f[len(f)-1]
	}
	return inputError(keys[len(f)], arg)
}

// ParseOrder reads `/order <city> <district> <skill> <price> <description>`.
// Lines of the description that start with a label (orderLabels) are the
// optional fields, taken out of it: the address, the customer's name and
// phone, and the visit (`when: 2026-11-27 10:00-12:00`). now (UTC) places
// a date given without a year.
func ParseOrder(args string, now time.Time) (NewOrder, error) {
	f, rest := fieldsN(args, 4)
	if len(f) < 4 {
		return NewOrder{}, missing(missingOrder, f)
	}
	var o NewOrder
	var err error
	if o.City, err = cleanPlace(f[0]); err != nil {
		return NewOrder{}, err
	}
	if o.District, err = cleanPlace(f[1]); err != nil {
		return NewOrder{}, err
	}
	if o.Skill, err = cleanSkill(f[2]); err != nil {
		return NewOrder{}, err
	}
	price := strings.NewReplacer("_", "", "'", "", " ", "").Replace(f[3])
	o.Price, err = strconv.ParseInt(price, 10, 64)
	if err != nil || o.Price <= 0 || o.Price > MaxPrice {
		return NewOrder{}, inputError("order.error_price", f[3])
	}
	if rest == "" {
		return NewOrder{}, inputError("order.error_description_missing", f[3])
	}
	// The description is the rest as written (line breaks matter in it),
	// less the labeled lines.
	if o.Description, err = orderFields(rest, now, &o); err != nil {
		return NewOrder{}, err
	}
	switch {
	case o.Description == "":
		return NewOrder{}, inputError("order.error_description_missing", "")
	case utf8.RuneCountInString(o.Description) > MaxDescription:
		return NewOrder{}, inputError("order.error_description_long", "")
	}
	return o, nil
}

// A labeled field of /order.
type orderField int

const (
	fieldAddress orderField = iota
	fieldName
	fieldPhone
	fieldWhen
)

// orderLabels are the labels of the optional fields in every language,
// lower-case; a line starting with one and a colon is that field.
var orderLabels = map[string]orderField{
	"address": fieldAddress, "адрес": fieldAddress, "адреса": fieldAddress,
	"name": fieldName, "customer": fieldName, "имя": fieldName, "клиент": fieldName,
	"ім'я": fieldName, "ім’я": fieldName, "імʼя": fieldName, "клієнт": fieldName,
	"phone": fieldPhone, "tel": fieldPhone, "телефон": fieldPhone, "тел": fieldPhone,
	"when": fieldWhen, "visit": fieldWhen, "когда": fieldWhen, "коли": fieldWhen,
}

// fieldKeys name each field in error texts.
var fieldKeys = map[orderField]string{
	fieldAddress: "order.error_address", fieldName: "order.error_name",
	fieldPhone: "order.error_phone", fieldWhen: "order.error_when",
}

// orderFields takes the labeled lines out of the description into o and
// returns what is left, trimmed.
func orderFields(text string, now time.Time, o *NewOrder) (string, error) {
	var kept []string
	seen := map[orderField]bool{}
	for _, line := range strings.Split(text, "\n") {
		label, value, ok := strings.Cut(line, ":")
		field, known := orderLabels[strings.ToLower(strings.TrimSpace(label))]
		if !ok || !known {
			kept = append(kept, line)
			continue
		}
		value = strings.Join(strings.Fields(value), " ")
		if seen[field] {
			return "", inputError("order.error_field_twice", strings.TrimSpace(label))
		}
		if value == "" {
			return "", inputError("order.error_field_empty", strings.TrimSpace(label))
		}
		seen[field] = true
		var err error
		switch field {
		case fieldAddress:
			o.Contact.Address, err = cleanText(value, MaxAddress, fieldAddress)
		case fieldName:
			o.Contact.Name, err = cleanText(value, MaxName, fieldName)
		case fieldPhone:
			o.Contact.Phone, err = ParsePhone(value)
		case fieldWhen:
			o.Visit, err = ParseVisit(value, now)
		}
		if err != nil {
			return "", err
		}
	}
	return strings.Trim(strings.Join(kept, "\n"), " \t\r\n"), nil
}

func cleanText(s string, limit int, field orderField) (string, error) {
	if utf8.RuneCountInString(s) > limit {
		return "", inputError(fieldKeys[field], s)
	}
	return s, nil
}

// ParsePhone checks a phone number as written: digits, a leading +,
// spaces, dashes, dots and parentheses, MinPhoneDigits to MaxPhoneDigits
// digits. It is kept as written, spaces collapsed.
func ParsePhone(s string) (string, error) {
	s = strings.Join(strings.Fields(s), " ")
	digits := 0
	for i, r := range s {
		switch {
		case r >= '0' && r <= '9':
			digits++
		case r == '+' && i == 0, r == ' ', r == '-', r == '.', r == '(', r == ')':
		default:
			return "", inputError("order.error_phone", s)
		}
	}
	if digits < MinPhoneDigits || digits > MaxPhoneDigits || len(s) > MaxPhoneLen {
		return "", inputError("order.error_phone", s)
	}
	return s, nil
}

// ParseVisit reads `DATE [FROM-TO]`: the date as 2026-11-27, 27.11.2026
// or 27.11 (the next such day from now on, yesterday included: the
// city's day may be behind UTC's), the window as 10:00-12:00 or 10-12.
// A date before yesterday is refused: it is a typo, not a visit.
func ParseVisit(s string, now time.Time) (Visit, error) {
	s = strings.TrimSpace(s)
	bad := inputError("order.error_when", s)
	day, window, _ := strings.Cut(s, " ")
	day = strings.TrimRight(day, ",")
	window = strings.ReplaceAll(strings.TrimSpace(window), " ", "")
	yesterday := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC).AddDate(0, 0, -1)
	var v Visit
	var y, m, d int
	switch {
	case scan(day, "%4d-%2d-%2d", &y, &m, &d), scan(day, "%2d.%2d.%4d", &d, &m, &y):
	case scan(day, "%2d.%2d", &d, &m):
		y = yesterday.Year()
		if date(y, m, d).Before(yesterday) {
			y++
		}
	default:
		return Visit{}, bad
	}
	v.Date = date(y, m, d)
	if v.Date.IsZero() {
		return Visit{}, inputError("order.error_when_date", day)
	}
	if v.Date.Before(yesterday) {
		return Visit{}, inputError("order.error_when_past", day)
	}
	if window == "" {
		return v, nil
	}
	from, to, ok := strings.Cut(strings.NewReplacer("–", "-", "—", "-").Replace(window), "-")
	if !ok {
		return Visit{}, bad
	}
	var okFrom, okTo bool
	v.From, okFrom = clock(from)
	v.To, okTo = clock(to)
	switch {
	case !okFrom || !okTo:
		return Visit{}, bad
	case v.From >= v.To:
		return Visit{}, inputError("order.error_when_window", window)
	}
	return v, nil
}

// scan is fmt.Sscanf that must consume all of s and every verb.
func scan(s, format string, args ...any) bool {
	var tail string
	n, _ := fmt.Sscanf(s+"|", format+"%s", append(args, &tail)...)
	return n == len(args)+1 && tail == "|"
}

// date is that day at midnight UTC, or zero if there is no such day.
func date(y, m, d int) time.Time {
	t := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC)
	if y < 2000 || y > 9999 || t.Year() != y || t.Month() != time.Month(m) || t.Day() != d {
		return time.Time{}
	}
	return t
}

// clock reads a time of day, "10", "9:30" or "09:30".
func clock(s string) (time.Duration, bool) {
	h, mm, hasMin := strings.Cut(s, ":")
	if h == "" || len(h) > 2 || (hasMin && len(mm) != 2) {
		return 0, false
	}
	hours, err := strconv.Atoi(h)
	if err != nil || hours < 0 || hours > 23 {
		return 0, false
	}
	mins := 0
	if hasMin {
		if mins, err = strconv.Atoi(mm); err != nil || mins < 0 || mins > 59 {
			return 0, false
		}
	}
	return time.Duration(hours)*time.Hour + time.Duration(mins)*time.Minute, true
}

// CommissionOf is ceil(price × ratePercent / 100), as Orders.Complete computes
// it in SQL (the rate's decimal digits, PostgreSQL's float8 → numeric),
// for texts that quote what the commission would be.
func CommissionOf(price int64, ratePercent float64) int64 {
	r, ok := new(big.Rat).SetString(strconv.FormatFloat(ratePercent, 'g', 15, 64))
	if !ok || price <= 0 || ratePercent <= 0 {
		return 0
	}
	r.Mul(r, new(big.Rat).SetInt64(price))
	r.Quo(r, big.NewRat(100, 1))
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}
