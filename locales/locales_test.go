package locales

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestEveryLanguageHasEveryKey(t *testing.T) {
	c := MustLoad()
	en := c.Keys("en")
	require.NotEmpty(t, en)
	for _, lang := range Languages[1:] {
		other := c.Keys(lang)
		for _, k := range en {
			require.Containsf(t, other, k, "%s.toml lacks key %q", lang, k)
		}
		for _, k := range other {
			require.Containsf(t, en, k, "%s.toml has key %q that en.toml lacks", lang, k)
		}
	}
}

var placeholder = regexp.MustCompile(`{{\s*\.(\w+)\s*}}`)

// A translation that drops or renames a placeholder silently loses data.
func TestPlaceholdersMatchAcrossLanguages(t *testing.T) {
	raw := map[string]map[string]string{}
	for _, lang := range Languages {
		b, err := files.ReadFile(lang + ".toml")
		require.NoError(t, err)
		m := map[string]string{}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, " = ")
			if !ok || strings.HasPrefix(line, "#") {
				continue
			}
			m[strings.Trim(k, `"`)] = v
		}
		raw[lang] = m
	}
	names := func(s string) []string {
		var out []string
		for _, m := range placeholder.FindAllStringSubmatch(s, -1) {
			out = append(out, m[1])
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	for k, v := range raw["en"] {
		for _, lang := range Languages[1:] {
			require.Equalf(t, names(v), names(raw[lang][k]), "placeholders of %q differ in %s", k, lang)
		}
	}
}

func TestTextsEscapeDataButNotHTML(t *testing.T) {
	c := MustLoad()
	got := c.T("en", "error.unknown_command", Data{"Command": "<b>Go & Rust</b>"})
	require.Contains(t, got, "&lt;b&gt;Go &amp; Rust&lt;/b&gt;")
	got = c.T("en", "lang.unsupported", Data{"Lang": HTML("<i>x</i>"), "Supported": "en"})
	require.Contains(t, got, "<i>x</i>")
	require.Contains(t, got, "<code>/lang en</code>")
}

func TestLanguageFallback(t *testing.T) {
	c := MustLoad()
	require.Equal(t, "Мову змінено на українську.", c.T("uk", "lang.changed"))
	require.Equal(t, c.T("en", "lang.changed"), c.T("de", "lang.changed"))
	require.Equal(t, "no.such.key", c.T("en", "no.such.key"))
	for code, want := range map[string]string{"uk": "uk", "ru-RU": "ru", "en-US": "en", "de": "en", "": "en", "UK": "uk"} {
		require.Equal(t, want, Match(code), code)
	}
}

// Every key must be named by a string literal somewhere in the program's
// non-test Go code; a key nobody uses is a translation nobody maintains.
func TestNoUnusedKeys(t *testing.T) {
	literals := map[string]bool{}
	root := filepath.Join("..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "vendor" || n == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if bl, ok := n.(*ast.BasicLit); ok && bl.Kind == token.STRING {
				if s, err := strconv.Unquote(bl.Value); err == nil {
					literals[s] = true
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	for _, k := range MustLoad().Keys("en") {
		require.Truef(t, literals[k], "key %q is used by no Go code", k)
	}
}

// cldrForm is the index of the CLDR cardinal category of a whole number
// n among a language's forms: English one, other; Russian and Ukrainian
// one (n%10 = 1, n%100 ≠ 11), few (n%10 in 2..4, n%100 not in 12..14),
// many (the rest). It is written out here, apart from plural, so the two
// check each other.
func cldrForm(lang string, n int) int {
	if lang == "en" {
		if n == 1 {
			return 0
		}
		return 1
	}
	switch {
	case n%10 == 1 && n%100 != 11:
		return 0
	case n%10 >= 2 && n%10 <= 4 && (n%100 < 12 || n%100 > 14):
		return 1
	}
	return 2
}

// countValues are counts whose categories differ in at least one language.
var countValues = []int{0, 1, 2, 5, 11, 12, 21, 22, 25, 101, 111}

// phrases are how a count reads after prefix, one per category of the
// language (%s is the number): phrases("не больше", "символа", "символов",
// "символов").
func phrases(prefix string, words ...string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = strings.TrimSpace(prefix+" %s "+w) + "\x00"
	}
	return out
}

// fixed is a phrase that reads the same for every count: the count
// stands apart from its noun ("Скрытых работодателей уже %s").
func fixed(lang, phrase string) []string {
	if lang == "en" {
		return []string{phrase, phrase}
	}
	return []string{phrase, phrase, phrase}
}

// A count's noun agrees with it in each language: "1 символа", "2
// символов", "21 символа" after "не больше"; "1 карточка", "2 карточки",
// "5 карточек"; "1 character", "2 characters". Each text that puts a
// count before a noun is rendered for counts of every category, as an
// int and as Number writes it.
func TestCountsAgreeWithTheirNouns(t *testing.T) {
	type lang = string
	chars := func(en, ru, uk string, ukAcc bool) map[lang][]string {
		ukForms := []string{"символу", "символів", "символів"}
		if ukAcc {
			ukForms = []string{"символ", "символи", "символів"}
		}
		return map[lang][]string{
			"en": phrases(en, "character", "characters"),
			"ru": phrases(ru, "символа", "символов", "символов"),
			"uk": phrases(uk, ukForms...),
		}
	}
	notMore := chars("at most", "не больше", "не більше", false)
	cases := []struct {
		key, field string
		want       map[lang][]string
	}{
		{"profile.error_too_long", "Max", notMore},
		{"search.error_too_long", "Max", notMore},
		{"ban.error_too_long", "Max", notMore},
		{"memory.too_long", "Max", notMore},
		{"memory.prompt_too_long", "Max", notMore},
		{"dispatch.error_place_long", "Max", notMore},
		{"dispatch.error_skill_long", "Max", notMore},
		{"order.error_description_long", "Max", notMore},
		{"relay.too_long", "Max", notMore},
		{"memories.correct_ask", "Max", notMore},
		{"memories.correct_too_long", "Max", notMore},
		{"rating.error_comment_long", "Max", chars("at most", "не больше", "щонайбільше", true)},
		{"order.error_address", "Max", chars("at most", "не длиннее", "не довше за", true)},
		{"order.error_name", "Max", chars("at most", "не длиннее", "не довше за", true)},
		{"run_new.error_keywords", "MaxLen", chars("at most", "не длиннее", "не довше за", true)},
		{"run.filter_min_len", "Min", chars("at least", "не короче", "не коротші за", true)},
		{"run_new.error_keywords", "Max", map[lang][]string{
			"en": phrases("give 1 to", "keyword", "keywords"),
			"ru": phrases("от 1 до", "ключевого слова", "ключевых слов", "ключевых слов"),
			"uk": phrases("від 1 до", "ключового слова", "ключових слів", "ключових слів"),
		}},
		{"search.error_too_many", "Max", map[lang][]string{
			"en": phrases("at most", "value", "values"),
			"ru": phrases("не больше", "значения", "значений", "значений"),
			"uk": phrases("не більше", "значення", "значень", "значень"),
		}},
		{"search.error_limit", "Max", map[lang][]string{
			"en": phrases("have", "search", "searches"),
			"ru": phrases("уже", "поиск", "поиска", "поисков"),
			"uk": phrases("уже", "пошук", "пошуки", "пошуків"),
		}},
		{"ban.error_too_many", "Max", map[lang][]string{
			"en": phrases("have", "ban word", "ban words"),
			"ru": phrases("уже", "стоп-слово", "стоп-слова", "стоп-слов"),
			"uk": phrases("уже", "стоп-слово", "стоп-слова", "стоп-слів"),
		}},
		{"hide.error_too_many", "Max", map[lang][]string{
			"en": phrases("hide", "employer", "employers"),
			"ru": fixed("ru", "Скрытых работодателей уже %s —"),
			"uk": fixed("uk", "Прихованих роботодавців уже %s —"),
		}},
		{"rating.error_stars", "Max", map[lang][]string{
			"en": phrases("from 1 to", "star", "stars"),
			"ru": phrases("от 1 до", "звезды", "звёзд", "звёзд"),
			"uk": phrases("від 1 до", "зірки", "зірок", "зірок"),
		}},
		{"order.error_phone", "Max", map[lang][]string{
			"en": phrases("5 to", "digit", "digits"),
			"ru": phrases("от 5 до", "цифры", "цифр", "цифр"),
			"uk": phrases("від 5 до", "цифри", "цифр", "цифр"),
		}},
		{"dispatch.error_skills_many", "Max", map[lang][]string{
			"en": phrases("At most", "skill", "skills"),
			"ru": phrases("Не больше", "навыка", "навыков", "навыков"),
			"uk": phrases("Не більше", "навички", "навичок", "навичок"),
		}},
		{"masters.header", "Days", map[lang][]string{
			"en": phrases("over", "day", "days"),
			"ru": phrases("за", "день", "дня", "дней"),
			"uk": phrases("за", "день", "дні", "днів"),
		}},
		{"masters.header", "Min", map[lang][]string{
			"en": phrases("under", "rating", "ratings"),
			"ru": phrases("меньше", "оценки", "оценок", "оценок"),
			"uk": phrases("менше ніж", "оцінка", "оцінки", "оцінок"),
		}},
		{"photo.limit", "Max", map[lang][]string{
			"en": phrases("has", "photo", "photos"),
			"ru": phrases("уже", "фото", "фото", "фото"),
			"uk": phrases("уже", "фото", "фото", "фото"),
		}},
		{"cv.error_pages", "Max", map[lang][]string{
			"en": phrases("up to", "page", "pages"),
			"ru": phrases("не длиннее", "страницы", "страниц", "страниц"),
			"uk": phrases("не довші за", "сторінку", "сторінки", "сторінок"),
		}},
		{"cv.error_pages", "Pages", map[lang][]string{
			"en": phrases("has", "page", "pages"),
			"ru": fixed("ru", "Страниц в этом PDF: %s,"),
			"uk": fixed("uk", "Сторінок у цьому PDF: %s,"),
		}},
		{"rhythm.cap_on", "Cap", map[lang][]string{
			"en": phrases("limit:", "card", "cards"),
			"ru": phrases("лимит:", "карточка", "карточки", "карточек"),
			"uk": phrases("ліміт:", "картка", "картки", "карток"),
		}},
		{"rhythm.cap_digest", "Cap", map[lang][]string{
			"en": phrases("limit:", "card", "cards"),
			"ru": phrases("лимит:", "карточка", "карточки", "карточек"),
			"uk": phrases("ліміт:", "картка", "картки", "карток"),
		}},
		{"run.window_hours", "Hours", map[lang][]string{
			"en": {"\x01%s hour\x00", "\x01%s hours\x00"},
			"ru": fixed("ru", "\x01%s ч\x00"),
			"uk": fixed("uk", "\x01%s год\x00"),
		}},
		{"thread.header", "Count", map[lang][]string{
			"en": phrases("</b>:", "message", "messages"),
			"ru": fixed("ru", "между клиентом и мастером — %s\x00"),
			"uk": fixed("uk", "між клієнтом і майстром — %s\x00"),
		}},
		{"export.md_omitted", "N", map[lang][]string{
			"en": phrases("The", "oldest message is", "oldest messages are"),
			"ru": fixed("ru", "Самые старые сообщения (%s)"),
			"uk": fixed("uk", "Найстаріші повідомлення (%s)"),
		}},
		{"memory.forgotten_master", "Orders", map[lang][]string{
			"en": phrases("with the", "order", "orders"),
			"ru": fixed("ru", "заказами (%s)"),
			"uk": fixed("uk", "замовленнями (%s)"),
		}},
		{"status.table", "Rows", map[lang][]string{
			"en": phrases("about", "row", "rows"),
			"ru": fixed("ru", "строк: около %s\x00"),
			"uk": fixed("uk", "рядків: близько %s\x00"),
		}},
		{"status.held", "Runs", map[lang][]string{
			"en": phrases("them):", "memory run", "memory runs"),
			"ru": fixed("ru", "запусков памяти %s,"),
			"uk": fixed("uk", "запусків пам'яті %s,"),
		}},
		{"status.held", "Updates", map[lang][]string{
			"en": phrases(",", "incoming update", "incoming updates"),
			"ru": fixed("ru", "входящих обновлений %s\x00"),
			"uk": fixed("uk", "вхідних оновлень %s\x00"),
		}},
		{"orders.more", "Count", map[lang][]string{
			"en": {"and %s more that does not fit", "and %s more that do not fit"},
			"ru": fixed("ru", "и ещё %s: здесь не хватило места"),
			"uk": fixed("uk", "і ще %s: тут забракло місця"),
		}},
	}
	c := MustLoad()
	base := Data{"Arg": "x", "Name": "area", "Order": 7, "Summary": "s", "Size": "1 MB", "Max": 5, "Min": 5,
		"MaxLen": 50, "Days": 90, "Page": 1, "Pages": 1, "Total": 1, "Unrated": "3.5", "Count": 1, "N": 1,
		"Orders": 1, "Rows": 1, "Runs": 1, "Matches": 1, "Updates": 1, "Cap": 10, "Hours": 1}
	for _, tc := range cases {
		for _, lang := range Languages {
			forms := tc.want[lang]
			require.NotEmptyf(t, forms, "%s %s: no forms", tc.key, lang)
			for _, n := range countValues {
				data := maps.Clone(base)
				data[tc.field] = n
				got := c.T(lang, tc.key, data)
				data[tc.field] = Number(lang, int64(n))
				require.Equalf(t, got, c.T(lang, tc.key, data), "%s %s: %d as Number reads otherwise", tc.key, lang, n)
				want := fmt.Sprintf(forms[cldrForm(lang, n)], strconv.Itoa(n))
				require.Truef(t, readsAs(got, want), "%s in %s with %s=%d:\n%s\nwant %q", tc.key, lang, tc.field, n, got, strings.Trim(want, "\x00\x01"))
			}
		}
	}
}

// readsAs reports whether text holds phrase as whole words. A phrase
// ending in \x00 must end a word there (so "1 символ" is not found in
// "1 символи"); one starting with \x01 must start the text.
func readsAs(text, phrase string) bool {
	anchored := strings.HasPrefix(phrase, "\x01")
	phrase = strings.TrimPrefix(phrase, "\x01")
	word := strings.HasSuffix(phrase, "\x00")
	phrase = strings.TrimSuffix(phrase, "\x00")
	for i := 0; ; {
		j := strings.Index(text[i:], phrase)
		if j < 0 {
			return false
		}
		at, end := i+j, i+j+len(phrase)
		r, _ := utf8.DecodeRuneInString(text[end:])
		if (!anchored || at == 0) && (!word || end == len(text) || !unicode.IsLetter(r) && !unicode.IsDigit(r)) {
			return true
		}
		i = at + 1
	}
}

var pluralCall = regexp.MustCompile("{{\\s*plural\\s+\\.\\w+((?:\\s+`[^`]*`)*)\\s*}}")

// plural reads its rule from the number of forms (two English, three
// Russian and Ukrainian), so a text giving its language's count of forms
// is what makes its nouns agree; and every use of plural is the one form
// checked here.
func TestPluralCallsGiveTheirLanguagesForms(t *testing.T) {
	want := map[string]int{"en": 2, "ru": 3, "uk": 3}
	for _, lang := range Languages {
		b, err := files.ReadFile(lang + ".toml")
		require.NoError(t, err)
		text := string(b)
		require.Equalf(t, strings.Count(text, "plural"), len(pluralCall.FindAllString(text, -1)),
			"%s.toml calls plural otherwise than {{plural .Field `form` …}}", lang)
		for _, m := range pluralCall.FindAllStringSubmatch(text, -1) {
			require.Equalf(t, want[lang], strings.Count(m[1], "`")/2, "%s.toml: %s", lang, m[0])
		}
	}
}

func TestPluralTakesNumbersAsWritten(t *testing.T) {
	for _, tc := range []struct {
		n    any
		want string
	}{
		{1, "one"}, {int64(21), "one"}, {uint8(3), "few"}, {-2, "few"}, {"1,021", "one"},
		{"1\u00a0011", "many"}, {"1 002", "few"}, {0, "many"},
	} {
		got, err := plural(tc.n, "one", "few", "many")
		require.NoError(t, err, tc.n)
		require.Equal(t, tc.want, got, tc.n)
	}
	_, err := plural("many", "one", "other")
	require.Error(t, err)
	_, err = plural(nil, "one", "other")
	require.Error(t, err)
	_, err = plural(1, "one", "few", "many", "other")
	require.Error(t, err)
}
