package e2e_test

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/e2e"
	"switchboard/e2e/tgfake"
)

// linkRx reads an order's customer link out of an admin's message.
var linkRx = regexp.MustCompile(`https://t\.me/\w+\?start=(o_[A-Za-z0-9_-]{22})`)

// orderLinkOf is the start parameter of the link in text.
func orderLinkOf(t *testing.T, text string) string {
	t.Helper()
	m := linkRx.FindStringSubmatch(text)
	require.NotNil(t, m, "no customer link in %q", text)
	return m[1]
}

// customerStatus is the customer's status message of order (the one with
// its head line), as it is now.
func customerStatus(env *e2e.Env, chatID, order int64) (tgfake.BotMessage, bool) {
	head := fmt.Sprintf("Order #%d", order)
	for _, m := range env.TG.Messages(chatID) {
		if strings.HasPrefix(m.Text, "📋 "+head) {
			return m, true
		}
	}
	return tgfake.BotMessage{}, false
}

// waitStatus waits until the customer's status message reads want.
func waitStatus(t *testing.T, env *e2e.Env, chatID, order int64, want string) tgfake.BotMessage {
	t.Helper()
	var got tgfake.BotMessage
	env.TG.WaitFor(t, 20*time.Second, func() bool {
		m, ok := customerStatus(env, chatID, order)
		got = m
		return ok && strings.Contains(m.Text, want)
	})
	return got
}

