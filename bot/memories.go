package bot

import (
	"errors"
	"strings"

	tele "gopkg.in/telebot.v3"

	"switchboard/domain"
	"switchboard/domain/memory"
	"switchboard/locales"
)

// The memories a user sees and corrects: /memory's pages, a button row
// per memory (Delete, Correct, History), the correction's text, and
// "forget what I told you about X" (domain/memory/memories.go).
//
// Every button carries the id of the user who may press it; the memory or
// request it names is looked up as that user's, so a forged id finds
// nothing, and a press on a memory gone or changed since gets the stale
// alert.
var (
	actionMemoryPage          = NewAction("mp", 2)  // user, page
	actionMemoryDelete        = NewAction("md", 3)  // user, memory, page: asks
	actionMemoryDeleteYes     = NewAction("my", 3)  // user, memory, page: deletes
	actionMemoryCorrect       = NewAction("mr", 2)  // user, memory
	actionMemoryCorrectCancel = NewAction("mx", 2)  // user, memory
	actionMemoryHistory       = NewAction("mh", 3)  // user, memory, page
	actionMemoryForgetYes     = NewAction("mfy", 2) // user, request
	actionMemoryForgetKeep    = NewAction("mfk", 2) // user, request
)

func (u *memoryUI) registerMemories() {
	own := func(h func(r *Request, cb Callback) error) CallbackHandler {
		return func(r *Request, cb Callback) error {
			if cb.IDs[0] != r.User.ID {
				return r.Forbidden()
			}
			return h(r, cb)
		}
	}
	u.b.HandleButton(actionMemoryPage, own(u.pagePressed))
	u.b.HandleButton(actionMemoryDelete, own(stalePress("memories.stale", u.deleteAsked)))
	u.b.HandleButton(actionMemoryDeleteYes, own(stalePress("memories.stale", u.deleteConfirmed)))
	u.b.HandleButton(actionMemoryCorrect, own(stalePress("memories.stale", u.correctPressed)))
	u.b.HandleButton(actionMemoryCorrectCancel, own(stalePress("memories.correct_stale", u.correctCancelled)))
	u.b.HandleButton(actionMemoryHistory, own(stalePress("memories.stale", u.historyPressed)))
	u.b.HandleButton(actionMemoryForgetYes, own(stalePress("memories.request_stale", u.forgetAboutConfirmed)))
	u.b.HandleButton(actionMemoryForgetKeep, own(stalePress("memories.request_stale", u.forgetAboutKept)))
}

// stalePress is the one answer of the memory buttons: a press on a memory
// or request gone or changed since its button was shown (press reports
// false) gets the stale alert, a press that did its work a plain Ack.
func stalePress(stale string, press func(r *Request, cb Callback) (bool, error)) func(r *Request, cb Callback) error {
	return func(r *Request, cb Callback) error {
		ok, err := press(r, cb)
		switch {
		case err != nil:
			return err
		case !ok:
			return r.Alert(stale)
		}
		return r.Ack()
	}
}

// versions is a memory's chain of versions, newest first; false when the
// memory is gone (or not the presser's).
func (u *memoryUI) versions(r *Request, id int64) ([]memory.Summary, bool, error) {
	chain, err := u.m.MemoryHistory(r.Ctx, r.User.ID, id)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, false, nil
	}
	return chain, err == nil, err
}

// Budgets, in UTF-16 units of escaped HTML, of a memory's parts where a
// message edited in place shows it: summaries and tags come from the LLM
// or the user uncut, and a page, the delete confirmation or the history
// longer than one message would be refused by Telegram.
const (
	// memoryTagsBudget is a memory's tags in a list.
	memoryTagsBudget = 200
	// foundSummaryBudget is a summary in the list "forget what I told you
	// about …" finds: enough to know it by.
	foundSummaryBudget = 1000
	// versionBudget is a version in the history: MaxMemory, so a user's
	// correction reads whole.
	versionBudget = memory.MaxMemory
)

// list is /memory: the first page.
func (u *memoryUI) list(r *Request) error {
	return r.ReplyRendered(u.page(r, 0, ""))
}

