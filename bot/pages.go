package bot

import (
	"slices"

	tele "gopkg.in/telebot.v3"

	"switchboard/locales"
)

// The parts of a message shown a page at a time whose buttons turn it in
// place: /runs and /masters (a list), a run's board.

// listPage is one page of a list shown in pages.
type listPage[T any] struct {
	items              []T
	page, pages, total int
}

// pageOf reads page of a list shown size items a page; read returns a
// page's items and the list's length. A page past the end (the list
// shrank since its buttons were shown) is the last one instead.
func pageOf[T any](page, size int, read func(page int) ([]T, int, error)) (listPage[T], error) {
	items, total, err := read(page)
	if err != nil {
		return listPage[T]{}, err
	}
	pages := max((total+size-1)/size, 1)
	if len(items) == 0 && total > 0 && page >= pages {
		page = pages - 1
		if items, total, err = read(page); err != nil {
			return listPage[T]{}, err
		}
	}
	return listPage[T]{items: items, page: page, pages: pages, total: total}, nil
}

// pageTurn is the handler of an admins' list's ◀ ▶ buttons: list renders
// the page the button names (clamped: it is data from Telegram), and the
// pressed message is edited to it in place.
func pageTurn(b *Bot, list func(r *Request, page int) (string, *tele.ReplyMarkup, error)) CallbackHandler {
	return func(r *Request, cb Callback) error {
		if !r.Admin {
			return r.Forbidden()
		}
		text, kb, err := list(r, int(min(cb.IDs[0], 1<<30)))
		if err != nil {
			return err
		}
		b.editPressed(r, text, kb)
		return r.Ack()
	}
}

// pageButton is a button of a paged message's navigation: to page,
// labelled by key (with the page's number as "Page"), shown when show.
type pageButton struct {
	key  string
	page int
	show bool
}

// pageRow is a paged message's navigation row: the buttons shown, each
// pressing a with ids and its page; empty when none is.
func pageRow(cat *locales.Catalog, lang string, a Action, ids []int64, buttons ...pageButton) ([]tele.InlineButton, error) {
	var row []tele.InlineButton
	for _, b := range buttons {
		if !b.show {
			continue
		}
		data, err := Encode(a, append(slices.Clone(ids), int64(b.page))...)
		if err != nil {
			return nil, err
		}
		row = append(row, tele.InlineButton{Text: cat.T(lang, b.key, locales.Data{"Page": b.page + 1}), Data: data})
	}
	return row, nil
}

// pageTurns is a list's ◀ ▶ row under page of pages, pressing a: back
// (prevKey) unless it is the first page, on (nextKey) unless it is the
// last; no buttons for a list of one page.
func pageTurns(r *Request, a Action, page, pages int, prevKey, nextKey string) (*tele.ReplyMarkup, error) {
	row, err := pageRow(r.bot.deps.Catalog, r.Lang, a, nil,
		pageButton{prevKey, page - 1, page > 0}, pageButton{nextKey, page + 1, page+1 < pages})
	if err != nil || len(row) == 0 {
		return nil, err
	}
	return &tele.ReplyMarkup{InlineKeyboard: [][]tele.InlineButton{row}}, nil
}

// pageLine is what packPages needs of a line of a list: its UTF-16 units
// and whether it has a button under the message.
type pageLine struct {
	units  int
	button bool
}

// packPages cuts a list into pages in its order: a page holds at most
// budget units of lines and at most buttons lines with a button. It is for
// a list read whole whose lines vary in length, so that a list that fits
// one message stays one and a long one takes as few pages as fit; the
// same list always packs the same way, so a page number in a button names
// the same lines until the list changes. A line longer than budget gets a
// page of its own (the caller clips lines so none is). The result holds
// each page's first index and ends with len(lines): page p is
// lines[starts[p]:starts[p+1]]; an empty list is one empty page.
func packPages(lines []pageLine, budget, buttons int) []int {
	starts := []int{0}
	used, n, pressable := 0, 0, 0
	for i, l := range lines {
		full := used+l.units > budget || l.button && pressable == buttons
		if n > 0 && full {
			starts = append(starts, i)
			used, n, pressable = 0, 0, 0
		}
		used += l.units
		n++
		if l.button {
			pressable++
		}
	}
	return append(starts, len(lines))
}

// fairShares divides total units among items wanting wants[i] each, so
// that the short ones are shown whole and the long ones cut to equal
// parts of what is left (max-min fairness): one long memory beside four
// short ones keeps most of its text instead of a fifth of the message.
func fairShares(wants []int, total int) []int {
	order := make([]int, len(wants))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return wants[a] - wants[b] })
	shares := make([]int, len(wants))
	left := max(total, 0)
	for k, i := range order {
		shares[i] = min(wants[i], left/(len(order)-k))
		left -= shares[i]
	}
	return shares
}
