package locales

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

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
