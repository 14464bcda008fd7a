package analysis

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"switchboard/domain"
)

// systemPrompt asks for task proposals. The answer's shape is answer below.
const systemPrompt = `You read a batch of messages from a team's group chat and propose the tasks they imply.
Answer with JSON only, exactly this shape:
{"proposals": [{"title": "...", "description": "...", "priority": "low|medium|high",
  "assignee": "", "deadline": "", "source_message_ids": [123]}]}
Rules:
- Propose a task only for concrete work someone should do; chit-chat gives {"proposals": []}.
- title: short imperative (at most 120 characters); description: what and why, from the messages.
- assignee: only the person the messages name for it (as written there); otherwise "".
- deadline: only when the messages state one, as YYYY-MM-DD; resolve relative dates ("tomorrow",
  "by Friday") against the date of the message that says it; never invent one; otherwise "".
- source_message_ids: the ids of the messages the task comes from (at least one, from this batch).
- Do not repeat a task listed under "Already approved" unless the messages add something new.`

// Answer is the JSON the LLM answers a batch with (and what a scripted LLM
// writes); Validate makes a wrong shape an invalid answer (retried once).
type Answer struct {
	Proposals []AnswerProposal `json:"proposals"`
}

// AnswerProposal is one task of an Answer; Sources are the ids of the
// group messages it comes from.
type AnswerProposal struct {
	Title       string  `json:"title"`
	Description string  `json:"description"`
	Priority    string  `json:"priority"`
	Assignee    string  `json:"assignee"`
	Deadline    string  `json:"deadline"`
	Sources     []int64 `json:"source_message_ids"`
}

// Limits on what a proposal keeps from the LLM.
const (
	MaxTitle       = 200
	MaxDescription = 2000
	MaxAssignee    = 100
)

// Validate implements the llm package's validation hook.
func (a *Answer) Validate() error {
	if a.Proposals == nil {
		return errors.New(`missing "proposals" array`)
	}
	for i, p := range a.Proposals {
		if strings.TrimSpace(p.Title) == "" {
			return fmt.Errorf("proposal %d: empty title", i)
		}
		switch strings.ToLower(strings.TrimSpace(p.Priority)) {
		case "low", "medium", "high":
		default:
			return fmt.Errorf("proposal %d: priority %q", i, p.Priority)
		}
		if len(p.Sources) == 0 {
			return fmt.Errorf("proposal %d: no source_message_ids", i)
		}
	}
	return nil
}

// batchBudget bounds the messages' text in one batch's prompt, in
// characters: with the instructions, the similar proposals and a 2048-token
// answer it stays within the model's window (LLM_NUM_CTX, 16384 tokens by
// default) even at two characters a token (Cyrillic), instead of the server
// cutting the front of the prompt off. Each message gets an equal share
// (at most maxMessageText); a longer one is cut there, marked.
const (
	batchBudget    = 24000
	maxMessageText = 2000
)

// renderBatch writes the batch for the prompt: the zone its times are
// in, then one line per message with its id, its own time in loc with the
// offset (for relative deadlines) and author, each text cut to its share
// of batchBudget; the messages it cut.
func renderBatch(batch []GroupMessage, similar []Proposal, loc *time.Location) (string, int) {
	if loc == nil {
		loc = time.UTC
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "## Time zone\nEvery time below is local to %s, with its offset from UTC; a day such as \"tomorrow\" is that zone's.\n\n", loc)
	if len(similar) > 0 {
		sb.WriteString("## Already approved in earlier runs (similar topics)\n")
		for _, p := range similar {
			fmt.Fprintf(&sb, "- %s — %s\n", oneLine(p.Title), clipRunes(oneLine(p.Description), 300))
		}
		sb.WriteString("\n")
	}
	sb.WriteString("## Messages\n")
	share := min(maxMessageText, batchBudget/max(len(batch), 1))
	cut := 0
	for _, m := range batch {
		text := m.Text
		if utf8.RuneCountInString(text) > share {
			text = clipRunes(text, share)
			cut++
		}
		fmt.Fprintf(&sb, "[id=%d %s] %s: %s\n", m.MessageID, domain.PromptStamp(m.Date, loc),
			oneLine(m.Author), strings.ReplaceAll(text, "\n", "\n    "))
	}
	return sb.String(), cut
}

// proposalsFrom turns a valid answer into proposals, keeping only what the
// messages back: sources from this batch (a proposal with none is
// dropped), an assignee the cited messages mention or wrote, a deadline
// that is a real date not before the first cited message's day in loc,
// the zone the prompt gave the model.
func proposalsFrom(a Answer, batch []GroupMessage, loc *time.Location) []Proposal {
	byID := make(map[int64]GroupMessage, len(batch))
	for _, m := range batch {
		byID[m.MessageID] = m
	}
	var out []Proposal
	for _, ap := range a.Proposals {
		var srcs []GroupMessage
		for _, id := range ap.Sources {
			if m, ok := byID[id]; ok && !slices.ContainsFunc(srcs, func(x GroupMessage) bool { return x.MessageID == id }) {
				srcs = append(srcs, m)
			}
		}
		if len(srcs) == 0 {
			continue
		}
		p := Proposal{
			Title:       clipRunes(oneLine(ap.Title), MaxTitle),
			Description: clipRunes(strings.TrimSpace(ap.Description), MaxDescription),
			Priority:    strings.ToLower(strings.TrimSpace(ap.Priority)),
			Assignee:    stated(ap.Assignee, srcs),
			Deadline:    deadline(ap.Deadline, srcs, loc),
		}
		for _, m := range srcs {
			p.Sources = append(p.Sources, Ref{ChatID: m.ChatID, MessageID: m.MessageID})
		}
		out = append(out, p)
	}
	return out
}

// stated keeps an assignee only if a cited message names them or wrote it.
func stated(assignee string, srcs []GroupMessage) string {
	a := strings.TrimSpace(assignee)
	name := strings.ToLower(strings.TrimPrefix(a, "@"))
	if name == "" {
		return ""
	}
	for _, m := range srcs {
		if strings.Contains(strings.ToLower(m.Text), name) || strings.EqualFold(strings.TrimPrefix(m.Author, "@"), name) {
			return clipRunes(oneLine(a), MaxAssignee)
		}
	}
	return ""
}

// deadline keeps a YYYY-MM-DD date not before the earliest cited message's
// day in loc (a date in the past of the conversation is an invention). The
// day is loc's because the model was given the messages' times there: west
// of UTC, "today" at 21:00 is the UTC day before.
func deadline(d string, srcs []GroupMessage, loc *time.Location) string {
	d = strings.TrimSpace(d)
	t, err := time.Parse("2006-01-02", d)
	if err != nil {
		return ""
	}
	first := srcs[0].Date
	for _, m := range srcs {
		if m.Date.Before(first) {
			first = m.Date
		}
	}
	if loc == nil {
		loc = time.UTC
	}
	y, m, day := first.In(loc).Date()
	if t.Before(time.Date(y, m, day, 0, 0, 0, 0, time.UTC)) {
		return ""
	}
	return d
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// embedText is what a batch or a proposal is embedded as.
func embedText(batch []GroupMessage) string {
	var sb strings.Builder
	for _, m := range batch {
		sb.WriteString(oneLine(m.Text))
		sb.WriteString("\n")
		if sb.Len() > 4000 {
			break
		}
	}
	return sb.String()
}
