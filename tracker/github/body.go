package github

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"switchboard/domain/tasks"
	"switchboard/tracker"
)

// GitHub's bounds on an issue, in characters.
const (
	MaxTitle = 256
	MaxBody  = 65536
)

// Title is t's issue title: one line, at most MaxTitle characters, never
// empty (GitHub refuses an empty title).
func Title(t tasks.Task) string {
	title := strings.Join(strings.Fields(t.Title), " ")
	if title == "" {
		title = "Proposal " + strconv.FormatInt(t.ProposalID, 10)
	}
	return tracker.Clip(title, MaxTitle)
}

// markerLine is the marker as the body carries it: an HTML comment,
// which GitHub keeps in the body and does not render.
func markerLine(marker string) string { return "<!-- " + marker + " -->" }

// Body is t's issue body in Markdown, at most MaxBody characters, ending
// in the marker's line. assigned says whether GitHub shows the assignee
// (the issue is assigned to t.Assignee); if not, the body names them.
func Body(t tasks.Task, assigned bool) string {
	var b strings.Builder
	if d := strings.TrimSpace(t.Description); d != "" {
		b.WriteString(plain(d))
		b.WriteString("\n\n")
	}
	if p := strings.TrimSpace(t.Priority); p != "" {
		fmt.Fprintf(&b, "- **Priority:** %s\n", plain(p))
	}
	if t.Deadline != "" {
		fmt.Fprintf(&b, "- **Deadline:** %s\n", plain(t.Deadline))
	}
	switch {
	case assigned:
	case t.Assignee != "":
		// The login in code: an @ would notify someone GitHub just said
		// cannot be assigned here.
		fmt.Fprintf(&b, "- **Assignee:** %s (GitHub login `%s` could not be assigned)\n", plain(cmpOr(t.Mention, t.Assignee)), strings.ReplaceAll(t.Assignee, "`", ""))
	case t.Mention != "":
		fmt.Fprintf(&b, "- **Assignee:** %s (no GitHub login known)\n", plain(t.Mention))
	}
	if len(t.Sources) > 0 {
		b.WriteString("\n### Sources\n")
		for _, s := range t.Sources {
			b.WriteString("\n")
			for l := range strings.Lines(strings.TrimSpace(s.Text)) {
				b.WriteString(strings.TrimRight("> "+plain(strings.TrimRight(l, "\r\n")), " ") + "\n")
			}
			b.WriteString("\n— " + source(s) + "\n")
		}
	}
	tail := "\n" + approval(t) + "\n\n" + markerLine(t.Marker()) + "\n"
	head := b.String()
	if n := utf8.RuneCountInString(head) + utf8.RuneCountInString(tail); n > MaxBody {
		const note = "\n\n*(clipped: the task is longer than GitHub allows)*\n"
		head = tracker.Clip(head, MaxBody-utf8.RuneCountInString(tail)-utf8.RuneCountInString(note)) + note
	}
	return head + tail
}

// source names where a quoted message came from: its link, or where
// there is none (a basic group) the chat and the time.
func source(s tasks.Source) string {
	who := plain(cmpOr(strings.TrimSpace(s.Author), "someone"))
	chat := plain(cmpOr(strings.TrimSpace(s.ChatTitle), "a Telegram chat"))
	if s.Link != "" {
		return fmt.Sprintf("%s in [%s](%s)", who, strings.NewReplacer("[", "\\[", "]", "\\]").Replace(chat), s.Link)
	}
	return fmt.Sprintf("%s in %s, %s", who, chat, utc(s.At))
}

func approval(t tasks.Task) string {
	by := "Approved in Telegram"
	if t.ApprovedBy != 0 {
		by += " by user " + strconv.FormatInt(t.ApprovedBy, 10)
	}
	if !t.ApprovedAt.IsZero() {
		by += " on " + utc(t.ApprovedAt)
	}
	return "*" + by + ".*"
}

func utc(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

// plain makes chat text inert in Markdown where it would act: '<' would
// open HTML (a comment could hide the rest, or fake a marker), and '@'
// would notify whichever GitHub user has the name someone used in
// Telegram. A word joiner after '@' keeps it readable and silent.
func plain(s string) string {
	return strings.NewReplacer("<", "&lt;", "@", "@\u2060").Replace(s)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
