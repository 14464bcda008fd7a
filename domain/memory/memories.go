package memory

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"switchboard/domain"
)

// Memories the user sees and corrects: /memory's pages, one memory's
// deletion, correction and history, and "forget what I told you about X".
//
// A memory is an lsm_storage row. It is current until a later one
// supersedes it (the archivist's, when an exchange contradicts it, or the
// user's correction); it is then kept as history, with the time it stopped
// being true, and no answer reads it. Deleting any version deletes the
// whole chain it belongs to, and every copy of its text storage.Memories.Delete
// knows of (Erased).

// MemoriesPerPage is how many memories one page of /memory shows.
const MemoriesPerPage = 5

// MaxMemory bounds a corrected memory's text, in characters.
const MaxMemory = 1000

// How long the bot waits for the answer to a question about memories: a
// correction's text, the confirmation of a "forget what I told you".
const (
	CorrectionWait = 30 * time.Minute
	ForgetWait     = time.Hour
)

// forgetMatches bounds the memories one "forget what I told you about X"
// offers to delete (its confirmation lists them).
const forgetMatches = 20

// Erased counts what deleting memories erased. With each memory go every
// version of it and the exchanges it was summarised from: those pipeline
// runs, their raw logs (the user's message and the answer) and the
// outbox rows that carried the answer; copies of the texts quoted in the
// user's other runs' contexts and in the bot's messages to them
// (/memory's pages) are replaced by a placeholder.
type Erased struct {
	Memories, Runs, Logs, Messages int
}

// MemoryPage is one page of the user's current memories.
type MemoryPage struct {
	Items []Summary
	// Page counts from 0; Pages is at least 1 when Total > 0.
	Page, Pages, Total int
}

// CorrectionOutcome is what became of a private text when a correction
// might have been waiting for it.
type CorrectionOutcome string

const (
	// CorrectionNone: no correction waits; the text is a chat message.
	CorrectionNone CorrectionOutcome = "none"
	// CorrectionExpired: one waited but its time ran out; it is dropped
	// and the text is a chat message.
	CorrectionExpired CorrectionOutcome = "expired"
	// CorrectionGone: the memory was deleted or superseded meanwhile;
	// nothing was saved.
	CorrectionGone CorrectionOutcome = "gone"
	// CorrectionSaved: the text is the memory's new current version.
	CorrectionSaved CorrectionOutcome = "saved"
)

// Correction is Memories.TakeCorrection's result: New is the saved version.
type Correction struct {
	Outcome CorrectionOutcome
	New     Summary
}

// Memories returns page page (from 0) of the user's current memories; a
// page past the end shows the last one (after a deletion emptied it).
func (s *Service) Memories(ctx context.Context, userID int64, page int) (MemoryPage, error) {
	page = max(page, 0)
	items, total, err := s.deps.Memories.Page(ctx, userID, page*MemoriesPerPage, MemoriesPerPage)
	if err != nil {
		return MemoryPage{}, fmt.Errorf("memories of user %d: %w", userID, err)
	}
	pages := (total + MemoriesPerPage - 1) / MemoriesPerPage
	if len(items) == 0 && total > 0 {
		page = pages - 1
		if items, total, err = s.deps.Memories.Page(ctx, userID, page*MemoriesPerPage, MemoriesPerPage); err != nil {
			return MemoryPage{}, fmt.Errorf("memories of user %d: %w", userID, err)
		}
		pages = (total + MemoriesPerPage - 1) / MemoriesPerPage
	}
	return MemoryPage{Items: items, Page: min(page, max(pages-1, 0)), Pages: pages, Total: total}, nil
}

// MemoryHistory is the version chain of one of the user's memories,
// newest first; domain.ErrNotFound if they have no such memory.
func (s *Service) MemoryHistory(ctx context.Context, userID, id int64) ([]Summary, error) {
	h, err := s.deps.Memories.History(ctx, userID, id)
	if err != nil {
		return nil, fmt.Errorf("history of memory %d: %w", id, err)
	}
	if len(h) == 0 {
		return nil, domain.ErrNotFound
	}
	return h, nil
}

// DeleteMemory deletes one of the user's memories with its whole chain
// (Erased); false if there was no such memory of theirs.
func (s *Service) DeleteMemory(ctx context.Context, userID, id int64) (Erased, bool, error) {
	e, err := s.deps.Memories.Delete(ctx, userID, []int64{id})
	if err != nil {
		return Erased{}, false, fmt.Errorf("delete memory %d: %w", id, err)
	}
	return e, e.Memories > 0, nil
}

// AskCorrection makes the user's next private text the corrected version
// of one of their current memories, for CorrectionWait; false if it is
// not one (deleted, superseded, someone else's).
func (s *Service) AskCorrection(ctx context.Context, userID, id int64) (Summary, bool, error) {
	m, ok, err := s.deps.Memories.AskCorrection(ctx, userID, id, CorrectionWait)
	if err != nil {
		return Summary{}, false, fmt.Errorf("ask correction of memory %d: %w", id, err)
	}
	return m, ok, nil
}

