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
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/config"
)

// The docs and the comments cite files, commands and settings by name; a
// rename or a removal leaves them pointing at nothing, and nobody notices
// until a newcomer follows one. TestDocsCiteWhatExists reads every
// comment of every Go file and every Markdown file (the changelog, a
// journal of what was, aside) and fails on each citation of a file, a
// slash command, an HTTP path, a setting or a test, fuzz target or
// benchmark (by its function's name, or the prefix a go test -run pattern
// gives) that the repository does not have. A file of another repository is cited with that repository's name
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
	text := "See DESIGN.md and storage/nowhere.go, run `/frobnicate`, set HH_TURBO=1, TestNothingLikeThis.\n" +
		"Kept: storage/outbox.go, outbox.go, docs/ARCHITECTURE.md, `/status`, HH_RATE, TELEGRAM_TOKEN_FILE, " +
		"TestDocsCiteWhatExists, -run TestDocsDrift, FuzzDecode, " +
		"https://example.com/x.go, hhru/api:docs/errors.md, SENT_TO_USER, /tmp/x, BotFather's `/newbot`.\n" +
		"```\nreverse_proxy /hook 10.0.0.1\n```"
	var missing []string
	for _, c := range citationsIn(text) {
		if !repo.has(c, "bot/bot.go") {
			missing = append(missing, c.kind+" "+c.name)
		}
	}
	require.Equal(t, []string{"file DESIGN.md", "file storage/nowhere.go", "command /frobnicate", "setting HH_TURBO", "test TestNothingLikeThis"}, missing)
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
	tests    []string        // test, fuzz and benchmark functions
	jobs     map[string]bool // periodic jobs' names (domain.Job)
	docs     []doc
}

var (
	commandName = regexp.MustCompile(`(?:Command\{Name:\s*|Command\s*=\s*)"([a-z_]+)"`)
	// A path the code serves or asks for (an HTTP route, an HH endpoint,
	// a Bot API method's path), as a string literal.
	routeName = regexp.MustCompile(`"(?:[A-Z]+ )?(/[a-z_]+)[/"?]`)
	envName   = regexp.MustCompile(`(?:Getenv|LookupEnv)\("([A-Z0-9_]+)"\)`)
	// A periodic job, as a domain.Job literal names it.
	jobName = regexp.MustCompile(`\{Name:\s*"([a-z-]+)",\s*Every:`)
)

// skipDir: not the project's own text.
func skipDir(name string) bool {
	return name == ".git" || name == "testdata" || name == "node_modules" || name == "vendor" || name == "evalset"
}