// page renders page p of the reader's current memories under above (what
// a press just did; "" for nothing): a numbered item each (numbers count
// across pages), a row of buttons each, and ‹ › to turn pages; no buttons
// when there is nothing. Its buttons edit it in place, so it is one
// message: the summaries share what the rest leaves of it (fairShares),
// a long one cut with "…", and the tags are cut to memoryTagsBudget.
func (u *memoryUI) page(r *Request, p int, above string) (string, *tele.ReplyMarkup, error) {
	pg, err := u.m.Memories(r.Ctx, r.User.ID, p)
	if err != nil {
		return "", nil, err
	}
	var lines []string
	if above != "" {
		lines = append(lines, above)
	}
	if pg.Total == 0 {
		return strings.Join(append(lines, r.T("memory.empty")), "\n\n"), nil, nil
	}
	first := pg.Page*memory.MemoriesPerPage + 1
	lines = append(lines, r.T("memories.header", locales.Data{
		"From": first, "To": first + len(pg.Items) - 1, "Total": pg.Total,
	}))
	footer := r.T("memories.footer")
	// The page without its summaries tells what they may take.
	skeleton := utf16Len(strings.Join(append(lines, footer), "\n\n"))
	wants := make([]int, len(pg.Items))
	for i, m := range pg.Items {
		skeleton += utf16Len("\n\n" + memoryItem(r, first+i, m, 0))
		wants[i] = utf16Len(Escape(strings.TrimSpace(m.Summary)))
	}
	shares := fairShares(wants, MaxMessageLen-skeleton)
	var rows [][]tele.InlineButton
	for i, m := range pg.Items {
		n := first + i
		lines = append(lines, memoryItem(r, n, m, shares[i]))
		row := make([]tele.InlineButton, 0, 3)
		for _, b := range []struct {
			key string
			a   Action
			ids []int64
			on  bool
		}{
			{"memories.button_delete", actionMemoryDelete, []int64{r.User.ID, m.ID, int64(pg.Page)}, true},
			{"memories.button_correct", actionMemoryCorrect, []int64{r.User.ID, m.ID}, true},
			{"memories.button_history", actionMemoryHistory, []int64{r.User.ID, m.ID, int64(pg.Page)}, len(m.Supersedes) > 0},
		} {
			if !b.on {
				continue
			}
			data, err := Encode(b.a, b.ids...)
			if err != nil {
				return "", nil, err
			}
			bt := tele.InlineButton{Text: r.T(b.key, locales.Data{"N": n}), Data: data}
			if b.a == actionMemoryDelete {
				bt = styled(bt, domain.StyleDanger)
			}
			row = append(row, bt)
		}
		rows = append(rows, row)
	}
	var nav []tele.InlineButton
	for _, to := range []struct {
		label string
		page  int
		on    bool
	}{{"‹", pg.Page - 1, pg.Page > 0}, {"›", pg.Page + 1, pg.Page < pg.Pages-1}} {
		if !to.on {
			continue
		}
		data, err := Encode(actionMemoryPage, r.User.ID, int64(to.page))
		if err != nil {
			return "", nil, err
		}
		nav = append(nav, tele.InlineButton{Text: to.label, Data: data})
	}
	if len(nav) > 0 {
		rows = append(rows, nav)
	}
	lines = append(lines, footer)
	return strings.Join(lines, "\n\n"), &tele.ReplyMarkup{InlineKeyboard: rows}, nil
}

// memoryItem is one memory in a list: its number, when it was remembered
// (in the reader's zone), its tags (cut to memoryTagsBudget) and its text
// cut to budget.
func memoryItem(r *Request, n int, m memory.Summary, budget int) string {
	var tags []string
	for _, t := range m.Tags {
		if t = oneLine(t); t != "" {
			tags = append(tags, t)
		}
	}
	data := locales.Data{
		"N": n, "Time": r.Time(m.CreatedAt),
		"Tags":    locales.HTML(clip(strings.Join(tags, ", "), memoryTagsBudget)),
		"Summary": clippedSummary(m.Summary, budget),
	}
	if len(tags) > 0 {
		return r.T("memories.item_tagged", data)
	}
	return r.T("memories.item", data)
}

// clippedSummary is a memory's text as HTML, cut to budget with "…";
// nothing for a budget of 0 (what a page takes without its summaries).
func clippedSummary(summary string, budget int) locales.HTML {
	if budget <= 0 {
		return ""
	}
	return locales.HTML(clip(strings.TrimSpace(summary), budget))
}

// pageIn is the page a button carries, within what a page number can be.
func pageIn(cb Callback, i int) int { return int(min(cb.IDs[i], 1<<20)) }

func (u *memoryUI) pagePressed(r *Request, cb Callback) error {
	text, kb, err := u.page(r, pageIn(cb, 1), "")
	if err != nil {
		return err
	}
	u.b.editPressed(r, text, kb)
	return r.Ack()
}

