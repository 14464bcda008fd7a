// Package locales holds the bot's texts in en.toml, ru.toml and uk.toml
// (embedded) and renders them with go-i18n. A noun after a count agrees
// with it through the templates' plural function. Every text is Telegram
// HTML: template data is HTML-escaped here unless it is marked HTML, so a
// user's, an LLM's or HH's string can never inject markup. A test fails
// when a key of en is missing in another language or when a key is used
// nowhere.
package locales

import (
	"embed"
	"fmt"
	"html"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/nicksnyder/go-i18n/v2/i18n"
	"golang.org/x/text/language"
)

//go:embed *.toml
var files embed.FS

// Languages in the order /lang lists them; the first is the fallback.
var Languages = []string{"en", "ru", "uk"}

// HTML marks template data that is already safe Telegram HTML (for example a
// text rendered by another key); everything else is escaped.
type HTML string

// Data is a template's named values.
type Data map[string]any

// Catalog renders keys in a language.
type Catalog struct {
	localizers map[string]*i18n.Localizer
	keys       map[string][]string // language → keys, for tests and tooling
}

// Load parses the embedded catalogues.
func Load() (*Catalog, error) {
	bundle := i18n.NewBundle(language.English)
	bundle.RegisterUnmarshalFunc("toml", toml.Unmarshal)
	c := &Catalog{localizers: map[string]*i18n.Localizer{}, keys: map[string][]string{}}
	for _, lang := range Languages {
		mf, err := bundle.LoadMessageFileFS(files, lang+".toml")
		if err != nil {
			return nil, fmt.Errorf("load %s.toml: %w", lang, err)
		}
		for _, m := range mf.Messages {
			c.keys[lang] = append(c.keys[lang], m.ID)
		}
		// Falling back to English keeps a reply readable if a key slipped
		// through; the catalogue test makes that a failing build instead.
		c.localizers[lang] = i18n.NewLocalizer(bundle, lang, "en")
	}
	return c, nil
}

// MustLoad is Load for main and tests: the catalogue is embedded, so failure
// is a build defect, not a runtime condition.
func MustLoad() *Catalog {
	c, err := Load()
	if err != nil {
		panic(err)
	}
	return c
}

// Keys returns the keys defined for lang.
func (c *Catalog) Keys(lang string) []string { return c.keys[lang] }

// Supported reports whether lang has a catalogue.
func Supported(lang string) bool {
	for _, l := range Languages {
		if l == lang {
			return true
		}
	}
	return false
}

// Match maps a Telegram language_code ("en-US", "uk", "ru-RU", "") to a
// catalogue language, falling back to English.
func Match(code string) string {
	base, _, _ := strings.Cut(strings.ToLower(code), "-")
	if Supported(base) {
		return base
	}
	return Languages[0]
}

// T renders key in lang. A missing key renders as the key itself so the
// defect is visible in the chat as well as failing the catalogue test.
func (c *Catalog) T(lang, key string, data ...Data) string {
	loc, ok := c.localizers[lang]
	if !ok {
		loc = c.localizers[Languages[0]]
	}
	var td map[string]any
	if len(data) > 0 {
		td = make(map[string]any, len(data[0]))
		for k, v := range data[0] {
			switch v := v.(type) {
			case HTML:
				td[k] = string(v)
			case string:
				td[k] = html.EscapeString(v)
			case fmt.Stringer:
				td[k] = html.EscapeString(v.String())
			case error:
				td[k] = html.EscapeString(v.Error())
			default:
				td[k] = v
			}
		}
	}
	s, err := loc.Localize(&i18n.LocalizeConfig{MessageID: key, TemplateData: td, TemplateParser: textParser})
	if err != nil || s == "" {
		return key
	}
	return s
}