// The customer of issue 41 end to end: the admin's /order gives a link;
// Cora opens it and follows the order in her chat — one status message
// edited at every step, a note where a step needs her — while Eve, opening
// it second, is refused. Ann accepts, sets off saying 30 minutes (Cora
// sees when), arrives, finishes and sends the work's photo, which Cora
// gets too; Cora rates the work and replies to the done note with a
// comment. Cora could cancel until Ann set off, not after. Neither ever
// sees the other's Telegram identity. The admin reissues the link: Cora's
// chat says it no longer follows the order, the old link opens nothing,
// the new one opens for Dan.
func TestDispatchCustomerFollowsTheOrder(t *testing.T) {
	t.Parallel()
	env, pool, boss := startDispatch(t, nil)
	ann := env.TG.User(761, "Ann", "en")
	ann.SetUsername("ann_fixes")
	cora := env.TG.User(762, "Cora", "en")
	cora.SetUsername("cora_at_home")
	eve := env.TG.User(763, "Eve", "en")
	dan := env.TG.User(764, "Dan", "en")
	register(t, env, ann, "Odesa Center plumbing")

	confirm := ask(t, env, boss, boss.ID(), "/order "+orderWithCustomer("Odesa Center", 1200))
	order := int64(scalar[int](t, pool, `SELECT max(id) FROM orders`))
	link := orderLinkOf(t, confirm.Text)
	require.Contains(t, confirm.Text, "Forward it to them")
	require.Equal(t, []string{"🔁 Reissue the link"}, confirm.ReplyMarkup.Labels())
	require.Contains(t, ask(t, env, boss, boss.ID(), "/orders").Text, "customer's link (not opened yet): https://t.me/")

	cora.SendText(cora.ID(), "/start "+link)
	status := waitStatus(t, env, cora.ID(), order, "We are finding a master for you.")
	require.Contains(t, status.Text, "plumbing · Odesa, Center")
	require.Contains(t, status.Text, "6 May 2099, 09:00–11:00")
	require.Contains(t, status.Text, "You can cancel it here until the master is on the way.")
	require.Equal(t, []string{"✖️ Cancel the order"}, status.ReplyMarkup.Labels())
	require.Contains(t, ask(t, env, eve, eve.ID(), "/start "+link).Text, "already followed by someone else")
	require.Equal(t, int64(cora.ID()), scalar[int64](t, pool, `SELECT customer_id FROM orders WHERE id = $1`, order))
	env.TG.WaitFor(t, 20*time.Second, func() bool { return logHas(env, "the customer opened its link") })

	// Cancel asks first; Keep it puts the status back.
	cora.PressAndWait(t, status, "✖️ Cancel the order")
	status = waitEdited(t, env, status, func(m tgfake.BotMessage) bool { return len(m.ReplyMarkup.Labels()) == 2 })
	require.Equal(t, []string{"Yes, cancel it", "Keep it"}, status.ReplyMarkup.Labels())
	cancelData := status.ReplyMarkup.Buttons()[0].CallbackData
	cora.PressAndWait(t, status, "Keep it")
	status = waitEdited(t, env, status, func(m tgfake.BotMessage) bool { return len(m.ReplyMarkup.Labels()) == 1 })
	// Eve forges Cora's button in her own chat: refused.
	eveLast, _ := env.TG.LastMessage(eve.ID())
	forged := eve.PressRaw(eveLast, cancelData)
	require.Equal(t, "This button is not for you.", env.TG.WaitCallbackAnswer(t, forged.ID).Text)

	// Ann accepts: Cora hears who comes, by first name only.
	offer := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "New order #") })
	ann.PressAndWait(t, offer, "✅ Accept")
	waitStatus(t, env, cora.ID(), order, "👷 Your master: Ann.")
	env.TG.WaitMessage(t, cora.ID(), func(m tgfake.BotMessage) bool {
		return m.Text == fmt.Sprintf("👷 Ann will do your order #%d.", order)
	})

	// A question either way, through the bot: a reply to its message.
	status = waitStatus(t, env, cora.ID(), order, "✉️ Reply to this message to write to Ann.")
	cora.Reply(status, "Can you come at 10:30? The <gate> code is 12#")
	require.Equal(t, "✉️ Sent.", env.TG.WaitMessage(t, cora.ID(), func(m tgfake.BotMessage) bool { return m.Text == "✉️ Sent." }).Text)
	question := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, "✉️ The customer") })
	require.Equal(t, fmt.Sprintf("✉️ The customer, Cora (order #%d):\nCan you come at 10:30? The <gate> code is 12#\n\nReply to this message to answer.", order), question.Text)
	ann.Reply(question, "Yes, 10:30 works")
	answer := env.TG.WaitMessage(t, cora.ID(), func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, "✉️ Ann, your master") })
	require.Contains(t, answer.Text, "Yes, 10:30 works")
	// A location before setting off reaches nobody, and Ann is told why.
	early := ann.SendLocation(ann.ID(), 46.4825, 30.7233)
	require.Contains(t, env.TG.WaitMessageAfter(t, ann.ID(), early.MessageID, nil).Text, "only while you are on the way")
	// On my way, 30 minutes: Cora sees when; her Cancel is gone, and an
	// old Cancel pressed now is refused.
	assigned := waitEdited(t, env, offer, func(m tgfake.BotMessage) bool { return hasLabel(m, "🚗 30 min") })
	require.Contains(t, assigned.ReplyMarkup.Labels(), "🚗 15 min")
	require.Contains(t, assigned.ReplyMarkup.Labels(), "🚗 1 h")
	require.Equal(t, "Noted: you are on your way.", ann.PressAndWait(t, assigned, "🚗 30 min").Text)
	status = waitStatus(t, env, cora.ID(), order, "🚗 Ann is on the way, arriving about ")
	require.Empty(t, status.ReplyMarkup.Labels(), "no cancelling once the master is on the way")
	eta := scalar[time.Time](t, pool, `SELECT eta_at FROM orders WHERE id = $1`, order)
	enRoute := scalar[time.Time](t, pool, `SELECT en_route_at FROM orders WHERE id = $1`, order)
	require.Equal(t, 30*time.Minute, eta.Sub(enRoute).Round(time.Second))
	note := env.TG.WaitMessage(t, cora.ID(), func(m tgfake.BotMessage) bool {
		return strings.HasPrefix(m.Text, "🚗 Ann is on the way: about 30 min, by ")
	})
	kyiv, err := time.LoadLocation("Europe/Kyiv")
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(note.Text, "by "+eta.In(kyiv).Format("15:04")+"."), "the ETA in Odesa's clock (she set no zone): %q", note.Text)
	late := cora.PressRaw(status, cancelData)
	require.Contains(t, env.TG.WaitCallbackAnswer(t, late.ID).Text, "master is already on the way")
	require.Equal(t, "ASSIGNED", scalar[string](t, pool, `SELECT state FROM orders WHERE id = $1`, order))

	// Ann shares her live location on the way: Cora watches it move,
	// until Ann arrives; a move after that reaches nobody.
	assigned = waitEdited(t, env, offer, func(m tgfake.BotMessage) bool { return hasLabel(m, "📍 Arrived") && !hasLabel(m, "🚗 30 min") })
	require.Contains(t, assigned.Text, "Share your live location in this chat")
	share := ann.ShareLiveLocation(ann.ID(), 46.4825, 30.7233, time.Hour)
	require.Equal(t, fmt.Sprintf("📍 Order #%d: the customer sees your live location until you press Arrived.", order),
		env.TG.WaitMessageAfter(t, ann.ID(), share.MessageID, nil).Text)
	env.TG.WaitMessage(t, cora.ID(), func(m tgfake.BotMessage) bool {
		return m.Text == "📍 Ann shares where they are: the map below moves with them until they arrive."
	})
	var live tgfake.BotMessage
	env.TG.WaitFor(t, 20*time.Second, func() bool {
		locs := env.TG.Locations(cora.ID())
		if len(locs) == 1 {
			live = locs[0]
		}
		return len(locs) == 1 && live.Live == tgfake.LiveActive
	})
	require.Equal(t, 46.4825, live.Location.Latitude)
	ann.MoveLiveLocation(share, 46.4840, 30.7301)
	ann.MoveLiveLocation(share, 46.4852, 30.7322)
	env.TG.WaitFor(t, 20*time.Second, func() bool {
		locs := env.TG.Locations(cora.ID())
		return len(locs) == 1 && locs[0].Location.Latitude == 46.4852 && locs[0].Location.Longitude == 30.7322
	})
	ann.PressAndWait(t, assigned, "📍 Arrived")
	waitStatus(t, env, cora.ID(), order, "📍 Ann has arrived.")
	env.TG.WaitFor(t, 20*time.Second, func() bool {
		locs := env.TG.Locations(cora.ID())
		return len(locs) == 1 && locs[0].Live == tgfake.LiveStopped
	})
	ann.MoveLiveLocation(share, 46.4860, 30.7330)

	finishOrder(t, env, ann, offer, "📍 Arrived", "✅ Done", "✅ Yes, it's done")
	waitStatus(t, env, cora.ID(), order, "✅ The work is done.")
	doneNote := env.TG.WaitMessage(t, cora.ID(), func(m tgfake.BotMessage) bool {
		return strings.HasPrefix(m.Text, fmt.Sprintf("✅ Order #%d is done. Thank you!", order))
	})
	require.Contains(t, doneNote.Text, "How did it go? Rate the work:")
	require.Equal(t, []string{"1 ★", "2 ★", "3 ★", "4 ★", "5 ★"}, doneNote.ReplyMarkup.Labels())
	fourStars := doneNote.ReplyMarkup.Buttons()[3].CallbackData
	// Nothing is relayed after Done: Cora's reply is a comment on her
	// rating now, which waits for the stars.
	thanks := cora.Reply(answer, "thanks!")
	require.Equal(t, "Rate the work with the stars first, then reply with a comment.",
		env.TG.WaitMessageAfter(t, cora.ID(), thanks.MessageID, nil).Text)
	// Eve cannot rate Cora's order; Cora rates it four stars, once.
	eveAgain, _ := env.TG.LastMessage(eve.ID())
	require.Equal(t, "This button is not for you.", env.TG.WaitCallbackAnswer(t, eve.PressRaw(eveAgain, fourStars).ID).Text)
	require.Equal(t, "Thank you for the rating!", cora.PressAndWait(t, doneNote, "4 ★").Text)
	waitStatus(t, env, cora.ID(), order, "Your rating: ★★★★☆")
	rated := waitEdited(t, env, doneNote, func(m tgfake.BotMessage) bool {
		return strings.Contains(m.Text, "Your rating: ★★★★☆.") && len(m.ReplyMarkup.Labels()) == 0
	})
	require.True(t, strings.HasSuffix(rated.Text, "\nReply to this message to add a comment (optional)."), rated.Text)
	again := cora.PressRaw(doneNote, doneNote.ReplyMarkup.Buttons()[4].CallbackData)
	require.Contains(t, env.TG.WaitCallbackAnswer(t, again.ID).Text, "rated this order already")
	require.Equal(t, 4, scalar[int](t, pool, `SELECT stars FROM order_ratings WHERE order_id = $1`, order))
	env.TG.WaitFor(t, 20*time.Second, func() bool { return logHas(env, "the customer rated Ann") })
	require.Contains(t, ask(t, env, boss, boss.ID(), "/orders").Text, "the customer's rating: ★★★★☆")

	// Her reply to the done note is the rating's comment, once: shown to
	// her in the note and to the admins, as she wrote it (escaped).
	const words = "<b>great</b> & fast"
	said := cora.Reply(doneNote, words)
	require.Equal(t, "Thank you, your comment is saved.", env.TG.WaitMessageAfter(t, cora.ID(), said.MessageID, nil).Text)
	commented := waitEdited(t, env, doneNote, func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "💬 Your comment: ") })
	require.Equal(t, fmt.Sprintf("✅ Order #%d is done. Thank you!\nYour rating: ★★★★☆.\n💬 Your comment: «%s»", order, words), commented.Text)
	for _, e := range commented.Entities {
		require.NotEqual(t, "bold", e.Type, "her words are text, not markup")
	}
	require.Equal(t, words, scalar[string](t, pool, `SELECT comment FROM order_ratings WHERE order_id = $1`, order))
	env.TG.WaitFor(t, 20*time.Second, func() bool {
		return logHas(env, fmt.Sprintf("💬 Order #%d: the customer's comment on Ann", order)) && logHas(env, "'s work: «"+words+"»")
	})
	require.Contains(t, ask(t, env, boss, boss.ID(), "/orders").Text, "↳ 💬 «"+words+"»")
	more := cora.Reply(answer, "one more thing")
	require.Equal(t, "You have already left a comment.", env.TG.WaitMessageAfter(t, cora.ID(), more.MessageID, nil).Text)
	require.Equal(t, words, scalar[string](t, pool, `SELECT comment FROM order_ratings WHERE order_id = $1`, order))
	// Ann's reply after Done goes nowhere either; the admins read the
	// thread.
	afterDone := ann.Reply(question, "see you next time")
	require.Contains(t, env.TG.WaitMessageAfter(t, ann.ID(), afterDone.MessageID, func(m tgfake.BotMessage) bool {
		return strings.Contains(m.Text, "no longer passes messages on")
	}).Text, "no longer passes messages on")
	thread := ask(t, env, boss, boss.ID(), fmt.Sprintf("/thread %d", order)).Text
	require.Contains(t, thread, "2 messages between the customer and the master")
	require.Contains(t, thread, "👤 customer: Can you come at 10:30? The <gate> code is 12#")
	require.Contains(t, thread, "🛠 master: Yes, 10:30 works")
	// The work's photo reaches Cora as it reaches the admins.
	ann.SendPhoto(ann.ID(), "new valve fitted")
	photo := env.TG.WaitMessage(t, cora.ID(), func(m tgfake.BotMessage) bool { return m.Photo != nil })
	require.Equal(t, fmt.Sprintf("📷 The finished work, order #%d", order), photo.Caption, "the master's own words stay the admins'")

	// The move after Arrived went nowhere: Cora's map shows where Ann
	// arrived, stopped.
	locs := env.TG.Locations(cora.ID())
	require.Len(t, locs, 1)
	require.Equal(t, tgfake.LiveStopped, locs[0].Live)
	require.Equal(t, 46.4852, locs[0].Location.Latitude)

	// Neither learns who the other is on Telegram: first names only.
	for _, text := range everyText(env, cora.ID()) {
		for _, mark := range []string{"ann_fixes", strconv.FormatInt(ann.ID(), 10), markAddress} {
			require.NotContains(t, text, mark, "Cora saw the master's identity")
		}
	}
	for _, text := range everyText(env, ann.ID()) {
		// Her first name is hers to give (the relayed question); her
		// username and id are not.
		for _, mark := range []string{"cora_at_home", strconv.FormatInt(cora.ID(), 10)} {
			require.NotContains(t, text, mark, "Ann saw the customer's Telegram identity")
		}
	}

	// Reissue: the old link dies, Cora's chat says so, Dan opens the new.
	require.Equal(t, "Link reissued.", boss.PressAndWait(t, confirm, "🔁 Reissue the link").Text)
	reissued := env.TG.WaitMessage(t, boss.ID(), func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, "🔁 New link for order") })
	fresh := orderLinkOf(t, reissued.Text)
	require.NotEqual(t, link, fresh)
	waitStatus(t, env, cora.ID(), order, "its link was withdrawn")
	env.TG.WaitMessage(t, cora.ID(), func(m tgfake.BotMessage) bool {
		return strings.Contains(m.Text, "was withdrawn; this chat no longer follows it")
	})
	require.Contains(t, ask(t, env, cora, cora.ID(), "/start "+link).Text, "does not open anything")
	dan.SendText(dan.ID(), "/start "+fresh)
	waitStatus(t, env, dan.ID(), order, "✅ The work is done.")
	require.Equal(t, int64(dan.ID()), scalar[int64](t, pool, `SELECT customer_id FROM orders WHERE id = $1`, order))
	settled(t, pool)
	logTranscript(t, env, map[string]int64{"Cora": cora.ID(), "Ann": ann.ID(), "Dan": dan.ID(), "Boss": boss.ID()})
}

