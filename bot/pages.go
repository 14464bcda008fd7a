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
