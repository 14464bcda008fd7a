package storage_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/dispatch"
	"switchboard/internal/testkit"
	"switchboard/storage"
	"switchboard/storage/storagetest"
)

const sla = 2 * time.Minute

// dfx is a dispatch fixture over one test database.
type dfx struct{ *testBundle }

func newDispatch(t *testing.T) *dfx { return &dfx{setup(t)} }

// user creates a Telegram user.
func (f *dfx) user(id int64) {
	f.t.Helper()
	_, err := f.st.Users().Upsert(f.ctx, domain.User{ID: id, Username: fmt.Sprintf("User%d", id), FirstName: fmt.Sprintf("Name%d", id)})
	require.NoError(f.t, err)
}

// master registers a new master.
func (f *dfx) master(id int64, city, district string, skills ...string) dispatch.Master {
	f.t.Helper()
	f.user(id)
	m, created, err := f.st.Masters().Save(f.ctx, id, city, district, skills)
	require.NoError(f.t, err)
	require.True(f.t, created)
	return m
}

// masters registers masters in city c, district d, with skill x: where
// f.order("c", "d", "x") is placed.
func (f *dfx) masters(ids ...int64) {
	f.t.Helper()
	for _, id := range ids {
		f.master(id, "c", "d", "x")
	}
}

// dispatchOrder is newDispatch with the masters ids (as masters makes
// them) and one order placed where they work: where the tests of one
// order's offers start.
func dispatchOrder(t *testing.T, ids ...int64) (*dfx, dispatch.Order) {
	t.Helper()
	f := newDispatch(t)
	f.masters(ids...)
	return f, f.order("c", "d", "x")
}

func (f *dfx) orderPriced(city, district, skill string, price int64) dispatch.Order {
	f.t.Helper()
	o, err := f.st.Orders().Create(f.ctx, dispatch.NewOrder{CreatedBy: 1, City: city, District: district, Skill: skill,
		Price: price, Description: "fix it"}, nil)
	require.NoError(f.t, err)
	return o
}

func (f *dfx) order(city, district, skill string) dispatch.Order {
	f.t.Helper()
	return f.orderPriced(city, district, skill, 1000)
}

// recordChange is a tell that keeps the change in seen and renders
// nothing.
func recordChange(seen *dispatch.Changed) domain.Render[dispatch.Changed] {
	return func(c dispatch.Changed) []domain.Message {
		*seen = c
		return nil
	}
}

func (f *dfx) next(orderID int64) (dispatch.Offer, dispatch.Order, dispatch.Outcome) {
	f.t.Helper()
	of, o, out, err := f.st.Orders().NextOffer(f.ctx, orderID, sla, dispatch.Gate{}, nil)
	require.NoError(f.t, err)
	return of, o, out
}

// offered runs NextOffer and requires an offer to master.
func (f *dfx) offered(orderID, master int64, round int) dispatch.Offer {
	f.t.Helper()
	of, o, out, err := f.st.Orders().NextOffer(f.ctx, orderID, sla, dispatch.Gate{}, nil)
	require.NoError(f.t, err)
	require.Equal(f.t, dispatch.Offered, out)
	require.Equal(f.t, master, of.MasterID, "offered to")
	require.Equal(f.t, orderID, of.OrderID)
	require.Equal(f.t, round, of.Round)
	require.Equal(f.t, round, o.Round)
	require.Equal(f.t, dispatch.Sent, of.State)
	require.Equal(f.t, sla, of.ExpiresAt.Sub(of.SentAt))
	require.True(f.t, o.Unassignable.IsZero(), "an offer clears the unassignable mark")
	return of
}

func (f *dfx) decline(of dispatch.Offer) {
	f.t.Helper()
	got, ok, err := f.st.Orders().DeclineOffer(f.ctx, of.ID, of.MasterID, nil)
	require.NoError(f.t, err)
	require.True(f.t, ok)
	require.Equal(f.t, dispatch.Declined, got.State)
}

// expire lets one open offer run out and sweeps it.
func (f *dfx) expire(of dispatch.Offer) {
	f.t.Helper()
	f.exec(`UPDATE offers SET expires_at = now() - interval '1 second' WHERE id = $1`, of.ID)
	got, err := f.st.Orders().ExpireOffers(f.ctx, "", nil)
	require.NoError(f.t, err)
	require.Equal(f.t, []int64{of.ID}, offerIDs(got))
}

