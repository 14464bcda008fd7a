package storage_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/dispatch"
)

// rater is the customer of the orders done makes.
const rater int64 = 900

// done creates an order done by masterID (registered in a city of their
// own if new) for rater and returns it.
func (f *dfx) done(masterID int64) dispatch.Order {
	f.t.Helper()
	o := f.assigned(masterID, 1000)
	f.exec(`UPDATE orders SET customer_id = $2 WHERE id = $1`, o.ID, rater)
	o, ok, err := f.st.Orders().Complete(f.ctx, o.ID, 0, 10, time.Hour, nil)
	require.NoError(f.t, err)
	require.True(f.t, ok)
	return o
}

// rate rates an order as rater and requires that it was recorded.
func (f *dfx) rate(orderID int64, stars int) dispatch.Rating {
	f.t.Helper()
	r, ok, err := f.st.Orders().Rate(f.ctx, orderID, rater, stars, "", nil)
	require.NoError(f.t, err)
	require.True(f.t, ok)
	return r
}

// A finished order is rated once, by its customer, of its master; an open
// one, a second rating, another user's rating or an unknown order records
// nothing and says why.
func TestRateOrderOnce(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	o := f.assigned(10, 1000)
	f.exec(`UPDATE orders SET customer_id = $2 WHERE id = $1`, o.ID, rater)
	r, ok, err := f.st.Orders().Rate(f.ctx, o.ID, rater, 5, "great", nil)
	require.NoError(t, err)
	require.False(t, ok, "an assigned order is not rated")
	require.Zero(t, r, "and it has no rating")

	o, ok, err = f.st.Orders().Complete(f.ctx, o.ID, 0, 10, time.Hour, nil)
	require.NoError(t, err)
	require.True(t, ok)
	var seen dispatch.Changed
	before := f.dbNow()
	_, ok, err = f.st.Orders().Rate(f.ctx, o.ID, rater+1, 5, "not mine", nil)
	require.ErrorIs(t, err, dispatch.ErrNotCustomer)
	require.False(t, ok, "nobody but the customer rates")
	r, ok, err = f.st.Orders().Rate(f.ctx, o.ID, rater, 4, "on time, tidy", recordChange(&seen))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, dispatch.Rating{OrderID: o.ID, MasterID: 10, Stars: 4, Comment: "on time, tidy", At: r.At}, r)
	require.False(t, r.At.Before(before))
	require.Equal(t, o.ID, seen.Order.ID, "the change names the order")
	require.Equal(t, &r, seen.Rating)
	require.Contains(t, seen.Masters, int64(10), "and its master, read in the transaction")

	again, ok, err := f.st.Orders().Rate(f.ctx, o.ID, rater, 1, "changed my mind", nil)
	require.NoError(t, err)
	require.False(t, ok, "a second rating records nothing")
	require.Equal(t, r, again, "and returns the one standing")

	_, _, err = f.st.Orders().Rate(f.ctx, 1<<40, rater, 5, "", nil)
	require.ErrorIs(t, err, domain.ErrNotFound)

	// A closed order is rated too; no comment is stored as none.
	c := f.done(11)
	f.exec(`UPDATE orders SET state = 'CLOSED', closed_at = now() WHERE id = $1`, c.ID)
	rc := f.rate(c.ID, 2)
	require.Equal(t, "", rc.Comment)
	require.Equal(t, 1, f.count(`SELECT count(*) FROM order_ratings WHERE order_id = $1 AND comment IS NULL`, c.ID))

	got, err := f.st.Orders().Ratings(f.ctx, []int64{o.ID, c.ID, 1 << 40})
	require.NoError(t, err)
	require.Equal(t, map[int64]dispatch.Rating{o.ID: r, c.ID: rc}, got)

	// The table holds the limits whoever writes to it.
	d := f.done(12)
	for _, bad := range []string{
		`INSERT INTO order_ratings (order_id, master_id, stars) VALUES ($1, 12, 0)`,
		`INSERT INTO order_ratings (order_id, master_id, stars) VALUES ($1, 12, 6)`,
		`INSERT INTO order_ratings (order_id, master_id, stars, comment) VALUES ($1, 12, 5, repeat('я', 1001))`,
	} {
		_, err := f.st.Pool().Exec(f.ctx, bad, d.ID)
		require.Error(t, err, bad)
	}
	f.exec(`INSERT INTO order_ratings (order_id, master_id, stars, comment) VALUES ($1, 12, 5, repeat('я', 1000))`, d.ID)
}