// CancelCorrection drops the correction of that memory if it still waits.
func (s *Service) CancelCorrection(ctx context.Context, userID, id int64) (bool, error) {
	ok, err := s.deps.Memories.CancelCorrection(ctx, userID, id)
	if err != nil {
		return false, fmt.Errorf("cancel correction of memory %d: %w", id, err)
	}
	return ok, nil
}

// TakeCorrection offers a private text, message messageID, to the
// correction waiting, if one does: saved, it supersedes the memory (kept
// as its history). A text too long for a memory, with a correction
// waiting, is refused with an input error and the correction keeps
// waiting. The same message handled again (a replica died before its
// update's done-mark) is saved already: it returns what it saved.
func (s *Service) TakeCorrection(ctx context.Context, userID int64, messageID int, text string) (Correction, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return Correction{Outcome: CorrectionNone}, nil
	}
	if n := utf8.RuneCountInString(text); n > MaxMemory {
		waiting, err := s.deps.Memories.CorrectionWaiting(ctx, userID)
		if err != nil {
			return Correction{}, fmt.Errorf("correction of user %d: %w", userID, err)
		}
		if !waiting {
			return Correction{Outcome: CorrectionNone}, nil
		}
		return Correction{}, &domain.InputError{Key: "memories.correct_too_long", Args: map[string]any{"Max": MaxMemory, "Len": n}}
	}
	bs, be := isoWeek(s.deps.Clock.Now())
	c, err := s.deps.Memories.TakeCorrection(ctx, userID, messageID, Summary{BucketStart: bs, BucketEnd: be, Summary: text})
	if err != nil {
		return Correction{}, fmt.Errorf("correction of user %d: %w", userID, err)
	}
	return c, nil
}

// ForgetAbout finds the user's memories, current and superseded, that
// match topic (ForgetTopic's), and records them for the confirmation's
// button: request 0 when none matched. messageID is the private message
// that asked: asked again (its update handled again), it returns the
// request it made and the memories that request names, since those are
// what its buttons delete.
func (s *Service) ForgetAbout(ctx context.Context, userID int64, messageID int, topic string) (int64, []Summary, error) {
	all, err := s.deps.Memories.Versions(ctx, userID, maxVersionsSearched)
	if err != nil {
		return 0, nil, fmt.Errorf("memories of user %d: %w", userID, err)
	}
	found := matchTopic(all, topic, forgetMatches)
	if len(found) == 0 {
		return 0, nil, nil
	}
	ids := make([]int64, len(found))
	for i, m := range found {
		ids[i] = m.ID
	}
	req, asked, err := s.deps.Memories.AskForget(ctx, userID, messageID, ids, ForgetWait)
	if err != nil {
		return 0, nil, fmt.Errorf("ask to forget %d memories: %w", len(ids), err)
	}
	if !slices.Equal(asked, ids) {
		// Memories came or went since the first time: the list shows
		// what the request would delete.
		found = nil
		for _, m := range all {
			if slices.Contains(asked, m.ID) {
				found = append(found, m)
			}
		}
	}
	return req, found, nil
}

// maxVersionsSearched bounds the memories a "forget what I told you"
// reads: years of weekly chatting.
const maxVersionsSearched = 2000

// ConfirmForget deletes the memories of a ForgetAbout request (Erased);
// false if the request is gone (answered, expired, someone else's).
func (s *Service) ConfirmForget(ctx context.Context, userID, requestID int64) (Erased, bool, error) {
	e, ok, err := s.deps.Memories.Forget(ctx, userID, requestID)
	if err != nil {
		return Erased{}, false, fmt.Errorf("forget memories of request %d: %w", requestID, err)
	}
	return e, ok, nil
}

// KeepMemories drops a ForgetAbout request unanswered; false if it is gone.
func (s *Service) KeepMemories(ctx context.Context, userID, requestID int64) (bool, error) {
	ok, err := s.deps.Memories.DropForgetRequest(ctx, userID, requestID)
	if err != nil {
		return false, fmt.Errorf("drop request %d: %w", requestID, err)
	}
	return ok, nil
}

