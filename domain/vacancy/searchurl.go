package vacancy

import (
	"net/url"
	"slices"
	"strconv"
	"strings"

	"switchboard/domain"
)

// hhSites are HeadHunter's sites (and their regional subdomains, such as
// spb.hh.ru) whose search pages /search takes.
var hhSites = []string{"hh.ru", "hh.kz", "rabota.by", "hh.uz"}

// siteNames are the hh.ru page's names of API parameters.
var siteNames = map[string]string{"search_period": "period", "currency_code": "currency"}

// otherSchemes are the schemes of links that are not web pages, refused as
// such; other words with a colon are text.
var otherSchemes = []string{"mailto:", "javascript:", "data:", "file:", "tel:", "tg:", "ftp:", "ftps:"}

// LooksLikeURL reports whether a /search argument is meant as a link: it
// has a scheme, starts with www., or names an HH site.
func LooksLikeURL(arg string) bool {
	s := strings.ToLower(strings.TrimSpace(arg))
	if strings.Contains(s, "://") || strings.HasPrefix(s, "www.") || strings.HasPrefix(s, "//") {
		return true
	}
	if slices.ContainsFunc(otherSchemes, func(p string) bool { return strings.HasPrefix(s, p) }) {
		return true
	}
	host, _, _ := strings.Cut(s, "/")
	host, _, _ = strings.Cut(host, "?")
	return hhHost(host)
}

func hhHost(host string) bool {
	host = strings.TrimSuffix(host, ".")
	return slices.ContainsFunc(hhSites, func(site string) bool { return host == site || strings.HasSuffix(host, "."+site) })
}

// ParseSearchURL turns the address of a vacancy search on an HH site
// (https://hh.ru/search/vacancy?text=golang&area=1, also hh.kz, rabota.by,
// regional subdomains, without scheme or www., and api.hh.ru/vacancies)
// into a search. It keeps every parameter of HH's GET /vacancies that a
// search keeps (Filters), renames the page's own names (search_period →
// period, currency_code → currency), and returns the names of the
// parameters it left out: the page's settings (hhtmFrom, page,
// items_on_page, enable_snippets, …), the sort order (discovery reads
// newest first) and fixed dates. A catalogue page (/vacancies/<slug>) is
// taken only with search words in its query: its slug is not a search.
// Anything that is not such an address is refused with the reason.
func ParseSearchURL(raw string) (Params, []string, error) {
	raw = strings.TrimSpace(raw)
	typed := raw
	lower := strings.ToLower(raw)
	switch {
	case strings.HasPrefix(lower, "//"):
		raw = "https:" + raw
	case !strings.Contains(lower, "://") && !slices.ContainsFunc(otherSchemes, func(p string) bool { return strings.HasPrefix(lower, p) }):
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Params{}, nil, paramError("search.error_url", "", typed)
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return Params{}, nil, paramError("search.error_url_scheme", "", u.Scheme+":")
	}
	host := strings.ToLower(u.Hostname())
	if !hhHost(host) || u.Port() != "" || u.User != nil {
		return Params{}, nil, paramError("search.error_url_host", "", u.Host)
	}
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	q := u.Query()
	apiHost := strings.HasPrefix(host, "api.")
	switch {
	case apiHost && path == "/vacancies":
	case !apiHost && path == "/search/vacancy":
	case !apiHost && strings.HasPrefix(path, "/vacancies/") && strings.TrimSpace(q.Get("text")) != "":
	default:
		if path == "" {
			path = "/"
		}
		return Params{}, nil, paramError("search.error_url_path", "", path)
	}

	var p Params
	var words, dropped []string
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		key := name
		if to, ok := siteNames[key]; ok {
			key = to
		}
		_, known := filterNamed(key)
		for _, v := range q[name] {
			v = strings.TrimSpace(v)
			switch {
			case v == "", key == "period" && v == "0", key == "only_with_salary" && v == "false":
				// The page writes its defaults out: "any salary", "any time".
			case key == "text":
				words = append(words, v)
			case key == "salary" || known:
				if err := p.set(key, v, name+"="+v); err != nil {
					return Params{}, nil, err
				}
			default:
				if !slices.Contains(dropped, name) {
					dropped = append(dropped, name)
				}
			}
		}
	}
	p.Text = strings.Join(strings.Fields(strings.Join(words, " ")), " ")
	p.normalize()
	if err := p.check(typed); err != nil {
		if pe := err.(*domain.InputError); pe.Key == "search.error_no_text" {
			pe.Key = "search.error_url_no_text"
		}
		return Params{}, nil, err
	}
	return p, dropped, nil
}

// linkTrim is what wraps a link in a message without being part of it:
// quotes, brackets and the sentence's punctuation.
const linkTrim = "<>()[]{}\"'«»“”„‘’`,.;:!?"

// VacancyLinkIn finds the first link to one vacancy on an HH site in a
// message (https://hh.ru/vacancy/123456, also a regional subdomain,
// hh.kz, rabota.by, www., http://, no scheme, a query or a fragment; the
// link alone or among words) and returns the vacancy's id. A search page,
// an employer's page, another host whose path or name merely contains
// hh.ru, or an id that is not a number is no vacancy link: ok is false.
func VacancyLinkIn(text string) (id int64, ok bool) {
	for _, word := range strings.Fields(text) {
		if id, ok := parseVacancyLink(strings.Trim(word, linkTrim)); ok {
			return id, true
		}
	}
	return 0, false
}

// parseVacancyLink reads one word as a vacancy's page on an HH site, with
// the host checks ParseSearchURL makes.
func parseVacancyLink(raw string) (int64, bool) {
	lower := strings.ToLower(raw)
	switch {
	case strings.HasPrefix(lower, "//"):
		raw = "https:" + raw
	case !strings.Contains(lower, "://"):
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return 0, false
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return 0, false
	}
	host := strings.ToLower(u.Hostname())
	// api.hh.ru serves JSON, not the page a person copies.
	if !hhHost(host) || strings.HasPrefix(host, "api.") || u.Port() != "" || u.User != nil {
		return 0, false
	}
	rest, found := strings.CutPrefix(strings.TrimSuffix(u.EscapedPath(), "/"), "/vacancy/")
	if !found || rest == "" || strings.Trim(rest, "0123456789") != "" {
		return 0, false
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || id <= 0 {
		return 0, false
	}
	return id, true
}
