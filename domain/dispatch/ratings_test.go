package dispatch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/dispatch"
)

// rater is the customer of the orders finished makes.
const rater int64 = 900

// finished is an order master did for rater, elsewhere than the tests'
// orders, done and ready to be rated.
func (w *world) finished(t *testing.T, master int64) int64 {
	t.Helper()
	var id int64
	require.NoError(t, w.store.Pool().QueryRow(w.ctx, `
INSERT INTO orders (created_by, city, district, skill, price, description, state, master_id, assigned_at, done_at, customer_id)
VALUES ($1, 'Elsewhere', 'Far', 'any', 100, 'done before', 'DONE', $2, now(), now(), $3) RETURNING id`, admin, master, rater).Scan(&id))
	return id
}

// rated gives master one finished order rated with each of stars.
func (w *world) rated(t *testing.T, s *dispatch.Service, master int64, stars ...int) []int64 {
	t.Helper()
	var ids []int64
	for _, n := range stars {
		id := w.finished(t, master)
		_, err := s.Rate(w.ctx, id, rater, n, "")
		require.NoError(t, err)
		ids = append(ids, id)
	}
	return ids
}

// Equal masters (one city, district and skill) are offered an order best
// rated first, by their average over the last 90 days bucketed to half
// stars; within a bucket the one idle longest goes first. Fewer than three
// ratings in the window count as none, which ranks as 4.0: after a 4.5
// record, with a 4.0 one, before a 3.5 one.
func TestCandidatesAreOrderedByRating(t *testing.T) {
	t.Parallel()
	w, s := setup(t, dispatch.Config{OfferSLA: time.Minute})
	w.masters(t, s, "Lviv Center plumber", 10, 11, 12, 13, 14, 15)
	w.rated(t, s, 14, 5, 5, 5)           // 5.0
	w.rated(t, s, 10, 5, 5, 4)           // 4.67 → 4.5
	w.rated(t, s, 15, 4, 4, 4)           // 4.0
	w.rated(t, s, 12, 5, 5)              // two ratings: unrated, 4.0
	old := w.rated(t, s, 13, 5, 5, 5, 5) // all older than the window: unrated, 4.0
	w.rated(t, s, 11, 3, 3, 4)           // 3.33 → 3.5
	w.exec(t, `UPDATE order_ratings SET rated_at = now() - interval '91 days' WHERE order_id = ANY ($1)`, old)
	// Idle longest first would be the reverse of the ratings' order.
	for i, id := range []int64{11, 12, 15, 13, 10, 14} {
		w.exec(t, `UPDATE masters SET last_offer_at = now() - $2 * interval '1 hour' WHERE user_id = $1`, id, 10-i)
	}

	o := w.create(t, s, "Lviv Center plumber 900 The boiler drips")
	for range 5 {
		sent := w.tg.sentOffers()
		f := sent[len(sent)-1]
		_, _, err := s.Decline(w.ctx, f.ID, f.MasterID)
		require.NoError(t, err)
	}
	require.Equal(t, []int64{14, 10, 12, 15, 13, 11}, w.tg.sentTo(),
		"5.0, 4.5, the 4.0 bucket by idleness (unrated with two 5s, rated 4.0, unrated with stale 5s), 3.5")
	require.Equal(t, dispatch.Searching, w.order(t, o.ID).State)
}

// A rating is the customer's once, of a finished order's master; admins see
// it in the live log and /orders.
func TestRateFinishedOrderOnce(t *testing.T) {
	t.Parallel()
	w, s := setup(t, dispatch.Config{OfferSLA: time.Minute, CommissionRate: 10})
	w.master(t, s, 10, "Odesa Port electrician")
	o := w.create(t, s, "Odesa Port electrician 2000 No light in the hall")
	w.exec(t, `UPDATE orders SET customer_id = $2 WHERE id = $1`, o.ID, rater)
	_, err := s.Rate(w.ctx, o.ID, rater, 5, "")
	require.ErrorIs(t, err, dispatch.ErrOrderState, "not done yet")
	f := w.tg.sentOffers()[0]
	_, _, err = s.Accept(w.ctx, f.ID, 10)
	require.NoError(t, err)
	_, _, err = s.Complete(w.ctx, o.ID)
	require.NoError(t, err)

	var ie *domain.InputError
	require.ErrorAs(t, func() error { _, err := s.Rate(w.ctx, o.ID, rater, 6, ""); return err }(), &ie)
	require.Equal(t, "rating.error_stars", ie.Key)
	_, err = s.Rate(w.ctx, o.ID, rater+1, 5, "")
	require.ErrorIs(t, err, dispatch.ErrNotCustomer, "nobody but the customer rates")

	r, err := s.Rate(w.ctx, o.ID, rater, 4, "  Quick and clean.  ")
	require.NoError(t, err)
	require.Equal(t, dispatch.Rating{OrderID: o.ID, MasterID: 10, Stars: 4, Comment: "Quick and clean.", At: r.At}, r)
	again, err := s.Rate(w.ctx, o.ID, rater, 1, "")
	require.ErrorIs(t, err, dispatch.ErrRated)
	require.Equal(t, r, again, "the standing rating, unchanged")
	_, err = s.Rate(w.ctx, 1<<40, rater, 5, "")
	require.ErrorIs(t, err, domain.ErrNotFound)

	require.Equal(t, "order_rated:10", w.tg.log(o.ID)[len(w.tg.log(o.ID))-1], "one line in the live log")
	require.Equal(t, 1, count(w.tg.log(o.ID), "order_rated:10"))
	list, err := s.Orders(w.ctx)
	require.NoError(t, err)
	require.Len(t, list.Lines, 1)
	require.Equal(t, &r, list.Lines[0].Rating, "/orders shows it")

	roster, total, err := s.Roster(w.ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 1, total)
	require.Equal(t, dispatch.Record{Average: 4, Count: 1}, roster[0].Record)
}