// A reply to a relayed text that comes before the text's delivery is
// recorded (the outbox's delivery hook runs after Telegram answered the
// send; the e2e tour saw Ann answer in between) still reaches the other
// side, a moment later, and is no question for the memory chat. The test
// holds the record: a SHARE lock on order_messages stalls the hook's
// insert, and so the delivery's mark, until Ann's reply was tried.
func TestDispatchRelayOfAMessageNotYetRecorded(t *testing.T) {
	t.Parallel()
	env, pool, boss := startDispatch(t, nil)
	ann := env.TG.User(781, "Ann", "en")
	cora := env.TG.User(782, "Cora", "en")
	order := acceptedForCustomer(t, env, pool, boss, ann, cora, 700)
	status := waitStatus(t, env, cora.ID(), order, "✉️ Reply to this message to write to Ann.")
	// Cora's status message is recorded before the hold: only Ann's
	// question is to be caught between its delivery and its record.
	eventually(t, 30*time.Second, func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM order_messages WHERE chat_id = $1 AND message_id = $2`,
			cora.ID(), status.MessageID) == 1
	})

	ctx := context.Background()
	hold, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = hold.Rollback(ctx) }()
	_, err = hold.Exec(ctx, `LOCK TABLE order_messages IN SHARE MODE`)
	require.NoError(t, err)

	cora.Reply(status, "Can you come at 10:30?")
	question := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, "✉️ The customer") })
	require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM outbox WHERE chat_id = $1 AND kind = 'relay' AND state = 'pending'`, ann.ID()),
		"Ann has the question, and its delivery is not recorded")
	answer := ann.Reply(question, "Yes, 10:30 works")
	// Her reply found nothing recorded and waits in the inbox for another try.
	tried := `SELECT count(*) FROM inbox WHERE chat_id = $1 AND (body->'message'->>'message_id')::bigint = $2
AND state = 'pending' AND position($3 in last_error) > 0`
	eventually(t, 30*time.Second, func() bool {
		return scalar[int](t, pool, tried, ann.ID(), answer.MessageID, domain.ErrNotYetRecorded.Error()) == 1
	}, func() string {
		return fmt.Sprintf("Ann's memory runs: %d", scalar[int](t, pool, `SELECT count(*) FROM pipeline_runs WHERE user_id = $1`, ann.ID()))
	})
	update := scalar[int64](t, pool, `SELECT update_id FROM inbox WHERE chat_id = $1 AND (body->'message'->>'message_id')::bigint = $2`,
		ann.ID(), answer.MessageID)
	require.NoError(t, hold.Commit(ctx))

	got := env.TG.WaitMessage(t, cora.ID(), func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, "✉️ Ann, your master") })
	require.Contains(t, got.Text, "Yes, 10:30 works")
	require.Equal(t, "✉️ Sent.", env.TG.WaitMessageAfter(t, ann.ID(), answer.MessageID, nil).Text)
	eventually(t, 30*time.Second, func() bool {
		return scalar[string](t, pool, `SELECT state FROM inbox WHERE update_id = $1`, update) == "done"
	})
	require.Zero(t, scalar[int](t, pool, `SELECT count(*) FROM pipeline_runs WHERE user_id = $1`, ann.ID()), "no question for the memory chat")
	settled(t, pool)
}

