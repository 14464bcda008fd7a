package e2e

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"testing"
)

// Front stands where production has the TLS proxy before webhook replicas:
// the one URL Telegram pushes to, handing each request to the replicas in
// turn. Its listener is the test's from the start and each replica's is the
// replica's own (TELEGRAM_WEBHOOK_LISTEN=127.0.0.1:0, its address read from
// its log), so no port is picked, let go and raced for. Until a replica is
// added, requests are answered 502, which Telegram retries.
type Front struct {
	// URL is the webhook URL to give the replicas.
	URL string

	mu       sync.Mutex
	backends []*httputil.ReverseProxy
	hits     []int64 // requests handed to each backend
	turn     int
}

// NewFront starts a front, closed when the test ends.
func NewFront(t testing.TB) *Front {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("e2e: front: %v", err)
	}
	f := &Front{URL: "http://" + ln.Addr().String() + "/telegram"}
	srv := &http.Server{Handler: http.HandlerFunc(f.serve)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return f
}

// WebhookEnv is what a replica behind f is started with.
func (f *Front) WebhookEnv(secret string) map[string]string {
	return map[string]string{"TELEGRAM_WEBHOOK_URL": f.URL, "TELEGRAM_WEBHOOK_SECRET": secret,
		"TELEGRAM_WEBHOOK_LISTEN": "127.0.0.1:0"}
}

// Add puts p behind the front, once it listens.
func (f *Front) Add(p *Process) {
	p.t.Helper()
	backend := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: p.logAddr("webhook listening")})
	f.mu.Lock()
	defer f.mu.Unlock()
	f.backends = append(f.backends, backend)
	f.hits = append(f.hits, 0)
}

// Hits is how many requests each added replica was handed, in Add order.
func (f *Front) Hits() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.hits)
}

func (f *Front) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	if len(f.backends) == 0 {
		f.mu.Unlock()
		http.Error(w, "no replica yet", http.StatusBadGateway)
		return
	}
	i := f.turn % len(f.backends)
	f.turn++
	f.hits[i]++
	backend := f.backends[i]
	f.mu.Unlock()
	backend.ServeHTTP(w, r)
}