// assigned creates an order in its own city with a master of its own and
// has the master accept it.
func (f *dfx) assigned(masterID, price int64) dispatch.Order {
	f.t.Helper()
	city := fmt.Sprintf("city%d", masterID)
	if _, err := f.st.Masters().Get(f.ctx, masterID); err != nil {
		f.master(masterID, city, "d", "x")
	}
	o := f.orderPriced(city, "d", "x", price)
	of := f.offered(o.ID, masterID, 1)
	_, o, ok, err := f.st.Orders().AcceptOffer(f.ctx, of.ID, masterID, nil)
	require.NoError(f.t, err)
	require.True(f.t, ok)
	return o
}

// rows returns each row of a table as text, by id, to compare whole rows.
func (f *dfx) rows(table, key string) map[int64]string {
	f.t.Helper()
	rows, err := f.st.Pool().Query(f.ctx, fmt.Sprintf(`SELECT %s, t::text FROM %s t`, key, table))
	require.NoError(f.t, err)
	out := map[int64]string{}
	var id int64
	var text string
	_, err = pgx.ForEachRow(rows, []any{&id, &text}, func() error {
		out[id] = text
		return nil
	})
	require.NoError(f.t, err)
	return out
}

func (f *dfx) dbNow() time.Time {
	f.t.Helper()
	var now time.Time
	require.NoError(f.t, f.st.Pool().QueryRow(f.ctx, `SELECT now()`).Scan(&now))
	return now
}

func offerIDs(offers []dispatch.Offer) []int64 {
	ids := testkit.Map(offers, func(o dispatch.Offer) int64 { return o.ID })
	slices.Sort(ids)
	return ids
}

// seedDueOffers inserts n open offers due a minute ago, each with its own
// user, master and order (ids from base).
func seedDueOffers(tb testing.TB, st *storage.Store, base int64, n int) {
	tb.Helper()
	ctx := context.Background()
	_, err := st.Pool().Exec(ctx, `
WITH u AS (
    INSERT INTO users (id) SELECT g FROM generate_series($1::bigint + 1, $1::bigint + $2) g RETURNING id
), m AS (
    INSERT INTO masters (user_id, city, district, skills) SELECT id, 'seed', 'seed', '{seed}' FROM u RETURNING user_id
), o AS (
    INSERT INTO orders (created_by, city, district, skill, price, description)
    SELECT 1, 'seed', 'seed', 'seed', 100, '' FROM generate_series(1, $2) RETURNING id
)
INSERT INTO offers (order_id, master_id, round, sent_at, expires_at)
SELECT o.id, m.user_id, 1, now() - interval '3 minutes', now() - interval '1 minute'
FROM (SELECT id, row_number() OVER (ORDER BY id) n FROM o) o
JOIN (SELECT user_id, row_number() OVER (ORDER BY user_id) n FROM m) m USING (n)`, base, n)
	require.NoError(tb, err)
}

// One watchdog sweep of 100 000 due offers (the bench scenario's size):
// go test -run '^$' -bench ExpireOffers ./storage/
func BenchmarkExpireOffers100k(b *testing.B) {
	st := storagetest.New(b)
	ctx := context.Background()
	const n = 100_000
	base := int64(1_000_000)
	for b.Loop() {
		b.StopTimer()
		seedDueOffers(b, st, base, n)
		base += n
		_, err := st.Pool().Exec(ctx, `ANALYZE offers`)
		require.NoError(b, err)
		b.StartTimer()
		got, err := st.Orders().ExpireOffers(ctx, "", nil)
		require.NoError(b, err)
		require.Len(b, got, n)
	}
}