// A customer cancels before the master sets off: the order is cancelled,
// the master and the admins are told.
func TestDispatchCustomerCancels(t *testing.T) {
	t.Parallel()
	env, pool, boss := startDispatch(t, nil)
	ann := env.TG.User(771, "Ann", "en")
	cora := env.TG.User(772, "Cora", "ru")
	order := acceptedForCustomer(t, env, pool, boss, ann, cora, 900)

	var status tgfake.BotMessage
	env.TG.WaitFor(t, 20*time.Second, func() bool {
		for _, m := range env.TG.Messages(cora.ID()) {
			if strings.HasPrefix(m.Text, fmt.Sprintf("📋 Заказ #%d", order)) && strings.Contains(m.Text, "Ваш мастер: Ann.") {
				status = m
				return true
			}
		}
		return false
	})
	cora.PressAndWait(t, status, "✖️ Отменить заказ")
	require.Equal(t, "Заказ отменён.", pressWhenShown(t, env, cora, status, "Да, отменить").Text)
	waitEdited(t, env, status, func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "❌ Заказ отменён.") })
	require.Equal(t, "CANCELLED", scalar[string](t, pool, `SELECT state FROM orders WHERE id = $1`, order))
	env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "cancelled") })
	env.TG.WaitFor(t, 20*time.Second, func() bool { return logHas(env, "cancelled by the customer") })
}