// Replicas handling the same press at once record one rating: the one
// whose statement reported it.
func TestRateRacingRecordsOneRating(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	o := f.done(10)
	type result struct {
		r   dispatch.Rating
		ok  bool
		err error
	}
	results := make([]result, dispatch.MaxStars)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, ok, err := f.st.Orders().Rate(f.ctx, o.ID, rater, i+1, "", nil)
			results[i] = result{r, ok, err}
		}()
	}
	wg.Wait()
	var won []dispatch.Rating
	for _, res := range results {
		require.NoError(t, res.err)
		require.NotZero(t, res.r.OrderID, "recorded, or the one recorded returned")
		if res.ok {
			won = append(won, res.r)
		}
	}
	require.Len(t, won, 1)
	got, err := f.st.Orders().Ratings(f.ctx, []int64{o.ID})
	require.NoError(t, err)
	require.Equal(t, won[0], got[o.ID])
}

// A master's record is of the last RatingWindow; /masters lists every
// master by place with theirs.
func TestMasterRatingRecordAndRoster(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	for _, stars := range []int{5, 4, 4, 1} {
		f.rate(f.done(10).ID, stars)
	}
	old := f.done(10)
	f.rate(old.ID, 1)
	f.exec(`UPDATE order_ratings SET rated_at = now() - $2 * interval '1 microsecond' - interval '1 minute' WHERE order_id = $1`,
		old.ID, dispatch.RatingWindow.Microseconds())
	f.rate(f.done(11).ID, 5)
	f.master(12, "Alpha", "b", "x")

	rec, err := f.st.Masters().Record(f.ctx, 10)
	require.NoError(t, err)
	require.Equal(t, dispatch.Record{Average: 3.5, Count: 4}, rec, "the rating older than the window does not count")
	require.True(t, rec.Counts())
	require.Equal(t, 3.5, rec.Rank())
	rec, err = f.st.Masters().Record(f.ctx, 11)
	require.NoError(t, err)
	require.Equal(t, dispatch.Record{Average: 5, Count: 1}, rec)
	require.False(t, rec.Counts())
	require.Equal(t, dispatch.UnratedRank, rec.Rank())
	rec, err = f.st.Masters().Record(f.ctx, 99)
	require.NoError(t, err)
	require.Zero(t, rec, "no master, no ratings")

	page, total, err := f.st.Masters().Roster(f.ctx, 0, 2)
	require.NoError(t, err)
	require.Equal(t, 3, total)
	require.Len(t, page, 2)
	require.Equal(t, int64(12), page[0].Master.UserID, "by city: Alpha first")
	require.Zero(t, page[0].Record)
	require.Equal(t, int64(10), page[1].Master.UserID)
	require.Equal(t, dispatch.Record{Average: 3.5, Count: 4}, page[1].Record)
	page, total, err = f.st.Masters().Roster(f.ctx, 2, 2)
	require.NoError(t, err)
	require.Equal(t, 3, total)
	require.Len(t, page, 1)
	require.Equal(t, int64(11), page[0].Master.UserID)
	require.Equal(t, "User11", page[0].Master.Username, "with the user's names")
	require.Equal(t, dispatch.Record{Average: 5, Count: 1}, page[0].Record)
}

// pick's SQL ranks as dispatch.RankOf does, for every multiset of up to
// six ratings: the same buckets, the same ties, the same floor.
func TestRatingRankInSQLIsRankOf(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	var sets [][]int
	var grow func(set []int, from int)
	grow = func(set []int, from int) {
		sets = append(sets, set)
		if len(set) == 6 {
			return
		}
		for s := from; s <= dispatch.MaxStars; s++ {
			grow(append(append([]int(nil), set...), s), s)
		}
	}
	grow(nil, dispatch.MinStars)
	require.Len(t, sets, 462)
	for _, set := range sets {
		sum := 0
		for _, s := range set {
			sum += s
		}
		avg := 0.0
		if len(set) > 0 {
			avg = float64(sum) / float64(len(set))
		}
		got, err := f.st.RatingRank(f.ctx, set)
		require.NoError(t, err)
		require.Equal(t, dispatch.RankOf(avg, len(set)), got, "stars %v", set)
	}
}
