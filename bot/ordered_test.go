package bot_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/bot"
)

// Each chat's updates are handled one at a time, in the order they were
// sent, and a chat waiting on a slow handler holds up no other chat.
func TestUpdatesOfAChatAreHandledInOrder(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var mu sync.Mutex
	var handled []string
	record := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		handled = append(handled, s)
	}
	tb := setup(t, bot.Config{RateLimit: 1000, RateBurst: 1000}, func(b *bot.Bot) {
		b.Handle(bot.Command{Name: "slow", Desc: "cmd.help", Handle: func(r *bot.Request) error {
			<-release
			record("slow")
			return r.Reply("slow done", nil)
		}})
		b.Handle(bot.Command{Name: "echo", Desc: "cmd.help", Handle: func(r *bot.Request) error {
			record(r.Message().Payload)
			return r.Reply("echo "+r.Message().Payload, nil)
		}})
	})
	ann, bob := tb.annAndBob()

	ann.SendText(ann.ID(), "/slow")
	for _, p := range []string{"1", "2", "3", "4", "5"} {
		ann.SendText(ann.ID(), "/echo "+p)
	}
	require.Equal(t, "echo bob", tb.ask(t, bob, "/echo bob").Text, "Bob is served while Ann's chat waits")
	tb.srv.WaitUpdatesConsumed(t)
	for deadline := time.Now().Add(200 * time.Millisecond); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		require.Empty(t, tb.srv.Messages(ann.ID()), "Ann's later commands wait for her first")
	}

	close(release)
	require.Eventually(t, func() bool { return len(tb.srv.Messages(ann.ID())) >= 6 }, 10*time.Second, 10*time.Millisecond)
	var replies []string
	for _, m := range tb.srv.Messages(ann.ID()) {
		replies = append(replies, m.Text)
	}
	require.Equal(t, []string{"slow done", "echo 1", "echo 2", "echo 3", "echo 4", "echo 5"}, replies)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"bob", "slow", "1", "2", "3", "4", "5"}, handled)
}