// acceptedForCustomer is an order in Odesa Center, with a customer's link,
// that customer following it and master (registered there, an English
// speaker) having accepted it; it returns the order's id.
func acceptedForCustomer(t *testing.T, env *e2e.Env, pool *pgxpool.Pool, boss, master, customer *tgfake.Person, price int) int64 {
	t.Helper()
	register(t, env, master, "Odesa Center plumbing")
	confirm := ask(t, env, boss, boss.ID(), "/order "+orderWithCustomer("Odesa Center", price))
	order := int64(scalar[int](t, pool, `SELECT max(id) FROM orders`))
	customer.SendText(customer.ID(), "/start "+orderLinkOf(t, confirm.Text))
	offer := env.TG.WaitMessage(t, master.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "New order #") })
	master.PressAndWait(t, offer, "✅ Accept")
	return order
}

// pressWhenShown waits until msg, as the bot has it now, shows the button
// labelled label, then who presses it; it returns the answer.
func pressWhenShown(t *testing.T, env *e2e.Env, who *tgfake.Person, msg tgfake.BotMessage, label string) tgfake.CallbackAnswer {
	t.Helper()
	return who.PressAndWait(t, waitEdited(t, env, msg, func(m tgfake.BotMessage) bool { return hasLabel(m, label) }), label)
}