func scanRepo(root string) (*repoFacts, error) {
	r := &repoFacts{files: map[string]bool{}, bases: map[string]bool{}, commands: map[string]bool{},
		routes: map[string]bool{}, settings: map[string]bool{}, prefixes: map[string]bool{}, jobs: map[string]bool{}}
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
				for _, m := range jobName.FindAllSubmatch(src, -1) {
					r.jobs[string(m[1])] = true
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
			if strings.HasSuffix(rel, "_test.go") {
				for _, d := range f.Decls {
					if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && testCite.MatchString(fn.Name.Name) {
						r.tests = append(r.tests, fn.Name.Name)
					}
				}
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
	// A test, a fuzz target or a benchmark.
	testCite = regexp.MustCompile(`\b((?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*)\b`)
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
		for _, m := range testCite.FindAllStringSubmatch(line, -1) {
			out = append(out, citation{"test", m[1], i})
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
	case "test":
		// TestMain is go test's hook, not a test of ours to find.
		return c.name == "TestMain" || slices.ContainsFunc(r.tests, func(t string) bool { return strings.HasPrefix(t, c.name) })
	default:
		if !r.prefixes[strings.SplitN(c.name, "_", 2)[0]] {
			return true
		}
		return r.settings[c.name]
	}
}

// README's Configuration table is the operator's one list of settings:
// every variable config.Config reads is a row of it, every variable of its
// rows is one Config reads, and where the code has a default (envDefault)
// the row's default column gives it first, as `value`. A row may hold
// several variables with their defaults in the same order, comma-separated.
func TestDocsConfigurationTableMatchesConfig(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("README.md")
	require.NoError(t, err)
	rows := tableRows(section(string(src), "## Configuration"))
	require.NotEmpty(t, rows, "README.md has no Configuration table")
	documented := map[string]string{} // variable → its default cell
	for _, cells := range rows {
		names := regexp.MustCompile("`([A-Z][A-Z0-9_]+)`").FindAllStringSubmatch(cells[0], -1)
		defaults := []string{cells[1]}
		if len(names) > 1 {
			defaults = strings.Split(cells[1], ", ")
		}
		for i, n := range names {
			documented[n[1]] = defaults[min(i, len(defaults)-1)]
		}
	}
	defaults := envDefaults(reflect.TypeOf(config.Config{}))
	var bad []string
	for name, def := range defaults {
		cell, ok := documented[name]
		switch {
		case !ok:
			bad = append(bad, name+": not in the table")
		case def != "" && !strings.HasPrefix(cell, "`"+def+"`"):
			bad = append(bad, fmt.Sprintf("%s: the table says %s, the code's default is %q", name, cell, def))
		}
	}
	for name := range documented {
		if _, ok := defaults[name]; !ok {
			bad = append(bad, name+": in the table, but no setting")
		}
	}
	sort.Strings(bad)
	require.Empty(t, bad, "README.md's Configuration table and config.Config disagree:\n%s", strings.Join(bad, "\n"))
}

// ARCHITECTURE's table of periodic jobs lists every job a domain.Job
// declares and no other, and a job's default interval, where the row names
// the setting it comes from (`FETCH_INTERVAL` 15m), is that setting's
// default.
func TestDocsJobsTableListsEveryJob(t *testing.T) {
	t.Parallel()
	repo, err := scanRepo(".")
	require.NoError(t, err)
	require.NotEmpty(t, repo.jobs)
	src, err := os.ReadFile("docs/ARCHITECTURE.md")
	require.NoError(t, err)
	rows := tableRows(section(string(src), "**Periodic jobs**"))
	require.NotEmpty(t, rows, "docs/ARCHITECTURE.md has no table of periodic jobs")
	defaults := envDefaults(reflect.TypeOf(config.Config{}))
	interval := regexp.MustCompile("^`([A-Z][A-Z0-9_]+)` (\\S+)$")
	var bad []string
	listed := map[string]bool{}
	for _, cells := range rows {
		job := strings.Trim(cells[0], "`")
		listed[job] = true
		if !repo.jobs[job] {
			bad = append(bad, job+": in the table, but no job")
		}
		if m := interval.FindStringSubmatch(cells[1]); m != nil {
			def, ok := defaults[m[1]]
			if !ok || !sameDuration(def, m[2]) {
				bad = append(bad, fmt.Sprintf("%s: the table says %s %s, the code's default is %q", job, m[1], m[2], def))
			}
		}
	}
	for job := range repo.jobs {
		if !listed[job] {
			bad = append(bad, job+": not in the table")
		}
	}
	sort.Strings(bad)
	require.Empty(t, bad, "docs/ARCHITECTURE.md's jobs table and the code disagree:\n%s", strings.Join(bad, "\n"))
}

// section is text from the line that starts with heading to the next
// heading of a Markdown section (or the end).
func section(text, heading string) string {
	i := strings.Index(text, "\n"+heading)
	if i < 0 {
		return ""
	}
	rest := text[i+1:]
	if j := strings.Index(rest[len(heading):], "\n#"); j >= 0 {
		rest = rest[:len(heading)+j]
	}
	return rest
}

// tableRows are the cells of the body rows of the first Markdown table in
// text, trimmed; the header and the separator are left out.
func tableRows(text string) [][]string {
	var rows [][]string
	in := false
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "|") {
			if in {
				break
			}
			continue
		}
		if !in {
			in = true // the header
			continue
		}
		if strings.HasPrefix(line, "|---") {
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), " | ") {
			cells = append(cells, strings.TrimSpace(c))
		}
		if len(cells) >= 2 {
			rows = append(rows, cells)
		}
	}
	return rows
}

// envDefaults maps each env tag of a config struct to its envDefault ("" for none).
func envDefaults(t reflect.Type) map[string]string {
	out := map[string]string{}
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("env"), ","); name != "" {
			out[name] = f.Tag.Get("envDefault")
		}
	}
	return out
}

// sameDuration: a and b are the same duration however written (60s, 1m).
func sameDuration(a, b string) bool {
	da, errA := time.ParseDuration(a)
	db, errB := time.ParseDuration(b)
	return errA == nil && errB == nil && da == db
}
