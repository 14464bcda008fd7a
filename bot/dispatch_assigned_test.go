package bot_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/e2e/tgfake"
	"switchboard/locales"
)

// texts is every text a chat received, each version of each message
// (edits included) and captions.
func texts(msgs []tgfake.BotMessage) []string {
	var out []string
	for _, m := range msgs {
		for _, v := range append(m.Edits, m.Message) {
			out = append(out, v.Text, v.Caption)
		}
	}
	return out
}

// The story: an order with an address, a customer and a visit; the
// offer and its details show the district and the visit only; after Accept
// the master's message has the address, the contact, the visit and the step
// buttons; each step moves the order, edits the message and reaches the
// live log; Done drops the address; a photo afterwards reaches the admins.
// The other master sees no address or contact in anything they received.
func TestAssignedMasterButtons(t *testing.T) {
	t.Parallel()
	env := setupDispatch(t)
	ann, bob := env.annAndBob()
	env.register(t, "Moscow Center plumbing", ann, bob)

	reply := env.ask(t, env.admin, "/order Moscow Center plumbing 3000 Kitchen tap\n"+
		"address: Tverskaya 12, apt 5\nName: Ivan <Petrov>\nphone: +7 999 123-45-67\nwhen: 2099-11-27 10:00-12:00")
	orderID := int64(count(t, env.st, `SELECT max(id) FROM orders`))
	o := itoa(orderID)
	require.Equal(t, "🆕 Order #"+o+" created: plumbing, Moscow, Center, price 3,000.\nKitchen tap\n"+
		"🗓 27 Nov 2099, 10:00–12:00\n🏠 Tverskaya 12, apt 5\n👤 Ivan <Petrov>\n📞 +7 999 123-45-67\n"+
		"🔒 Only the master who accepts the order sees the address, name and phone.\n\n"+
		"It is being offered to matching masters; follow it in /orders."+customerLink(t, env.st, orderID), reply.Text)
	require.Equal(t, "call me is not a phone number (phone:): digits, a leading +, spaces, dashes and parentheses, 5 to 20 digits, e.g. phone: +7 999 123-45-67.",
		env.ask(t, env.admin, "/order Moscow Center plumbing 3000 Tap\nphone: call me").Text, "the error alone, not the whole usage")
	require.Equal(t, "The time 12-10 (when:) must end after it starts, e.g. 10:00-12:00.",
		env.ask(t, env.admin, "/order Moscow Center plumbing 3000 Tap\nwhen: 2099-11-27 12-10").Text)

	f := offers(t, env.st)[0]
	require.Equal(t, int64(42), f.MasterID)
	msg := env.offerMessage(t, f)
	require.True(t, strings.HasPrefix(msg.Text, "🔔 New order #"+o+"\n📍 Moscow, Center\n🗓 27 Nov 2099, 10:00–12:00\n🛠 plumbing\n💰 3,000\n📝 Kitchen tap\n"), msg.Text)
	press(t, env.srv, ann, msg, data(t, "ov", f.ID))
	msg = env.offerMessage(t, f)
	require.Contains(t, msg.Text, "🗓 27 Nov 2099, 10:00–12:00")
	for _, secret := range []string{"Tverskaya", "Ivan", "999"} {
		require.NotContains(t, msg.Text, secret, "not before Accept")
	}

	a := press(t, env.srv, ann, msg, data(t, "oa", f.ID))
	require.Equal(t, "Accepted. The order is yours!", a.Text)
	msg = env.offerMessage(t, f)
	require.Equal(t, "✅ Accepted: order #"+o+" is yours\n📍 Moscow, Center\n🏠 Tverskaya 12, apt 5\n👤 Ivan <Petrov>\n📞 +7 999 123-45-67\n"+
		"🗓 27 Nov 2099, 10:00–12:00\n🛠 plumbing\n💰 3,000\n📝 Kitchen tap\n\n"+
		"Commission: 10% of the price, due within 3 h after the order is done.\n\n"+
		"Next: when you set off, press 🚗 with about how long you will take (the customer is told), 📍 Arrived at the customer's and ✅ Done when the job is finished. "+
		"If you cannot do it, 🙅 Can't do it gives the order back.", msg.Text)
	require.Equal(t, []string{"📋 Copy address", "📋 Copy phone", "🚗 15 min", "🚗 30 min", "🚗 1 h", "📍 Arrived", "✅ Done", "🙅 Can't do it"}, msg.ReplyMarkup.Labels())
	// The copy buttons copy what the message shows, as it was given.
	require.Equal(t, "Tverskaya 12, apt 5", msg.ReplyMarkup.Buttons()[0].Copies())
	require.Equal(t, "+7 999 123-45-67", msg.ReplyMarkup.Buttons()[1].Copies())
	enRoute, arrived, done, giveBack := data(t, "aet", f.ID, 30), data(t, "aa", f.ID), data(t, "ad", f.ID), data(t, "ax", f.ID)
	doneYes, giveBackYes, back := data(t, "adc", f.ID), data(t, "axc", f.ID), data(t, "ab", f.ID)

	// Bob forges Ann's buttons in his own chat: refused, nothing moves.
	bobWelcome, _ := env.srv.LastMessage(43)
	for _, d := range []string{enRoute, arrived, done, giveBack, doneYes, giveBackYes, back} {
		a = pressRaw(t, env.srv, bob, bobWelcome, d)
		require.Equal(t, "This button is not for you.", a.Text)
	}
	require.Equal(t, orderRow{ID: orderID, State: "ASSIGNED", MasterID: int64p(42), Round: 1}, orderByID(t, env.st, orderID))
	require.Zero(t, count(t, env.st, `SELECT count(*) FROM orders WHERE en_route_at IS NOT NULL OR arrived_at IS NOT NULL`))

	a = press(t, env.srv, ann, msg, enRoute)
	require.Equal(t, "Noted: you are on your way.", a.Text)
	require.Equal(t, 1, count(t, env.st, `SELECT count(*) FROM orders WHERE id = $1 AND en_route_at IS NOT NULL`, orderID))
	msg = env.offerMessage(t, f)
	require.True(t, strings.HasSuffix(msg.Text, "\n\n🚗 You are on your way. Press 📍 Arrived at the customer's and ✅ Done when the job is finished."), msg.Text)
	require.Contains(t, msg.Text, "🏠 Tverskaya 12, apt 5")
	require.Equal(t, []string{"📋 Copy address", "📋 Copy phone", "📍 Arrived", "✅ Done", "🙅 Can't do it"}, msg.ReplyMarkup.Labels())
	a = pressRaw(t, env.srv, ann, msg, enRoute)
	requireAlert(t, a, "You have already marked that you are on your way.")

	a = press(t, env.srv, ann, msg, arrived)
	require.Equal(t, "Noted: you have arrived.", a.Text)
	msg = env.offerMessage(t, f)
	require.True(t, strings.HasSuffix(msg.Text, "\n\n📍 You are at the customer's. Press ✅ Done when the job is finished."), msg.Text)
	require.Equal(t, []string{"📋 Copy address", "📋 Copy phone", "✅ Done", "🙅 Can't do it"}, msg.ReplyMarkup.Labels())

	// Done only asks: the text stays, the buttons become Yes and Back, and
	// the order is as it was.
	before := msg
	a = press(t, env.srv, ann, msg, done)
	requireToast(t, a, "Tap “Yes” to confirm, or “Back” if you pressed by mistake.")
	msg = env.offerMessage(t, f)
	require.Equal(t, before.Text, msg.Text)
	require.Equal(t, before.Entities, msg.Entities)
	require.Equal(t, []string{"✅ Yes, it's done", "↩️ Back"}, msg.ReplyMarkup.Labels())
	require.Equal(t, []string{doneYes, back}, msg.ReplyMarkup.Data())
	assigned := orderByID(t, env.st, orderID)
	require.Equal(t, "ASSIGNED", assigned.State)
	require.Nil(t, assigned.Commission)
	require.Equal(t, 1, count(t, env.st, `SELECT count(*) FROM orders WHERE id = $1 AND done_at IS NULL AND arrived_at IS NOT NULL`, orderID))
	require.Len(t, env.srv.CallsTo("editMessageReplyMarkup"), 1, "the buttons alone were edited")

	// Bob forges Yes and Back: refused, nothing moves.
	for _, d := range []string{doneYes, back} {
		a = pressRaw(t, env.srv, bob, bobWelcome, d)
		require.Equal(t, "This button is not for you.", a.Text)
	}
	require.Equal(t, "ASSIGNED", orderByID(t, env.st, orderID).State)
	require.Equal(t, []string{"✅ Yes, it's done", "↩️ Back"}, env.offerMessage(t, f).ReplyMarkup.Labels())

	// Back: the step buttons again, without the steps done; Can't do it
	// asks the same way.
	a = press(t, env.srv, ann, msg, back)
	require.Empty(t, a.Text)
	msg = env.offerMessage(t, f)
	require.Equal(t, before.Text, msg.Text)
	require.Equal(t, []string{"📋 Copy address", "📋 Copy phone", "✅ Done", "🙅 Can't do it"}, msg.ReplyMarkup.Labels())
	require.Equal(t, []string{"", "", done, giveBack}, msg.ReplyMarkup.Data())
	press(t, env.srv, ann, msg, giveBack)
	msg = env.offerMessage(t, f)
	require.Equal(t, []string{"🙅 Yes, give it back", "↩️ Back"}, msg.ReplyMarkup.Labels())
	require.Equal(t, []string{giveBackYes, back}, msg.ReplyMarkup.Data())
	press(t, env.srv, ann, msg, back)
	msg = env.offerMessage(t, f)
	require.Equal(t, "ASSIGNED", orderByID(t, env.st, orderID).State)

	// Done, then Yes: DONE.
	press(t, env.srv, ann, msg, done)
	msg = env.offerMessage(t, f)
	a = press(t, env.srv, ann, msg, doneYes)
	require.Equal(t, "Done. Thank you!", a.Text)
	row := orderByID(t, env.st, orderID)
	require.Equal(t, "DONE", row.State)
	require.Equal(t, int64p(300), row.Commission)
	msk, err := locales.LoadZone("Europe/Moscow")
	require.NoError(t, err)
	due := locales.Time("en", *row.DueAt, msk, time.Now()) // Ann's city's zone
	msg = env.offerMessage(t, f)
	require.Equal(t, "🏁 Order #"+o+" is done — plumbing, Moscow, Center.\nCommission of 300 is due by "+due+".\n"+
		"📷 To show the admins the finished work, send photos of it here within 1 h.", msg.Text)
	require.Empty(t, msg.ReplyMarkup.Buttons())
	for _, d := range []string{done, giveBack, arrived, doneYes, giveBackYes, back} {
		a = pressRaw(t, env.srv, ann, msg, d)
		require.Equal(t, "Order #"+o+" is done already.", a.Text, "a stale button")
	}
	require.Equal(t, "DONE", orderByID(t, env.st, orderID).State)
	require.Empty(t, env.offerMessage(t, f).ReplyMarkup.Buttons(), "a stale Back brings no buttons back")

	// The photo of the work goes to the admin chat; a master with nothing
	// done recently is told why not.
	ann.SendPhoto(42, "all <fixed>")
	require.Equal(t, "📷 Thank you! I'm sending the photo to the admins with order #"+o+".",
		env.srv.WaitMessage(t, 42, func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, "📷") }).Text)
	bob.SendPhoto(43, "")
	require.Equal(t, "I pass photos on to the admins only within 1 h after you finished an order, and there is no such order now.",
		env.srv.WaitMessage(t, 43, func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "photos") }).Text)
	env.settle(t)
	var photo tgfake.BotMessage
	var log []string
	for _, m := range env.srv.Messages(adminChat) {
		if m.File != nil {
			photo = m
			continue
		}
		log = append(log, strings.Split(m.Text, "\n")...)
	}
	require.NotNil(t, photo.File, "the photo reached the admin chat")
	require.Equal(t, "file_id", photo.File.Source, "sent on by its file id")
	require.Equal(t, "📷 Order #"+o+": the finished work, from Ann (id 42)\nall <fixed>", photo.Caption)
	require.Equal(t, 1, count(t, env.st, `SELECT photos FROM orders WHERE id = $1`, orderID))

	require.Equal(t, append(assignedToAnn(o, itoa(f.ID)),
		"🚗 Order #"+o+": Ann (id 42) is on the way",
		"📍 Order #"+o+": Ann (id 42) has arrived",
		"🏁 Order #"+o+": Ann (id 42) reports it done; commission 300",
	), log)

	// Bob, offered nothing of it, never saw the address or the contact.
	for _, text := range texts(env.messages(t, 43)) {
		for _, secret := range []string{"Tverskaya", "Ivan", "999 123"} {
			require.NotContains(t, text, secret)
		}
	}
}

