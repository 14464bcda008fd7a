package bot

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	tele "gopkg.in/telebot.v3"

	"switchboard/bot/delivery"
	"switchboard/domain"
)

// SecretHeader carries the webhook's secret token in each of Telegram's
// requests (setWebhook's secret_token).
const SecretHeader = "X-Telegram-Bot-Api-Secret-Token"

// maxUpdateBytes bounds one webhook request's body: Telegram's updates are
// a few kilobytes; anything near this is not Telegram.
const maxUpdateBytes = 1 << 20

// Intake is where a webhook puts what Telegram sends: the inbox. from
// names the storing replica (its claimer): the inbox's notification
// carries it, and that replica, whose workers were woken already, lets
// it pass (Bot.InboxNotified).
type Intake interface {
	Take(ctx context.Context, from string, us []domain.InboxUpdate) error
}

// WebhookHandler takes Telegram's webhook requests into the inbox. It
// answers 200 only once the update is stored, so Telegram sends again what
// a replica could not keep (the database down, the replica stopping); it
// checks the secret token in constant time, so nobody else can feed the
// bot updates. Every replica behind the load balancer runs one, and the
// inbox de-duplicates an update Telegram sent twice. wake tells this
// replica's inbox workers (the NOTIFY, naming from, tells the others').
// An update the database refuses for what it holds (aboutData; nil: none)
// is kept as a skeleton and answered 200 like any other: an error status
// would have Telegram send it again and again, and it would be refused
// each time.
func WebhookHandler(secret string, in Intake, from string, aboutData AboutData, wake func(), log *slog.Logger) http.Handler {
	if aboutData == nil {
		aboutData = func(error) bool { return false }
	}
	want := []byte(secret)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		if subtle.ConstantTimeCompare([]byte(r.Header.Get(SecretHeader)), want) != 1 {
			log.Warn("webhook request without the right secret token", "remote", r.RemoteAddr)
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxUpdateBytes))
		if err != nil {
			status := http.StatusBadRequest
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				status = http.StatusRequestEntityTooLarge
			}
			log.Warn("webhook body unreadable", "err", err, "remote", r.RemoteAddr)
			http.Error(w, "bad body", status)
			return
		}
		u, err := InboxUpdateOf(json.RawMessage(raw))
		if err != nil {
			log.Warn("webhook body is no update", "err", err, "remote", r.RemoteAddr)
			http.Error(w, "not an update", http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		if err := storeUpdates(ctx, in, from, aboutData, log, []domain.InboxUpdate{u}); err != nil {
			// Telegram retries a failed delivery: the update waits there.
			log.Warn("webhook update not stored; Telegram will send it again", "update_id", u.ID, "err", err)
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		if wake != nil {
			wake()
		}
		w.WriteHeader(http.StatusOK)
	})
}

// WebhookConfig is webhook mode: Telegram pushes updates to URL (HTTPS, in
// front of every replica), and each replica listens on Listen for what the
// TLS proxy or load balancer forwards.
type WebhookConfig struct {
	URL, Secret, Listen string
	// MaxConnections is setWebhook's max_connections: how many requests
	// Telegram sends at once (1–100).
	MaxConnections int
	// Listener, when set, is served instead of binding Listen: one bound
	// beforehand on port 0 by a caller that must know its address (the
	// bench), with no window for another process to take it.
	Listener net.Listener
}

// webhookIntake is the inbox's intake in webhook mode: it sets the webhook
// and serves it until stop. Every replica runs one; none is special.
type webhookIntake struct {
	cfg       WebhookConfig
	inbox     Intake
	from      string
	aboutData AboutData
	wake      func()
	log       *slog.Logger
	tg        *delivery.Client
	// ln is bound by bind, which Run calls first.
	ln net.Listener
}

// bind takes the webhook's address, before Run contacts Telegram: a
// replica that cannot listen (the port taken, the address not its own)
// ends with the error rather than running without intake, and Telegram's
// first request finds a replica ready. The address is logged as bound: a
// port of 0 (a test's) is the kernel's choice, known only here.
func (w *webhookIntake) bind() error {
	w.ln = w.cfg.Listener
	if w.ln == nil {
		ln, err := net.Listen("tcp", w.cfg.Listen)
		if err != nil {
			return fmt.Errorf("webhook: %w", err)
		}
		w.ln = ln
	}
	w.log.Info("webhook listening", "addr", w.ln.Addr().String())
	return nil
}

// close gives the address up if Poll never served it (a stop before
// Telegram answered).
func (w *webhookIntake) close() {
	if w.ln != nil {
		_ = w.ln.Close()
	}
}

func (w *webhookIntake) Poll(_ *tele.Bot, _ chan tele.Update, stop chan struct{}) {
	srv := &http.Server{
		Handler:           WebhookHandler(w.cfg.Secret, w.inbox, w.from, w.aboutData, w.wake, w.log),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(w.ln) }()
	w.setWebhook(stop)
	select {
	case err := <-served:
		if !errors.Is(err, http.ErrServerClosed) {
			w.log.Error("webhook listener stopped; no updates reach this replica", "addr", w.ln.Addr().String(), "err", err)
		}
	case <-stop:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Requests in flight finish their insert and answer; Telegram resends
	// whatever is cut.
	_ = srv.Shutdown(ctx)
}

// setWebhook tells Telegram where to push, retrying until it agrees or the
// bot stops. Every replica sets the same webhook: the call is idempotent.
func (w *webhookIntake) setWebhook(stop chan struct{}) {
	ctx, cancel := untilStop(stop)
	defer cancel()
	hook := delivery.Webhook{URL: w.cfg.URL, Secret: w.cfg.Secret, MaxConnections: w.cfg.MaxConnections, AllowedUpdates: allowedUpdates}
	backoff := 500 * time.Millisecond
	for {
		err := w.tg.SetWebhook(ctx, hook)
		if err == nil {
			w.log.Info("webhook set: Telegram pushes updates", "listen", w.cfg.Listen)
			return
		}
		// The URL is logged without its path, which may hold a secret.
		w.log.Warn("setWebhook failed, retrying", "err", err, "in", backoff)
		if domain.Sleep(ctx, backoff) != nil {
			return
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// dropWebhook removes a webhook a former webhook-mode deployment left, so
// polling is not refused with 409; pending updates are kept.
func dropWebhook(ctx context.Context, tg *delivery.Client, log *slog.Logger) {
	info, err := tg.GetWebhookInfo(ctx)
	if err != nil {
		log.Warn("getWebhookInfo failed", "err", err)
		return
	}
	if info.URL == "" {
		return
	}
	if err := tg.DeleteWebhook(ctx, false); err != nil {
		log.Warn("deleteWebhook failed: polling is refused while a webhook is set", "err", err)
		return
	}
	log.Info("a webhook was set: deleted it to poll (pending updates kept)")
}
