package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/config"
)

// The docs and the comments cite files, commands and settings by name; a
// rename or a removal leaves them pointing at nothing, and nobody notices
// until a newcomer follows one. TestDocsCiteWhatExists reads every
// comment of every Go file and every Markdown file (the changelog, a
// journal of what was, aside) and fails on each citation of a file, a
// slash command, an HTTP path or a setting that the repository does not
// have. A file of another repository is cited with that repository's name
// and a colon (hhru/api:docs/errors.md), which this check leaves alone.
func TestDocsCiteWhatExists(t *testing.T) {
	t.Parallel()
	repo, err := scanRepo(".")
	require.NoError(t, err)
	var bad []string
	for _, d := range repo.docs {
		for _, c := range citationsIn(d.text) {
			if !repo.has(c, d.path) {
				bad = append(bad, fmt.Sprintf("%s:%d: %s %q does not exist", d.path, d.line+c.line+1, c.kind, c.name))
			}
		}
	}
	sort.Strings(bad)
	require.Empty(t, bad, "citations of what the repository does not have:\n%s", strings.Join(bad, "\n"))
}

// The check itself: a planted citation of each kind is found, and the
// real ones are not.
func TestDocsDriftCheckFindsPlantedCitations(t *testing.T) {
	t.Parallel()
	repo, err := scanRepo(".")
	require.NoError(t, err)
	text := "See DESIGN.md and storage/nowhere.go, run `/frobnicate`, set HH_TURBO=1.\n" +
		"Kept: storage/outbox.go, outbox.go, docs/ARCHITECTURE.md, `/status`, HH_RATE, TELEGRAM_TOKEN_FILE, " +
		"https://example.com/x.go, hhru/api:docs/errors.md, SENT_TO_USER, /tmp/x, BotFather's `/newbot`.\n" +
		"```\nreverse_proxy /hook 10.0.0.1\n```"
	var missing []string
	for _, c := range citationsIn(text) {
		if !repo.has(c, "bot/bot.go") {
			missing = append(missing, c.kind+" "+c.name)
		}
	}
	require.Equal(t, []string{"file DESIGN.md", "file storage/nowhere.go", "command /frobnicate", "setting HH_TURBO"}, missing)
}

// doc is one comment group or one Markdown file.
type doc struct {
	path string
	line int // of the text's first line, less one
	text string
}

// repoFacts is what citations are checked against.
type repoFacts struct {
	files    map[string]bool // slash paths from the repository's root
	bases    map[string]bool // their base names
	commands map[string]bool
	routes   map[string]bool
	settings map[string]bool
	prefixes map[string]bool // first words of the settings' names
	docs     []doc
}

var (
	commandName = regexp.MustCompile(`(?:Command\{Name:\s*|Command\s*=\s*)"([a-z_]+)"`)
	// A path the code serves or asks for (an HTTP route, an HH endpoint,
	// a Bot API method's path), as a string literal.
	routeName = regexp.MustCompile(`"(?:[A-Z]+ )?(/[a-z_]+)[/"?]`)
	envName   = regexp.MustCompile(`(?:Getenv|LookupEnv)\("([A-Z0-9_]+)"\)`)
)

// skipDir: not the project's own text.
func skipDir(name string) bool {
	return name == ".git" || name == "testdata" || name == "node_modules" || name == "vendor" || name == "evalset"
}

func scanRepo(root string) (*repoFacts, error) {
	r := &repoFacts{files: map[string]bool{}, bases: map[string]bool{}, commands: map[string]bool{},
		routes: map[string]bool{}, settings: map[string]bool{}, prefixes: map[string]bool{}}
	settingsOf(reflect.TypeOf(config.Config{}), r.settings)
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(p)
		if d.IsDir() {
			if p != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			r.files[rel] = true
			return nil
		}
		r.files[rel] = true
		r.bases[d.Name()] = true
		switch {
		case strings.HasSuffix(rel, ".go"):
			src, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if !strings.HasSuffix(rel, "_test.go") {
				for _, m := range commandName.FindAllSubmatch(src, -1) {
					r.commands[string(m[1])] = true
				}
				for _, m := range routeName.FindAllSubmatch(src, -1) {
					r.routes[string(m[1])] = true
				}
			}
			for _, m := range envName.FindAllSubmatch(src, -1) {
				r.settings[string(m[1])] = true
			}
			f, err := parser.ParseFile(fset, p, src, parser.ParseComments)
			if err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			for _, g := range f.Comments {
				r.docs = append(r.docs, doc{path: rel, line: fset.Position(g.Pos()).Line - 1, text: commentText(g)})
			}
		case strings.HasSuffix(rel, ".md") && rel != "CHANGELOG.md":
			src, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			r.docs = append(r.docs, doc{path: rel, text: string(src)})
		}
		return nil
	})
	for s := range r.settings {
		r.prefixes[strings.SplitN(s, "_", 2)[0]] = true
	}
	return r, err
}