// Can't do it: the master's message keeps nothing of the customer, the
// order goes to the other master, whose message now has the address, and
// the first master's old buttons are refused.
func TestGiveBackInTheChat(t *testing.T) {
	t.Parallel()
	env := setupDispatch(t)
	ann := env.srv.User(42, "Анна", "ru")
	bob := env.srv.User(43, "Богдан", "uk")
	env.register(t, "Москва Центр сантехника", ann, bob)
	env.ask(t, env.admin, "/order Москва Центр сантехника 1000 Течёт кран\nадрес: Тверская 12\nтелефон: +7 999 000-11-22\nкогда: 01.02.2099")
	f := offers(t, env.st)[0]
	msg := env.offerMessage(t, f)
	require.Contains(t, msg.Text, "🗓 1 февр. 2099")
	press(t, env.srv, ann, msg, data(t, "oa", f.ID))
	msg = env.offerMessage(t, f)
	require.Contains(t, msg.Text, "🏠 Тверская 12\n📞 +7 999 000-11-22\n🗓 1 февр. 2099\n")
	require.Equal(t, []string{"📋 Скопировать адрес", "📋 Скопировать телефон", "🚗 15 мин", "🚗 30 мин", "🚗 1 ч", "📍 На месте", "✅ Готово", "🙅 Не могу"}, msg.ReplyMarkup.Labels())

	// Can't do it asks first: nothing changes until Yes; Back shows the
	// step buttons again.
	text := msg.Text
	a := press(t, env.srv, ann, msg, data(t, "ax", f.ID))
	require.Equal(t, "Нажмите «Да», чтобы подтвердить, или «Назад», если нажали по ошибке.", a.Text)
	msg = env.offerMessage(t, f)
	require.Equal(t, text, msg.Text)
	require.Equal(t, []string{"🙅 Да, вернуть заказ", "↩️ Назад"}, msg.ReplyMarkup.Labels())
	require.Equal(t, orderRow{ID: f.OrderID, State: "ASSIGNED", MasterID: int64p(42), Round: 1}, orderByID(t, env.st, f.OrderID))
	require.Len(t, offers(t, env.st), 1, "offered to nobody else")
	press(t, env.srv, ann, msg, data(t, "ab", f.ID))
	msg = env.offerMessage(t, f)
	require.Equal(t, text, msg.Text)
	require.Equal(t, []string{"📋 Скопировать адрес", "📋 Скопировать телефон", "🚗 15 мин", "🚗 30 мин", "🚗 1 ч", "📍 На месте", "✅ Готово", "🙅 Не могу"}, msg.ReplyMarkup.Labels())
	press(t, env.srv, ann, msg, data(t, "ax", f.ID))
	msg = env.offerMessage(t, f)
	a = press(t, env.srv, ann, msg, data(t, "axc", f.ID))
	require.Equal(t, "Заказ возвращён.", a.Text)
	msg = env.offerMessage(t, f)
	require.Equal(t, "🙅 Вы вернули заказ #"+itoa(f.OrderID)+" — сантехника, Москва, Центр. Администраторам сообщили, "+
		"заказ предлагают другим мастерам; вам его больше не предложат.", msg.Text)
	require.Empty(t, msg.ReplyMarkup.Buttons())
	for _, d := range []string{data(t, "ad", f.ID), data(t, "adc", f.ID), data(t, "axc", f.ID), data(t, "ab", f.ID)} {
		a = pressRaw(t, env.srv, ann, msg, d)
		require.Equal(t, "Заказ #"+itoa(f.OrderID)+" больше не ваш: вы его вернули.", a.Text)
	}
	require.Empty(t, env.offerMessage(t, f).ReplyMarkup.Buttons())

	fs := offers(t, env.st)
	require.Len(t, fs, 2)
	require.Equal(t, int64(43), fs[1].MasterID, "offered on at once")
	second := env.offerMessage(t, fs[1])
	require.NotContains(t, second.Text, "Тверская")
	press(t, env.srv, bob, second, data(t, "oa", fs[1].ID))
	second = env.offerMessage(t, fs[1])
	require.Contains(t, second.Text, "🏠 Тверская 12")
	require.Equal(t, []string{"📋 Скопіювати адресу", "📋 Скопіювати телефон", "🚗 15 хв", "🚗 30 хв", "🚗 1 год", "📍 На місці", "✅ Готово", "🙅 Не можу"}, second.ReplyMarkup.Labels())
	a = press(t, env.srv, bob, second, data(t, "ad", fs[1].ID))
	require.Equal(t, "Натисніть «Так», щоб підтвердити, або «Назад», якщо натиснули помилково.", a.Text)
	second = env.offerMessage(t, fs[1])
	require.Equal(t, []string{"✅ Так, виконано", "↩️ Назад"}, second.ReplyMarkup.Labels())
	// Ann's old offer cannot reach Bob's order.
	a = pressRaw(t, env.srv, ann, msg, data(t, "ab", f.ID))
	require.Equal(t, "Заказ #"+itoa(f.OrderID)+" больше не ваш: вы его вернули.", a.Text)
	require.Equal(t, orderRow{ID: f.OrderID, State: "ASSIGNED", MasterID: int64p(43), Round: 1}, orderByID(t, env.st, f.OrderID))

	// The admin cancels: Bob's message loses the address too.
	env.ask(t, env.admin, "/cancel "+itoa(f.OrderID))
	second = env.offerMessage(t, fs[1])
	require.Equal(t, "🚫 Замовлення #"+itoa(f.OrderID)+" скасовано адміністратором — сантехника, Москва, Центр. Їхати не потрібно.", second.Text)
	require.Empty(t, second.ReplyMarkup.Buttons())
	lines := env.logLines(t)
	require.Contains(t, lines, "🙅 Order #"+itoa(f.OrderID)+": Анна (id 42) can't do it and gave it back; it is offered to other masters")
}
