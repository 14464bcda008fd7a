package dispatch

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
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
	s = strings.Join(strings.Fields(s), " ")
	switch {
	case s == "":
		return "", &InputError{Key: "dispatch.error_place"}
	case utf8.RuneCountInString(s) > MaxPlace:
		return "", &InputError{Key: "dispatch.error_place_long"}
	}
	return s, nil
}

func cleanSkill(s string) (string, error) {
	s = strings.ToLower(strings.Join(strings.Fields(s), " "))
	switch {
	case s == "":
		return "", &InputError{Key: "dispatch.error_skill"}
	case utf8.RuneCountInString(s) > MaxSkill:
		return "", &InputError{Key: "dispatch.error_skill_long"}
	}
	return s, nil
}

// ParseMaster reads `/master <city> <district> <skill[,skill]>`.
func ParseMaster(args string) (city, district string, skills []string, err error) {
	f := fields(args)
	if len(f) < 3 {
		return "", "", nil, &InputError{Key: "master.usage"}
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
		return "", "", nil, &InputError{Key: "dispatch.error_skill"}
	case len(skills) > MaxSkills:
		return "", "", nil, &InputError{Key: "dispatch.error_skills_many"}
	}
	return city, district, skills, nil
}

// ParseOrder reads `/order <city> <district> <skill> <price> <description>`.
func ParseOrder(args string) (NewOrder, error) {
	f, rest := fieldsN(args, 4)
	if len(f) < 4 {
		return NewOrder{}, &InputError{Key: "order.usage"}
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
		return NewOrder{}, &InputError{Key: "order.error_price"}
	}
	// The description is the rest as written: line breaks matter in it.
	o.Description = rest
	switch {
	case o.Description == "":
		return NewOrder{}, &InputError{Key: "order.usage"}
	case utf8.RuneCountInString(o.Description) > MaxDescription:
		return NewOrder{}, &InputError{Key: "order.error_description_long"}
	}
	return o, nil
}