// commentNotes are the customer's done-note edits that show a comment.
func (r *recorder) commentNotes() []dispatch.CustomerUpdate {
	var out []dispatch.CustomerUpdate
	for _, u := range r.customerNotes() {
		if u.Note == dispatch.CustomerCommented {
			out = append(out, u)
		}
	}
	return out
}

// After Done the customer's reply to the bot's message about the order is
// the comment on their rating: refused before the stars, then saved once
// (the same reply handled twice writes it once and is answered alike), a
// second one refused, one too long refused; the master's reply after Done
// is still refused as a relay. The admins see it in the live log and
// /orders, the customer in the done note.
func TestCustomerCommentsOnTheRatingOnce(t *testing.T) {
	t.Parallel()
	w, s := setup(t, dispatch.Config{OfferSLA: time.Hour, CommissionRate: 10})
	w.master(t, s, 10, "Odesa Port electrician")
	for id, name := range map[int64]string{500: "Cora", 501: "Eve"} {
		_, err := w.store.Users().Upsert(w.ctx, domain.User{ID: id, FirstName: name})
		require.NoError(t, err)
	}
	o := w.create(t, s, "Odesa Port electrician 2000 No light in the hall")
	_, err := s.JoinOrder(w.ctx, 500, w.order(t, o.ID).CustomerToken, joinMessage())
	require.NoError(t, err)
	f := w.tg.sentOffers()[0]
	_, _, err = s.Accept(w.ctx, f.ID, 10)
	require.NoError(t, err)
	// Cora's done note (chat 500, message 70) and Ann's order message.
	w.exec(t, `INSERT INTO order_messages (chat_id, message_id, order_id) VALUES (500, 70, $1)`, o.ID)
	w.exec(t, `UPDATE offers SET chat_id = 10, message_id = 80 WHERE id = $1`, f.ID)
	_, err = s.Finish(w.ctx, f.ID, 10)
	require.NoError(t, err)
	comment := func() *string {
		var c *string
		require.NoError(t, w.store.Pool().QueryRow(w.ctx, `SELECT comment FROM order_ratings WHERE order_id = $1`, o.ID).Scan(&c))
		return c
	}

	_, outcome, err := s.Relay(w.ctx, 500, 500, 70, 100, "Great work")
	require.ErrorIs(t, err, dispatch.ErrNotRated, "the stars first")
	require.Equal(t, dispatch.RelayCommented, outcome)
	_, err = s.Rate(w.ctx, o.ID, 500, 4, "")
	require.NoError(t, err)
	require.Nil(t, comment())

	_, _, err = s.Relay(w.ctx, 10, 10, 80, 5, "Bye")
	require.ErrorIs(t, err, dispatch.ErrRelayClosed, "the master's reply after Done is no comment")
	_, _, err = s.Relay(w.ctx, 501, 500, 70, 101, "Eve's opinion")
	require.ErrorIs(t, err, dispatch.ErrNotCustomer)
	var ie *domain.InputError
	_, _, err = s.Relay(w.ctx, 500, 500, 70, 102, strings.Repeat("ж", dispatch.MaxRatingComment+1))
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "rating.error_comment_long", ie.Key)
	require.Nil(t, comment())

	for range 2 { // the update run twice
		_, outcome, err = s.Relay(w.ctx, 500, 500, 70, 103, "  <b>Quick</b> & clean  ")
		require.NoError(t, err)
		require.Equal(t, dispatch.RelayCommented, outcome)
	}
	require.Equal(t, "<b>Quick</b> & clean", *comment(), "spaces around it dropped, the text as written")
	_, _, err = s.Relay(w.ctx, 500, 500, 70, 104, "Actually, five stars")
	require.ErrorIs(t, err, dispatch.ErrCommented)
	require.Equal(t, "<b>Quick</b> & clean", *comment())
	require.Empty(t, w.tg.relayed(), "nothing went to the master")

	require.Equal(t, 1, count(w.tg.log(o.ID), "rating_commented:10"), "one line in the live log")
	notes := w.tg.commentNotes()
	require.Len(t, notes, 1, "the done note edited once")
	require.Equal(t, "<b>Quick</b> & clean", notes[0].Comment)
	require.Equal(t, 4, notes[0].Rating)
	require.Equal(t, "M10", notes[0].MasterName)
	list, err := s.Orders(w.ctx)
	require.NoError(t, err)
	require.Len(t, list.Lines, 1)
	require.Equal(t, "<b>Quick</b> & clean", list.Lines[0].Rating.Comment, "/orders shows it")
}
