package tgfake

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSetWebhookRefusesWhatTelegramRefuses(t *testing.T) {
	srv := New(t)
	set := func(p map[string]any) apiResponse { return callJSON(t, srv, "setWebhook", p) }
	requireError(t, set(map[string]any{"url": "http://example.com/hook"}), 400, DescWebhookHTTPS)
	requireError(t, set(map[string]any{"url": "https://example.com:9000/hook"}), 400, DescWebhookPort)
	requireError(t, set(map[string]any{"url": "https://example.com/hook", "secret_token": "no spaces"}), 400, DescSecretToken)
	long := make([]byte, 257)
	for i := range long {
		long[i] = 'a'
	}
	requireError(t, set(map[string]any{"url": "https://example.com/hook", "secret_token": string(long)}), 400, DescSecretTokenLong)
	requireError(t, set(map[string]any{"url": "https://example.com/hook", "max_connections": 101}), 400, DescMaxConnections)
	requireOK(t, set(map[string]any{"url": "https://example.com:8443/hook", "secret_token": "s3cret_-", "max_connections": 5}))
	info := decodeResult[map[string]any](t, callJSON(t, srv, "getWebhookInfo", nil))
	require.Equal(t, "https://example.com:8443/hook", info["url"])
	require.EqualValues(t, 5, info["max_connections"])
	// While a webhook is set, nobody may poll.
	requireError(t, callJSON(t, srv, "getUpdates", nil), 409, DescWebhookActive)
	requireOK(t, callJSON(t, srv, "deleteWebhook", nil))
	requireOK(t, callJSON(t, srv, "getUpdates", nil))
}

// hookRecorder is a bot's webhook endpoint that records what it receives.
type hookRecorder struct {
	mu      sync.Mutex
	got     map[int64][]int // chat → update ids in the order received
	secrets []string
	fail    int           // answer 500 to this many requests first
	hold    chan struct{} // when set, requests for chat holdChat wait on it
	holdFor int64
}

func (h *hookRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var u Update
	if err := json.NewDecoder(r.Body).Decode(&u); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	chat := updateChat(u)
	h.mu.Lock()
	h.secrets = append(h.secrets, r.Header.Get(SecretHeader))
	if h.fail > 0 {
		h.fail--
		h.mu.Unlock()
		http.Error(w, "down", http.StatusInternalServerError)
		return
	}
	hold := h.hold
	h.mu.Unlock()
	if hold != nil && chat == h.holdFor {
		<-hold
	}
	h.mu.Lock()
	h.got[chat] = append(h.got[chat], u.UpdateID)
	h.mu.Unlock()
}

func (h *hookRecorder) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, ids := range h.got {
		n += len(ids)
	}
	return n
}

// Every update reaches the webhook once, each chat's in update_id order,
// after the endpoint's failures; getWebhookInfo tells the last failure.
func TestWebhookDeliversEachChatInOrderThroughFailures(t *testing.T) {
	srv := New(t, WithInsecureWebhooks())
	rec := &hookRecorder{got: map[int64][]int{}, fail: 3}
	hook := httptest.NewServer(rec)
	t.Cleanup(hook.Close)
	requireOK(t, callJSON(t, srv, "setWebhook", map[string]any{"url": hook.URL + "/tg", "secret_token": "k3y", "max_connections": 4}))
	people := []*Person{srv.User(101, "A", "en"), srv.User(102, "B", "en"), srv.User(103, "C", "en")}
	for i := 0; i < 10; i++ {
		for _, p := range people {
			p.SendText(p.ID(), "hello")
		}
	}
	// The recorder has an update before the fake has its answer: both.
	srv.WaitFor(t, 30*time.Second, func() bool {
		srv.mu.Lock()
		pending := len(srv.updates)
		srv.mu.Unlock()
		return rec.count() == 30 && pending == 0
	})
	for _, p := range people {
		ids := rec.got[p.ID()]
		require.Len(t, ids, 10)
		require.IsIncreasing(t, ids, "chat %d in order", p.ID())
	}
	for _, s := range rec.secrets {
		require.Equal(t, "k3y", s)
	}
	info := decodeResult[map[string]any](t, callJSON(t, srv, "getWebhookInfo", nil))
	require.EqualValues(t, 0, info["pending_update_count"])
	require.Equal(t, "Wrong response from the webhook: 500 Internal Server Error", info["last_error_message"])
}

// A chat whose update is being handled waits; the others do not.
func TestWebhookHoldsOnlyTheBusyChat(t *testing.T) {
	srv := New(t, WithInsecureWebhooks())
	rec := &hookRecorder{got: map[int64][]int{}, hold: make(chan struct{}), holdFor: 201}
	hook := httptest.NewServer(rec)
	t.Cleanup(hook.Close)
	requireOK(t, callJSON(t, srv, "setWebhook", map[string]any{"url": hook.URL}))
	slow, quick := srv.User(201, "Slow", "en"), srv.User(202, "Quick", "en")
	slow.SendText(slow.ID(), "one")
	slow.SendText(slow.ID(), "two")
	quick.SendText(quick.ID(), "three")
	srv.WaitFor(t, 10*time.Second, func() bool { return rec.count() == 1 })
	rec.mu.Lock()
	require.Len(t, rec.got[quick.ID()], 1, "the quick chat is not held up by the slow one")
	rec.mu.Unlock()
	close(rec.hold)
	srv.WaitFor(t, 10*time.Second, func() bool { return rec.count() == 3 })
	require.IsIncreasing(t, rec.got[slow.ID()])
}

// Updates wait while the webhook's host is down and arrive when it is back;
// allowed_updates drops the kinds the bot did not ask for.
func TestWebhookKeepsUpdatesWhileTheBotIsDown(t *testing.T) {
	srv := New(t, WithInsecureWebhooks())
	rec := &hookRecorder{got: map[int64][]int{}}
	// Nothing listens on the webhook's port until the bot is back, but the
	// port is ours all along: closed and bound again, another test's
	// connection could take it in between.
	addr, listen := boundPort(t)
	requireOK(t, callJSON(t, srv, "setWebhook", map[string]any{"url": "http://" + addr, "allowed_updates": `["message"]`}))
	p := srv.User(301, "A", "en")
	p.SendText(p.ID(), "while you were out")
	srv.WaitFor(t, 10*time.Second, func() bool {
		_, last := srv.Webhook()
		return last != ""
	})
	_, last := srv.Webhook()
	require.Equal(t, "Connection refused", last)
	hook := &httptest.Server{Listener: listen(), Config: &http.Server{Handler: rec}}
	hook.Start()
	t.Cleanup(hook.Close)
	srv.WaitFor(t, 10*time.Second, func() bool { return rec.count() == 1 })
	info := decodeResult[map[string]any](t, callJSON(t, srv, "getWebhookInfo", nil))
	require.Equal(t, []any{"message"}, info["allowed_updates"])
}

// boundPort binds a loopback TCP socket without listening on it, so that a
// connection to addr is refused, as to a bot that is down, until listen is
// called on the same socket.
func boundPort(t *testing.T) (addr string, listen func() net.Listener) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = syscall.Close(fd)
		}
	})
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	addr = fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	return addr, func() net.Listener {
		require.NoError(t, syscall.Listen(fd, syscall.SOMAXCONN))
		f := os.NewFile(uintptr(fd), addr)
		closed = true
		l, err := net.FileListener(f) // a dup: f is ours to close
		require.NoError(t, f.Close())
		require.NoError(t, err)
		return l
	}
}