// commentText is a comment group's text line for line, markers blanked,
// so that line numbers stay the file's.
func commentText(g *ast.CommentGroup) string {
	var b strings.Builder
	for i, c := range g.List {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(strings.TrimPrefix(strings.TrimPrefix(c.Text, "//"), "/*"))
	}
	return b.String()
}

// settingsOf collects the env tags of a config struct, nested ones with
// their prefix; a secret may also come from NAME_FILE.
func settingsOf(t reflect.Type, into map[string]bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type.Kind() == reflect.Struct && f.Tag.Get("env") == "" {
			sub := map[string]bool{}
			settingsOf(f.Type, sub)
			for s := range sub {
				into[f.Tag.Get("envPrefix")+s] = true
			}
			continue
		}
		if name, _, _ := strings.Cut(f.Tag.Get("env"), ","); name != "" {
			into[name] = true
			into[name+"_FILE"] = true
		}
	}
}

// citation is one name a text cites.
type citation struct {
	kind, name string
	line       int
}

var (
	// A file: a path or a base name with an extension of ours. A URL's
	// path is the URL's business.
	fileCite = regexp.MustCompile(`(?:^|[\s(\x60"'\[])((?:\.\./)?(?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\.(?:go|md|sql|sh|toml|ya?ml))\b`)
	// A slash command or a route: a slash after a space or a quote, a
	// lower-case word, and no further path.
	slashCite = regexp.MustCompile(`(?:^|[\s(\x60"'])(/[a-z][a-z_]*)(?:[\s)\x60"',.:;!?]|$)`)
	// A setting: upper-case words joined by underscores; checked only when
	// its first word begins a real setting's name (SENT_TO_USER is a status).
	settingCite = regexp.MustCompile(`\b([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)\b`)
)

func citationsIn(text string) []citation {
	var out []citation
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		for _, m := range fileCite.FindAllStringSubmatchIndex(line, -1) {
			if strings.Contains(line[max(0, m[2]-3):m[2]], "://") || strings.HasSuffix(line[:m[2]], "/") {
				continue
			}
			out = append(out, citation{"file", line[m[2]:m[3]], i})
		}
		// A fenced block is a shell session or a proxy's configuration:
		// its paths are not ours.
		for _, m := range slashCite.FindAllStringSubmatch(line, -1) {
			if !fenced {
				out = append(out, citation{"command", m[1], i})
			}
		}
		for _, m := range settingCite.FindAllStringSubmatch(line, -1) {
			out = append(out, citation{"setting", m[1], i})
		}
	}
	return out
}

// notCommands are paths of the machine that a comment may name, @BotFather's
// commands (README's set-up), and the placeholder of a command.
var notCommands = []string{"/tmp", "/dev", "/proc", "/etc", "/usr", "/var", "/bin", "/sys", "/cmd",
	"/newbot", "/mybots", "/revoke", "/setcommands", "/setprivacy", "/setjoingroups", "/token"}

// has reports whether the repository has what c cites, read from the file
// at from.
func (r *repoFacts) has(c citation, from string) bool {
	switch c.kind {
	case "file":
		name := strings.TrimPrefix(c.name, "./")
		if r.files[name] || r.files[path.Join(path.Dir(from), name)] {
			return true
		}
		if strings.HasPrefix(name, "../") {
			return false
		}
		if !strings.Contains(name, "/") {
			return r.bases[name]
		}
		for f := range r.files {
			if strings.HasSuffix(f, "/"+name) {
				return true
			}
		}
		return false
	case "command":
		name := strings.TrimPrefix(c.name, "/")
		return r.commands[name] || r.routes[c.name] || slices.Contains(notCommands, c.name)
	default:
		if !r.prefixes[strings.SplitN(c.name, "_", 2)[0]] {
			return true
		}
		return r.settings[c.name]
	}
}