// deleteAsked turns the page into the confirmation, which says what goes.
func (u *memoryUI) deleteAsked(r *Request, cb Callback) (bool, error) {
	chain, ok, err := u.versions(r, cb.IDs[1])
	if err != nil || !ok {
		return ok, err
	}
	var m memory.Summary
	for _, v := range chain {
		if v.ID == cb.IDs[1] {
			m = v
		}
	}
	if !m.Current() {
		return false, nil // superseded since the page was shown
	}
	yes, err := Encode(actionMemoryDeleteYes, cb.IDs...)
	if err != nil {
		return false, err
	}
	back, err := Encode(actionMemoryPage, r.User.ID, cb.IDs[2])
	if err != nil {
		return false, err
	}
	// The question is edited in place: the summary gets what the rest of
	// it leaves.
	rest := ""
	if len(chain) > 1 {
		rest += "\n\n" + r.T("memories.delete_versions", locales.Data{"N": len(chain) - 1})
	}
	rest += "\n\n" + r.T("memories.delete_what")
	budget := MaxMessageLen - utf16Len(r.T("memories.delete_confirm", locales.Data{"Summary": locales.HTML("")})+rest)
	text := r.T("memories.delete_confirm", locales.Data{"Summary": clippedSummary(m.Summary, budget)}) + rest
	u.b.editPressed(r, text, &tele.ReplyMarkup{InlineKeyboard: [][]tele.InlineButton{{
		{Text: r.T("memories.delete_yes"), Data: yes}, {Text: r.T("memories.delete_no"), Data: back},
	}}})
	return true, nil
}

// deleteConfirmed deletes the memory and shows the page again, what was
// deleted said above it.
func (u *memoryUI) deleteConfirmed(r *Request, cb Callback) (bool, error) {
	e, ok, err := u.m.DeleteMemory(r.Ctx, r.User.ID, cb.IDs[1])
	if err != nil || !ok {
		return ok, err
	}
	u.b.deps.Log.Info("memory deleted", "user", r.User.ID, "versions", e.Memories, "runs", e.Runs, "logs", e.Logs, "messages", e.Messages)
	text, kb, err := u.page(r, pageIn(cb, 2), r.T("memories.deleted", locales.Data{"Versions": e.Memories, "Runs": e.Runs}))
	if err != nil {
		return false, err
	}
	u.b.editPressed(r, text, kb)
	return true, nil
}

// correctPressed asks for the corrected text in a message of its own,
// with Cancel; the user's next private text is taken as it (correction).
func (u *memoryUI) correctPressed(r *Request, cb Callback) (bool, error) {
	m, ok, err := u.m.AskCorrection(r.Ctx, r.User.ID, cb.IDs[1])
	if err != nil || !ok {
		return ok, err
	}
	cancel, err := Encode(actionMemoryCorrectCancel, r.User.ID, m.ID)
	if err != nil {
		return false, err
	}
	return true, r.Reply(r.T("memories.correct_ask", locales.Data{"Summary": strings.TrimSpace(m.Summary), "Max": memory.MaxMemory}),
		&tele.ReplyMarkup{InlineKeyboard: [][]tele.InlineButton{{{Text: r.T("memories.correct_cancel"), Data: cancel}}}})
}

func (u *memoryUI) correctCancelled(r *Request, cb Callback) (bool, error) {
	ok, err := u.m.CancelCorrection(r.Ctx, r.User.ID, cb.IDs[1])
	switch {
	case err != nil:
		return false, err
	case !ok:
		// Made, cancelled or timed out: its Cancel button goes too.
		u.b.editMarkupPressed(r, nil)
		return false, nil
	}
	u.b.editPressed(r, r.T("memories.correct_cancelled"), nil)
	return true, nil
}

// correction takes a private text as the correction waiting for it, if
// one does; handled is false for a text that goes on to the chat.
func (u *memoryUI) correction(r *Request) (bool, error) {
	c, err := u.m.TakeCorrection(r.Ctx, r.User.ID, r.Message().ID, r.Message().Text)
	if ie := (*domain.InputError)(nil); errors.As(err, &ie) {
		return true, r.Reply(r.InputText(ie, ""), nil)
	}
	if err != nil {
		return false, err
	}
	switch c.Outcome {
	case memory.CorrectionSaved:
		u.b.deps.Log.Info("memory corrected", "user", r.User.ID, "memory", c.New.ID)
		return true, r.Reply(r.T("memories.corrected", locales.Data{"Summary": c.New.Summary}), nil)
	case memory.CorrectionGone:
		return true, r.Reply(r.T("memories.correct_gone"), nil)
	}
	return false, nil
}