// finishOrder is the master's Done on the offer, once it no longer shows
// arrived, and then the confirmation yes.
func finishOrder(t *testing.T, env *e2e.Env, master *tgfake.Person, offer tgfake.BotMessage, arrived, done, yes string) {
	t.Helper()
	master.PressAndWait(t, waitEdited(t, env, offer, func(m tgfake.BotMessage) bool { return !hasLabel(m, arrived) }), done)
	pressWhenShown(t, env, master, offer, yes)
}

func hasLabel(m tgfake.BotMessage, label string) bool {
	for _, l := range m.ReplyMarkup.Labels() {
		if l == label {
			return true
		}
	}
	return false
}

func logHas(env *e2e.Env, s string) bool {
	for _, l := range liveLog(env) {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// logTranscript logs what each person's chat shows, every version of each
// message: for reading with -v.
func logTranscript(t *testing.T, env *e2e.Env, chats map[string]int64) {
	t.Helper()
	var b strings.Builder
	for name, id := range chats {
		fmt.Fprintf(&b, "\n==== %s ====\n", name)
		for _, m := range env.TG.Messages(id) {
			for i, v := range append(m.Edits, m.Message) {
				mark := "  "
				if i > 0 {
					mark = "✎ "
				}
				fmt.Fprintf(&b, "%s%s", mark, v.Shown())
				if l := v.ReplyMarkup.Labels(); len(l) > 0 {
					fmt.Fprintf(&b, "  %v", l)
				}
				b.WriteString("\n")
			}
		}
	}
	t.Log(b.String())
}

// startDispatch is a replica with the admin chat's live log, offers that
// wait an hour and no periodic distribution: the dispatch tests' world,
// with settings (nil: none) added to it or overriding it.
func startDispatch(t *testing.T, settings map[string]string) (*e2e.Env, *pgxpool.Pool, *tgfake.Person) {
	t.Helper()
	env := e2e.New(t)
	env.TG.Group(adminChat, "Dispatch log")
	all := map[string]string{"ADMIN_CHAT_ID": fmt.Sprint(adminChat), "OFFER_SLA": "1h", "DISTRIBUTION_INTERVAL": "1h"}
	maps.Copy(all, settings)
	env.Start(all)
	return env, db(t, env), env.TG.User(e2e.AdminID, "Boss", "en")
}

// startDispatchUnlogged is startDispatch without the admin chat (no
// ADMIN_CHAT_ID): the env and the admin, in English.
func startDispatchUnlogged(t *testing.T) (*e2e.Env, *tgfake.Person) {
	t.Helper()
	env := e2e.New(t)
	env.Start(map[string]string{"OFFER_SLA": "1h", "DISTRIBUTION_INTERVAL": "1h"})
	return env, env.TG.User(e2e.AdminID, "Boss", "en")
}

// The customer's whole way in Russian and in Ukrainian, each with a master
// of their language: the link opened, one status message edited at each
// step in the customer's words and the city's clock, the master's live
// location on a map until Arrived, the photo after Done, the rating.
func TestDispatchCustomerReadsInTheirLanguage(t *testing.T) {
	t.Parallel()
	type words struct {
		lang, master, registered, head                            string
		searching, assigned, enRoute, where, arrived, rated       string
		accept, in15, arrivedButton, done, doneYes, photo, shared string
		// early: the master starts sharing before On my way, when it
		// reaches nobody (notOnTheWay), and it reaches the customer with
		// its first move since: the words, then the map.
		early       bool
		notOnTheWay string
	}
	for _, w := range []words{{
		lang: "ru", master: "Ольга", registered: "мастер", head: "📋 Заказ #%d",
		searching: "🔎 Ищем для вас мастера.", assigned: "👷 Ваш мастер: Ольга.",
		enRoute: "🚗 Ольга уже в пути, будет около ", where: "📍 Ольга делится своим местоположением",
		arrived: "📍 Ольга на месте.", rated: "✅ Работа выполнена. Ваша оценка: ★★★★★ — спасибо!",
		accept: "✅ Принять", in15: "🚗 15 мин", arrivedButton: "📍 На месте", done: "✅ Готово", doneYes: "✅ Да, выполнено",
		photo: "📷 Готовая работа, заказ #%d", shared: "клиент видит вашу геопозицию",
	}, {
		lang: "uk", master: "Оксана", registered: "майстер", head: "📋 Замовлення #%d",
		searching: "🔎 Шукаємо для вас майстра.", assigned: "👷 Ваш майстер: Оксана.",
		enRoute: "🚗 Оксана уже в дорозі, буде близько ", where: "📍 Оксана ділиться своїм місцезнаходженням",
		arrived: "📍 Оксана на місці.", rated: "✅ Роботу виконано. Ваша оцінка: ★★★★★ — дякуємо!",
		accept: "✅ Прийняти", in15: "🚗 15 хв", arrivedButton: "📍 На місці", done: "✅ Готово", doneYes: "✅ Так, виконано",
		photo: "📷 Готова робота, замовлення #%d", shared: "клієнт бачить вашу геопозицію",
		early: true, notOnTheWay: "лише поки ви їдете до нього",
	}} {
		t.Run(w.lang, func(t *testing.T) {
			t.Parallel()
			env, pool, boss := startDispatch(t, nil)
			master := env.TG.User(781, w.master, w.lang)
			customer := env.TG.User(782, "Лука", w.lang)
			require.Contains(t, ask(t, env, master, master.ID(), "/master Odesa Center plumbing").Text, w.registered)
			confirm := ask(t, env, boss, boss.ID(), "/order "+orderWithCustomer("Odesa Center", 1500))
			order := int64(scalar[int](t, pool, `SELECT max(id) FROM orders`))
			head := fmt.Sprintf(w.head, order)
			// The one status message, as it reads once it says want.
			status := func(want string) tgfake.BotMessage {
				t.Helper()
				var got tgfake.BotMessage
				env.TG.WaitFor(t, 20*time.Second, func() bool {
					n := 0
					for _, m := range env.TG.Messages(customer.ID()) {
						if strings.HasPrefix(m.Text, head) {
							got, n = m, n+1
						}
					}
					require.LessOrEqual(t, n, 1, "one status message, edited")
					return n == 1 && strings.Contains(got.Text, want)
				})
				return got
			}

			customer.SendText(customer.ID(), "/start "+orderLinkOf(t, confirm.Text))
			require.Contains(t, status(w.searching).Text, "2099, 09:00–11:00")
			offer := env.TG.WaitMessage(t, master.ID(), func(m tgfake.BotMessage) bool { return hasLabel(m, w.accept) })
			master.PressAndWait(t, offer, w.accept)
			status(w.assigned)

			var share tgfake.Message
			if w.early {
				share = master.ShareLiveLocation(master.ID(), 46.4825, 30.7233, time.Hour)
				require.Contains(t, env.TG.WaitMessageAfter(t, master.ID(), share.MessageID, nil).Text, w.notOnTheWay)
			}
			pressWhenShown(t, env, master, offer, w.in15)
			eta := scalar[time.Time](t, pool, `SELECT eta_at FROM orders WHERE id = $1`, order)
			kyiv, err := time.LoadLocation("Europe/Kyiv")
			require.NoError(t, err)
			require.Contains(t, status(w.enRoute).Text, w.enRoute+eta.In(kyiv).Format("15:04")+".", "the city's clock")

			if !w.early {
				share = master.ShareLiveLocation(master.ID(), 46.4825, 30.7233, 15*time.Minute)
				require.Contains(t, env.TG.WaitMessageAfter(t, master.ID(), share.MessageID, nil).Text, w.shared)
			}
			master.MoveLiveLocation(share, 46.4790, 30.7390)
			words := env.TG.WaitMessage(t, customer.ID(), func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, w.where) })
			var live tgfake.BotMessage
			env.TG.WaitFor(t, 20*time.Second, func() bool {
				locs := env.TG.Locations(customer.ID())
				if len(locs) == 1 {
					live = locs[0]
				}
				return len(locs) == 1 && live.Live == tgfake.LiveActive && live.Location.Longitude == 30.7390
			})
			require.Less(t, words.MessageID, live.MessageID, "the words come before the map")

			assigned := waitEdited(t, env, offer, func(m tgfake.BotMessage) bool { return hasLabel(m, w.arrivedButton) && !hasLabel(m, w.in15) })
			master.PressAndWait(t, assigned, w.arrivedButton)
			status(w.arrived)
			env.TG.WaitFor(t, 20*time.Second, func() bool {
				locs := env.TG.Locations(customer.ID())
				return len(locs) == 1 && locs[0].Live == tgfake.LiveStopped
			})

			finishOrder(t, env, master, offer, w.arrivedButton, w.done, w.doneYes)
			master.SendPhoto(master.ID(), "готово")
			photo := env.TG.WaitMessage(t, customer.ID(), func(m tgfake.BotMessage) bool { return m.Photo != nil })
			require.Equal(t, fmt.Sprintf(w.photo, order), photo.Caption)
			rate := env.TG.WaitMessage(t, customer.ID(), func(m tgfake.BotMessage) bool { return hasLabel(m, "5 ★") })
			customer.PressAndWait(t, rate, "5 ★")
			status(w.rated)
			require.Equal(t, 5, scalar[int](t, pool, `SELECT stars FROM order_ratings WHERE order_id = $1`, order))
			for _, text := range everyText(env, customer.ID()) {
				require.NotContains(t, text, strconv.FormatInt(master.ID(), 10), "the master's id")
				// The admin's words (city, district, skill) are theirs; the
				// rest is the customer's language.
				ours := strings.NewReplacer("Odesa", "", "Center", "", "plumbing", "", "[live map:", "", "[map:", "").Replace(text)
				require.NotRegexp(t, `[A-Za-z]{4,}`, ours, "a word not in the customer's language: %q", text)
			}
			settled(t, pool)
			logTranscript(t, env, map[string]int64{"customer": customer.ID(), "master": master.ID()})
		})
	}
}