// offered keeps the ids the archivist named that are among the memories
// it was shown, once each: a model's answer is never trusted to name
// anything else.
func offered(ids []int64, shown []Summary) []int64 {
	var out []int64
	for _, id := range ids {
		if slices.ContainsFunc(shown, func(m Summary) bool { return m.ID == id && m.Current() }) && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// current keeps the memories still true: what every stage reads.
func current(sums []Summary) []Summary {
	if !slices.ContainsFunc(sums, func(m Summary) bool { return !m.Current() }) {
		return sums
	}
	out := make([]Summary, 0, len(sums))
	for _, m := range sums {
		if m.Current() {
			out = append(out, m)
		}
	}
	return out
}

// The plain-words request to forget, in each language the bot speaks:
// the whole message, "forget" addressed to the bot, "what I told you"
// (or a close variant) and "about X". Anything else — "I forget what you
// told me about X", "forget it, tell me about Go" — is a chat message.
var forgetPatterns = []*regexp.Regexp{
	regexp.MustCompile(`^(?:please\s*,?\s+)?(?:can you\s+|could you\s+)?forget\s*,?\s+(?:everything\s+|all\s+)?(?:what|that|(?:everything|all)(?:\s+that)?)?\s*i(?:'ve|\s+have)?\s+(?:told|said|mentioned|wrote|written)(?:\s+(?:to\s+)?you)?\s+(?:about|regarding|on)\s+(.+?)(?:\s*,?\s+please)?[\s.!?]*$`),
	regexp.MustCompile(`^(?:пожалуйста\s*,?\s+)?забудь(?:те)?\s*,?\s+(?:пожалуйста\s*,?\s+)?(?:вс[её]\s*,?\s+|то\s*,?\s+)?что\s+я\s+(?:тебе\s+|вам\s+)?(?:говорил|говорила|рассказывал|рассказывала|писал|писала|сказал|сказала)(?:\s+(?:тебе|вам))?\s+(?:про|о|об|обо|насч[её]т)\s+(.+?)(?:\s*,?\s+пожалуйста)?[\s.!?]*$`),
	regexp.MustCompile(`^(?:будь\s+ласка\s*,?\s+)?забудь(?:те)?\s*,?\s+(?:будь\s+ласка\s*,?\s+)?(?:вс[еє]\s*,?\s+|те\s*,?\s+)?що\s+я\s+(?:тобі\s+|вам\s+)?(?:казав|казала|говорив|говорила|розповідав|розповідала|писав|писала|сказав|сказала)(?:\s+(?:тобі|вам))?\s+(?:про|щодо|о|об)\s+(.+?)(?:\s*,?\s+будь\s+ласка)?[\s.!?]*$`),
}

// maxTopicWords bounds X in "forget what I told you about X": a topic, not
// a sentence that goes on to ask something else.
const maxTopicWords = 6

// ForgetTopic recognises a private message asking to forget what the
// user told about something, in English, Russian or Ukrainian, and
// returns that something. It is strict on purpose: a message it takes is
// never a chat message (not stored, not answered by the model).
func ForgetTopic(text string) (string, bool) {
	t := strings.ToLower(strings.Join(strings.Fields(text), " "))
	t = strings.ReplaceAll(t, "’", "'")
	if t == "" || utf8.RuneCountInString(t) > 200 || strings.Contains(text, "\n") {
		return "", false
	}
	for _, p := range forgetPatterns {
		m := p.FindStringSubmatch(t)
		if m == nil {
			continue
		}
		topic := strings.Trim(m[1], " \"'«»“”„")
		if topic == "" || strings.ContainsAny(topic, ",;:?!.") || len(strings.Fields(topic)) > maxTopicWords {
			return "", false
		}
		if len(topicWords(topic)) == 0 {
			return "", false
		}
		return topic, true
	}
	return "", false
}

// topicWords are the words a topic is matched by: case-folded, each cut
// to a stem that survives the endings of Russian and Ukrainian ("Киев",
// "Киеве"), short function words ("my", "the", "в") left out unless
// nothing else is left.
func topicWords(topic string) []string {
	all := foldedWords(topic)
	var long []string
	for _, w := range all {
		if n := utf8.RuneCountInString(w); n > 3 || (n == 3 && !stopWords[w]) {
			long = append(long, stem(w))
		}
	}
	if len(long) > 0 {
		return long
	}
	for i, w := range all {
		all[i] = stem(w)
	}
	return all
}

// stopWords are three-letter words too common to say what a memory is
// about.
var stopWords = map[string]bool{"the": true, "and": true, "моя": true, "мой": true, "мои": true, "мою": true, "моё": true, "мое": true,
	"мій": true, "моє": true, "мої": true, "our": true, "его": true, "він": true, "она": true, "они": true}

// stem drops the last two letters of a word longer than five, one of a
// word of five: enough for the usual noun endings, not enough to make a
// short word match everything.
func stem(w string) string {
	r := []rune(w)
	switch {
	case len(r) > 5:
		return string(r[:len(r)-2])
	case len(r) == 5:
		return string(r[:4])
	}
	return w
}

// foldedWords splits s into lower-case words of letters and digits, ё
// read as е.
func foldedWords(s string) []string {
	s = strings.NewReplacer("ё", "е", "Ё", "е").Replace(strings.ToLower(s))
	return strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// matchTopic keeps the memories whose summary and tags hold every word of
// topic (as a word's beginning), newest first, at most limit.
func matchTopic(sums []Summary, topic string, limit int) []Summary {
	want := topicWords(topic)
	if len(want) == 0 {
		return nil
	}
	var out []Summary
	for _, m := range sums {
		have := foldedWords(m.Summary + " " + strings.Join(m.Tags, " "))
		if !allFound(want, have) {
			continue
		}
		out = append(out, m)
		if len(out) == limit {
			break
		}
	}
	return out
}

func allFound(want, have []string) bool {
	for _, w := range want {
		if !slices.ContainsFunc(have, func(h string) bool { return strings.HasPrefix(h, w) }) {
			return false
		}
	}
	return true
}
