package bot_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/domain/dispatch"
	"switchboard/storage/storagetest"
)

// revokedBeforeRating is the dispatch workflow with an admin's Reissue
// landing between the bot's look at who the order's customer is and the
// rating itself: the press races the revocation of its presser's link.
type revokedBeforeRating struct {
	*dispatch.Service
}

func (d revokedBeforeRating) Rate(ctx context.Context, orderID, customerID int64, stars int, comment string) (dispatch.Rating, error) {
	if _, err := d.ReissueLink(ctx, orderID, "admin-press"); err != nil {
		return dispatch.Rating{}, err
	}
	return d.Service.Rate(ctx, orderID, customerID, stars, comment)
}

// A customer whose link an admin reissued is the order's customer no more:
// their stars, pressed as the reissue commits, rate nothing (they would
// count in the master's rank and take the rating from the order's real
// customer), and they are told the button is not theirs.
func TestRatingByACustomerWhoseLinkWasJustReissuedIsRefused(t *testing.T) {
	t.Parallel()
	st := storagetest.New(t)
	rc := bot.RenderConfig{AdminChatID: adminChat, AdminLang: "en"}
	svc, err := dispatch.NewService(dispatch.Config{OfferSLA: 10 * time.Minute}, dispatch.Deps{
		Orders: st.Orders(), Masters: st.Masters(), Notifier: testRenderer(rc).DispatchNotes(), Log: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	env := setupDeps(t, bot.Config{RateLimit: 1000, RateBurst: 1000, RenderConfig: rc},
		st, bot.Deps{Dispatch: revokedBeforeRating{svc}}, nil)
	env.srv.Supergroup(adminChat, "Dispatch log", "")
	carol := env.srv.User(44, "Carol", "en")
	help := env.ask(t, carol, "/help")
	exec(t, st, `INSERT INTO users (id, first_name) VALUES (42, 'Ann')`)
	exec(t, st, `INSERT INTO masters (user_id, city, district, skills) VALUES (42, 'Kyiv', 'Podil', '{plumbing}')`)
	exec(t, st, `INSERT INTO orders (created_by, city, district, skill, price, description, state, master_id, assigned_at, done_at,
    customer_token, customer_id, customer_joined_at)
VALUES (1, 'Kyiv', 'Podil', 'plumbing', 100, 'x', 'DONE', 42, now(), now(), 'tokentokentokentokentok', 44, now())`)
	order := queryOne[int64](t, st, `SELECT id FROM orders`)

	a := pressRaw(t, env.srv, carol, help, data(t, "kr", order, 5))
	requireAlert(t, a, "This button is not for you.")
	require.Zero(t, queryOne[int64](t, st, `SELECT count(*) FROM order_ratings`), "nothing rated")
}