// historyPressed shows the memory's versions, newest first, with the time
// each was true, and a button back to the page. It is edited in place and
// a memory may have been corrected any number of times, so it shows the
// newest versions that fit one message, each cut to versionBudget, and
// counts the older ones left out (/export has every version).
func (u *memoryUI) historyPressed(r *Request, cb Callback) (bool, error) {
	chain, ok, err := u.versions(r, cb.IDs[1])
	if err != nil || !ok {
		return ok, err
	}
	lines := []string{r.T("memories.history_header")}
	used := utf16Len(lines[0])
	// Room kept for the line counting the versions left out, at its
	// longest: the most digits, in any of the forms it takes.
	older := 0
	for _, n := range []int{1, 2, 5, len(chain)} {
		older = max(older, utf16Len("\n\n"+r.T("memories.history_older", locales.Data{"N": n})))
	}
	for i, v := range chain {
		var item string
		if v.Current() {
			item = r.T("memories.version_current", locales.Data{"Since": r.Time(v.CreatedAt), "Summary": clippedSummary(v.Summary, versionBudget)})
		} else {
			item = r.T("memories.version_old", locales.Data{
				"From": r.Time(v.CreatedAt), "Until": r.Time(v.InvalidAt), "Summary": clippedSummary(v.Summary, versionBudget),
			})
		}
		room := MaxMessageLen - used
		if i < len(chain)-1 {
			room -= older
		}
		// The newest is shown whatever happens: versionBudget keeps it
		// far under a message, and fitEdit stands behind that.
		if i > 0 && utf16Len("\n\n"+item) > room {
			lines = append(lines, r.T("memories.history_older", locales.Data{"N": len(chain) - i}))
			break
		}
		lines = append(lines, item)
		used += utf16Len("\n\n" + item)
	}
	back, err := Encode(actionMemoryPage, r.User.ID, cb.IDs[2])
	if err != nil {
		return false, err
	}
	u.b.editPressed(r, strings.Join(lines, "\n\n"), &tele.ReplyMarkup{InlineKeyboard: [][]tele.InlineButton{{
		{Text: r.T("memories.back"), Data: back},
	}}})
	return true, nil
}

// forgetAbout answers "forget what I told you about X": the memories that
// match, current and superseded, and what deleting them erases, with
// Delete N and Keep; or that none matched. X itself is not repeated: the
// message would keep a copy of what the user wants forgotten.
func (u *memoryUI) forgetAbout(r *Request, topic string) error {
	req, found, err := u.m.ForgetAbout(r.Ctx, r.User.ID, r.Message().ID, topic)
	if err != nil {
		return err
	}
	if len(found) == 0 {
		return r.Reply(r.T("memories.about_none"), nil)
	}
	buttons, err := buttonPair(confirmLoss, r.T("memories.about_yes", locales.Data{"N": len(found)}), actionMemoryForgetYes,
		r.T("memories.about_keep"), actionMemoryForgetKeep, r.User.ID, req)
	if err != nil {
		return err
	}
	lines := []string{r.T("memories.about_found", locales.Data{"N": len(found)})}
	for i, m := range found {
		item := memoryItem(r, i+1, m, foundSummaryBudget)
		if !m.Current() {
			item += "\n" + r.T("memories.about_superseded", locales.Data{"Until": r.Time(m.InvalidAt)})
		}
		lines = append(lines, item)
	}
	lines = append(lines, r.T("memories.about_what"))
	return r.Reply(strings.Join(lines, "\n\n"), &tele.ReplyMarkup{InlineKeyboard: [][]tele.InlineButton{buttons}})
}

func (u *memoryUI) forgetAboutConfirmed(r *Request, cb Callback) (bool, error) {
	e, ok, err := u.m.ConfirmForget(r.Ctx, r.User.ID, cb.IDs[1])
	if err != nil || !ok {
		return ok, err
	}
	u.b.deps.Log.Info("memories forgotten", "user", r.User.ID, "versions", e.Memories, "runs", e.Runs, "logs", e.Logs, "messages", e.Messages)
	u.b.editPressed(r, r.T("memories.about_deleted", locales.Data{"Versions": e.Memories, "Runs": e.Runs}), nil)
	return true, nil
}

func (u *memoryUI) forgetAboutKept(r *Request, cb Callback) (bool, error) {
	ok, err := u.m.KeepMemories(r.Ctx, r.User.ID, cb.IDs[1])
	if err != nil || !ok {
		return ok, err
	}
	u.b.editPressed(r, r.T("memories.about_kept"), nil)
	return true, nil
}