// A change's messages commit with it, rendered from what it changed and
// the masters it names; a refused change writes none.
func TestDispatchMessagesCommitWithTheirChange(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	ctx := f.ctx
	f.masters(1)
	var seen []dispatch.Changed
	tell := func(c dispatch.Changed) []domain.Message {
		seen = append(seen, c)
		var out []domain.Message
		for _, of := range c.Offers {
			out = append(out, domain.Message{ChatID: of.MasterID, Kind: domain.KindNote, Ref: of.ID,
				Text: string(of.State) + " " + c.Masters[of.MasterID].Name})
		}
		if len(c.Offers) == 0 {
			out = append(out, domain.Message{ChatID: -5, Kind: domain.KindLiveLog, Ref: c.Order.ID, Text: "order"})
		}
		return out
	}
	outbox := func() []string {
		rows, err := f.st.Pool().Query(ctx, `SELECT body->>'text' FROM outbox ORDER BY id`)
		require.NoError(t, err)
		texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return texts
	}

	o, err := f.st.Orders().Create(ctx, dispatch.NewOrder{CreatedBy: 1, City: "c", District: "d", Skill: "x", Price: 5, Description: "y"}, tell)
	require.NoError(t, err)
	of, _, out, err := f.st.Orders().NextOffer(ctx, o.ID, sla, dispatch.Gate{}, tell)
	require.NoError(t, err)
	require.Equal(t, dispatch.Offered, out)
	require.Equal(t, []string{"order", "SENT Name1"}, outbox())

	_, ok, err := f.st.Orders().DeclineOffer(ctx, of.ID, 2, tell) // not the offer's master
	require.NoError(t, err)
	require.False(t, ok)
	require.Len(t, outbox(), 2, "a refused change writes nothing")
	require.Len(t, seen, 2, "nor renders anything")

	_, _, ok, err = f.st.Orders().AcceptOffer(ctx, of.ID, 1, tell)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []string{"order", "SENT Name1", "ACCEPTED Name1"}, outbox())

	// A message the outbox refuses rolls the change back.
	_, _, err = f.st.Orders().Complete(ctx, o.ID, 0, 10, time.Hour, func(dispatch.Changed) []domain.Message {
		return []domain.Message{{ChatID: 1, Kind: domain.KindNote, Edit: true}} // an edit with no key
	})
	require.Error(t, err)
	got, err := f.st.Orders().Get(ctx, o.ID)
	require.NoError(t, err)
	require.Equal(t, dispatch.Assigned, got.State, "still ASSIGNED: the change rolled back with its message")
}

// An expiry and a distribution step commit asynchronously; what makes that
// safe is that their messages go out only after a sender claimed them, in
// a transaction that commits synchronously after theirs: so when
// Claim hands out a dispatch row, the WAL is on disk past the commit
// of the change that wrote it, and a database crash cannot lose a change
// whose message Telegram already has. If the claim ever commits
// asynchronously, this fails, and the README's Dispatch section must
// change with it.
func TestDispatchAsyncChangeIsDurableOnceItsMessageIsClaimed(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	f.master(10, "Lviv", "Center", "plumbing")
	tell := func(c dispatch.Changed) []domain.Message {
		var out []domain.Message
		for _, of := range c.Offers {
			key := fmt.Sprint("offer:", of.ID)
			if of.State == dispatch.Sent {
				out = append(out, domain.Message{ChatID: of.MasterID, Kind: domain.KindOffer, Ref: of.ID, Key: key, Text: "offer"})
			} else {
				out = append(out, domain.Message{ChatID: of.MasterID, Kind: domain.KindOfferClose, Ref: of.ID, Key: key,
					Edit: true, Text: string(of.State)})
			}
		}
		return out
	}
	// written is a WAL position at or past the commit of the change just
	// made (the server's insert position, read after it returned).
	written := func() string {
		var lsn string
		require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn))
		return lsn
	}
	// claim takes the chat's one claimable row, checks that the WAL is
	// flushed past the change behind it, and marks the row delivered.
	claim := func(offerID int64, kind, change string) {
		t.Helper()
		rows, err := f.st.Outbox().Claim(f.ctx, "", 10, time.Minute)
		require.NoError(t, err)
		require.Len(t, rows, 1)
		require.Equal(t, kind, rows[0].Kind)
		var onDisk bool
		require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn`, change).Scan(&onDisk))
		require.True(t, onDisk, "offer %d: its %s row was claimed before the change that wrote it was flushed", offerID, kind)
		ok, err := f.st.Outbox().Delivered(f.ctx, rows[0], 100+int(offerID))
		require.NoError(t, err)
		require.True(t, ok)
	}
	for range 10 {
		o := f.order("Lviv", "Center", "plumbing")
		of, _, out, err := f.st.Orders().NextOffer(f.ctx, o.ID, sla, dispatch.Gate{}, tell)
		require.NoError(t, err)
		require.Equal(t, dispatch.Offered, out)
		claim(of.ID, domain.KindOffer, written())
		f.exec(`UPDATE offers SET expires_at = now() - interval '1 second' WHERE id = $1`, of.ID)
		expired, err := f.st.Orders().ExpireOffers(f.ctx, "", tell)
		require.NoError(t, err)
		require.Equal(t, []int64{of.ID}, offerIDs(expired))
		claim(of.ID, domain.KindOfferClose, written())
	}
}
