package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"switchboard/domain"
)

// Store is what the sender needs from the outbox (storage implements it).
type Store interface {
	Claim(ctx context.Context, claimer string, n int, lease time.Duration) ([]domain.Queued, error)
	Delivered(ctx context.Context, r domain.Queued, messageID int) (bool, error)
	Retry(ctx context.Context, id int64, token string, after time.Duration, why string, tried bool) error
	End(ctx context.Context, id int64, token, state, why string) (bool, error)
	Extend(ctx context.Context, id int64, token string, lease time.Duration) (bool, error)
	MarkUnreachable(ctx context.Context, chatID int64, reason string) ([]domain.Dropped, error)
	RecordThrottle(ctx context.Context, chatID int64, retryAfter time.Duration) error
}

// Config tunes the sender; zero values take the defaults.
type Config struct {
	// Workers is how many rows one replica delivers at once (16).
	Workers int
	// ClaimLease is how long an outbox claim lasts; a sender that dies leaves its rows,
	// and so their chats, to the others after it (10 s). A delivery waits
	// at most MaxWait for the limiter and ClaimLease/2 for Telegram, so it ends
	// within its lease and no live sender's row is taken over.
	ClaimLease time.Duration
	// Claimer names this replica in its claims (storage.Liveness): its
	// peers give its rows back as soon as it is gone rather than after
	// ClaimLease. Empty: only the lease ends its claims.
	Claimer string
	// Poll is how often an idle sender looks for rows nobody woke it for,
	// rows of other replicas' workflows among them (100 ms).
	Poll time.Duration
	// MaxBackoff caps the wait between retries of a failing row (1 min).
	MaxBackoff time.Duration
	// MaxWait is the longest a worker waits for the limiter before it
	// returns the row with a due time instead and takes another chat's
	// (100 ms). Below a private chat's interval (1 s) on purpose: a worker
	// sleeping on one chat's budget idles while other chats wait, and with
	// the oldest chats served first the workers would stick to as many
	// chats as there are workers, well under Telegram's overall rate.
	MaxWait time.Duration
	// DocumentLease is the claim a document's delivery holds instead of
	// ClaimLease: its file is built and uploaded within half of it (2 min).
	DocumentLease time.Duration
}

func (c Config) withDefaults() Config {
	if c.Workers <= 0 {
		c.Workers = 16
	}
	if c.ClaimLease <= 0 {
		c.ClaimLease = 10 * time.Second
	}
	if c.Poll <= 0 {
		c.Poll = 100 * time.Millisecond
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = time.Minute
	}
	if c.MaxWait <= 0 {
		c.MaxWait = 100 * time.Millisecond
	}
	c.MaxWait = min(c.MaxWait, c.ClaimLease/4)
	if c.DocumentLease <= 0 {
		c.DocumentLease = 2 * time.Minute
	}
	c.DocumentLease = max(c.DocumentLease, c.ClaimLease)
	return c
}

// DropHook is told that a row of its kind was dropped because its
// recipient is unreachable, so whatever waits on it moves on (an offer is
// declined and the order goes to the next master).
type DropHook func(ctx context.Context, ref int64)

// DocumentHook builds the file a row of its kind sends (domain.Message's
// Document), from what the row names, when the row is sent. It returns
// ErrNoDocument when there is nothing to send any more (the row is then
// dropped); any other error is retried as a passing failure.
type DocumentHook func(ctx context.Context, r domain.Queued) (Document, error)

// ErrNoDocument: a document hook found nothing to send.
var ErrNoDocument = errors.New("nothing to send")

// MaxDocumentBytes is the largest file a bot may upload (Telegram's 50 MB);
// document hooks keep their files within it.
const MaxDocumentBytes = 50 << 20

// Sender delivers the outbox.
type Sender struct {
	cfg     Config
	store   Store
	client  *Client
	limiter Limiter
	log     *slog.Logger
	m       *metrics
	hooks   map[string]DropHook
	docs    map[string]DocumentHook
	wake    chan struct{}
	// features is what the server was seen to refuse (features.go).
	features *features
	// topics puts messages into their workflow's topic (topics.go); nil:
	// none.
	topics *topics
}

// NewSender builds a sender; Run starts it.
func NewSender(cfg Config, store Store, client *Client, limiter Limiter, log *slog.Logger, reg prometheus.Registerer) (*Sender, error) {
	if log == nil {
		log = slog.Default()
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	log = log.With("component", "delivery")
	return &Sender{
		cfg: cfg.withDefaults(), store: store, client: client, limiter: limiter,
		log: log, m: m, hooks: map[string]DropHook{}, docs: map[string]DocumentHook{}, wake: make(chan struct{}, 1),
		features: newFeatures(log),
	}, nil
}

// OnDrop registers what happens when a row of kind is dropped for an
// unreachable recipient. Call before Run.
func (s *Sender) OnDrop(kind string, h DropHook) { s.hooks[kind] = h }

// OnDocument registers what builds the files of kind's document rows.
// Call before Run.
func (s *Sender) OnDocument(kind string, h DocumentHook) { s.docs[kind] = h }

// Wake asks for a claim now: rows were just written. It never blocks.
func (s *Sender) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run delivers rows until ctx ends, then waits for deliveries in flight.
func (s *Sender) Run(ctx context.Context) {
	sem := make(chan struct{}, s.cfg.Workers)
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(s.cfg.Poll)
	defer t.Stop()
	for ctx.Err() == nil {
		free := s.cfg.Workers - len(sem)
		var rows []domain.Queued
		if free > 0 {
			var err error
			rows, err = s.store.Claim(ctx, s.cfg.Claimer, free, s.cfg.ClaimLease)
			if err != nil && ctx.Err() == nil {
				s.log.Warn("claim outbox", "err", err)
			}
		}
		for _, r := range rows {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done(); s.Wake() }()
				if err := s.m.panics.Contain(s.log, "outbox_row", r.ID, func() { s.deliver(ctx, r) }); err != nil {
					s.setAside(ctx, r, err)
				}
			}()
		}
		if len(rows) == free && free > 0 {
			continue // there may be more right away
		}
		select {
		case <-ctx.Done():
		case <-s.wake:
		case <-t.C:
		}
	}
}

// deliver sends one claimed row and settles it by the outcome's class. A
// delivery already under way finishes even when ctx ends: its message may
// be out, and recording that keeps it from being sent twice.
func (s *Sender) deliver(ctx context.Context, r domain.Queued) {
	log := s.log.With("row", r.ID, "chat", r.ChatID, "kind", r.Kind)
	if s.settledAsIs(ctx, r, log) {
		return
	}
	wait, err := s.limiter.Take(ctx, r.ChatID, s.cfg.MaxWait)
	if err != nil {
		s.retry(ctx, r, time.Second, "limiter: "+err.Error(), "limiter")
		return
	}
	if wait > 0 {
		s.retry(ctx, r, wait, "", "paced")
		return
	}
	timeout := s.cfg.ClaimLease / 2
	var doc Document
	if r.Document != "" {
		var ok bool
		if doc, ok = s.document(ctx, r, log); !ok {
			return
		}
		timeout = s.cfg.DocumentLease / 2
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	msgID, err := s.call(dctx, r, doc)
	class := Classify(err)
	if class == EditGone && r.IfGone == domain.IfGoneSend {
		log.Info("message to edit is gone, posting it anew")
		r.Edit, r.Target = false, 0
		msgID, err = s.call(dctx, r, doc)
		class = Classify(err)
	}
	if class == EditGone && stopsLive(r) {
		// "message can't be edited": the live location stopped already
		// (its sharer's own stop relayed, or its period over), as asked.
		class = OK
	}
	switch class {
	case OK, NotModified:
		s.delivered(ctx, r, msgID, log)
	case Flood:
		after := s.flood(dctx, r.ChatID, err)
		s.retry(dctx, r, after, err.Error(), "flood")
	case Transient:
		s.retry(dctx, r, s.backoff(r.Attempts), err.Error(), "transient")
	case Gone:
		dropped, merr := s.store.MarkUnreachable(dctx, r.ChatID, err.Error())
		if merr != nil {
			log.Error("mark unreachable", "err", merr)
			s.retry(dctx, r, s.backoff(r.Attempts), err.Error(), "transient")
			return
		}
		log.Warn("recipient unreachable, pending messages dropped", "err", err, "dropped", len(dropped))
		for _, d := range dropped {
			s.m.dropped.WithLabelValues(d.Kind, "unreachable").Inc()
			s.afterDrop(dctx, d.Kind, d.Ref)
		}
	case EditGone:
		if ok, _ := s.store.End(dctx, r.ID, r.Token, "dropped", err.Error()); ok {
			s.m.dropped.WithLabelValues(r.Kind, "edit_gone").Inc()
		}
	case Bad:
		text := head(r.Text, 80)
		if r.Ephemeral {
			text = "(ephemeral)" // its text must not outlive it, here or in the logs
		}
		why := fmt.Sprintf("%s; text: %q", err.Error(), text)
		if ok, _ := s.store.End(dctx, r.ID, r.Token, "failed", why); ok {
			s.m.failed.WithLabelValues(r.Kind).Inc()
		}
		log.Error("telegram refused a message: a bug", "err", err, "text", text)
	}
}

// setAside fails a row whose delivery panicked, as one Telegram refuses
// as malformed: a bug, which sent again would panic again. Left claimed,
// the row would come back after its lease, panic a sender each time and
// hold every later row of its chat's lane behind it for ever. A row whose
// delivery was recorded before the panic is no longer its claim's, and
// stays as it is.
func (s *Sender) setAside(ctx context.Context, r domain.Queued, cause error) {
	var ok bool
	if err := s.save(ctx, "set a panicking outbox row aside", r.ID, func(ctx context.Context) error {
		var err error
		ok, err = s.store.End(ctx, r.ID, r.Token, "failed", cause.Error())
		return err
	}); err != nil {
		// The claim lapses instead, and the row panics once more.
		s.log.Error("set a panicking outbox row aside", "row", r.ID, "err", err)
		return
	}
	if ok {
		s.m.failed.WithLabelValues(r.Kind).Inc()
		s.log.Error("outbox row set aside: its delivery panicked", "row", r.ID, "chat", r.ChatID, "kind", r.Kind)
	}
}

// settledAsIs settles a row that needs no call: one for a chat gone
// unreachable, an edit a newer edit superseded, an edit of a message never
// delivered. It is done without taking the chat's pace.
func (s *Sender) settledAsIs(ctx context.Context, r domain.Queued, log *slog.Logger) bool {
	switch {
	case r.Unreachable:
		s.drop(ctx, r, "recipient unreachable")
	case r.Superseded:
		if ok, err := s.store.End(ctx, r.ID, r.Token, "dropped", "superseded by a newer edit"); err != nil {
			log.Error("drop superseded edit", "err", err)
		} else if ok {
			s.m.dropped.WithLabelValues(r.Kind, "superseded").Inc()
		}
	case r.Edit && r.Target == 0 && r.IfGone != domain.IfGoneSend && !r.MarkupOnly:
		// Its message was never delivered (dropped, failed, pruned). A
		// live location's stop is done: there is none to stop.
		if stopsLive(r) {
			s.delivered(ctx, r, 0, log)
		} else if ok, _ := s.store.End(ctx, r.ID, r.Token, "dropped", "no message to edit"); ok {
			s.m.dropped.WithLabelValues(r.Kind, "edit_gone").Inc()
		}
	default:
		return false
	}
	return true
}

// stopsLive reports whether r stops a live location, which is done when
// there is no live location to stop.
func stopsLive(r domain.Queued) bool { return r.Edit && r.Location != nil && r.Location.Stop }

// document builds a document row's file through its kind's hook and
// extends the row's claim to DocumentLease for the upload; false when the
// row was settled instead (nothing to send, a hook that failed, a lost
// claim).
func (s *Sender) document(ctx context.Context, r domain.Queued, log *slog.Logger) (Document, bool) {
	h := s.docs[r.Kind]
	if h == nil {
		if ok, _ := s.store.End(ctx, r.ID, r.Token, "failed", "no document hook for kind "+r.Kind); ok {
			s.m.failed.WithLabelValues(r.Kind).Inc()
		}
		log.Error("document row of a kind with no hook: a bug")
		return Document{}, false
	}
	ok, err := s.store.Extend(ctx, r.ID, r.Token, s.cfg.DocumentLease)
	if err != nil || !ok {
		if err != nil {
			s.retry(ctx, r, s.backoff(r.Attempts), "extend claim: "+err.Error(), "transient")
		}
		return Document{}, false
	}
	bctx, cancel := context.WithTimeout(ctx, s.cfg.DocumentLease/4)
	doc, err := h(bctx, r)
	cancel()
	switch {
	case errors.Is(err, ErrNoDocument):
		if ok, _ := s.store.End(ctx, r.ID, r.Token, "dropped", err.Error()); ok {
			s.m.dropped.WithLabelValues(r.Kind, "no_document").Inc()
		}
		return Document{}, false
	case err != nil:
		s.retry(ctx, r, s.backoff(r.Attempts), "build document: "+err.Error(), "transient")
		return Document{}, false
	case len(doc.Data) == 0 || len(doc.Data) > MaxDocumentBytes:
		if ok, _ := s.store.End(ctx, r.ID, r.Token, "failed", fmt.Sprintf("document of %d bytes", len(doc.Data))); ok {
			s.m.failed.WithLabelValues(r.Kind).Inc()
		}
		log.Error("document hook built a file Telegram refuses: a bug", "bytes", len(doc.Data))
		return Document{}, false
	}
	return doc, true
}

// delivered records that a row is out. A mark the database refuses is
// retried, or the row would be sent again once its claim lapsed.
func (s *Sender) delivered(ctx context.Context, r domain.Queued, msgID int, log *slog.Logger) {
	var ok bool
	err := s.save(ctx, "record delivery", r.ID, func(ctx context.Context) error {
		var err error
		ok, err = s.store.Delivered(ctx, r, msgID)
		return err
	})
	if err != nil {
		log.Error("record delivery", "err", err)
		return
	}
	if !ok {
		log.Warn("delivered a row whose claim had run out; it may go out twice")
	}
	s.m.sent.WithLabelValues(r.Kind).Add(float64(max(r.Merged, 1)))
	s.m.age.Observe(time.Since(r.CreatedAt).Seconds())
}

// flood obeys a 429: the chat, or the whole bot, pauses for retry_after,
// which is recorded for /status; the wait.
func (s *Sender) flood(ctx context.Context, chatID int64, err error) time.Duration {
	after := time.Second
	var ae *APIError
	if errors.As(err, &ae) {
		after = max(ae.RetryAfter, after)
	}
	// A paced private chat cannot have run over its own limit, so a 429
	// there is the bot's; a group's is its 20 a minute.
	global := chatID > 0
	if perr := s.limiter.Pause(ctx, chatID, after, global); perr != nil {
		s.log.Warn("pause after 429", "chat", chatID, "err", perr)
	}
	if s.store != nil {
		if terr := s.store.RecordThrottle(ctx, chatID, after); terr != nil {
			s.log.Warn("record 429", "chat", chatID, "err", terr)
		}
	}
	s.m.throttled.Inc()
	s.log.Warn("telegram flood control", "chat", chatID, "retry_after", after, "global", global)
	return after
}

// call makes the row's Bot API call (doc: a document row's file); the
// message id of a send. What a message uses of the newer Bot API goes
// where the server takes it (features.go): a part the server was seen to
// refuse is left out at once; a refusal of one is answered by sending the
// message again without it, and it is believed for a while only when a
// call without it went through.
func (s *Sender) call(ctx context.Context, r domain.Queued, doc Document) (int, error) {
	b := body{Text: r.Text, Buttons: r.Buttons, ReplyTo: r.ReplyTo, Photo: r.Photo, OnlyFor: r.OnlyFor, ForPress: r.ForPress, Rich: r.Rich, Location: r.Location}
	if r.Edit { // an edit names its message, wherever it is
		return s.callParts(ctx, r, b, doc)
	}
	if r.Thread != 0 {
		// A reply into the forum topic its command came from: if the
		// topic is gone meanwhile, into the group's General.
		b.Thread = r.Thread
		id, err := s.callParts(ctx, r, b, doc)
		if err != nil && threadNotFound(err) {
			b.Thread = 0
			return s.callParts(ctx, r, b, doc)
		}
		return id, err
	}
	topic := domain.TopicOf(r.ChatID, r.Kind, r.Topic)
	var kept bool
	b.Thread, kept = s.threadFor(ctx, r.ChatID, topic)
	id, err := s.callParts(ctx, r, b, doc)
	if err != nil && kept && threadNotFound(err) {
		// The user deleted the topic: the message goes into a new one,
		// once (a refusal of the new one is the row's error).
		if ferr := s.topics.store.ForgetThread(ctx, r.ChatID, topic, b.Thread); ferr != nil {
			return id, fmt.Errorf("forget a deleted topic: %w (after %w)", ferr, err)
		}
		s.log.Info("a topic the user deleted is created again", "chat", r.ChatID, "topic", topic, "thread", b.Thread)
		b.Thread, _ = s.threadFor(ctx, r.ChatID, topic)
		return s.callParts(ctx, r, b, doc)
	}
	return id, err
}

// callParts makes the call with what the server takes of b (the
// fallbacks).
func (s *Sender) callParts(ctx context.Context, r domain.Queued, b body, doc Document) (int, error) {
	for _, f := range fallbacks {
		if f.uses(b) && s.features.lacks(f.feature) {
			b = f.without(b)
		}
	}
	var dropped []Feature
	var refusal error
	for {
		id, err := s.callBody(ctx, r, b, doc)
		if err == nil {
			for _, f := range dropped {
				s.features.refused(f, refusal)
			}
			return id, nil
		}
		f, ok := refusedPart(err, b)
		if !ok {
			return id, err
		}
		if !f.inThisChat {
			dropped, refusal = append(dropped, f.feature), err
		}
		b = f.without(b)
	}
}

// callBody makes the row's Bot API call with body b.
func (s *Sender) callBody(ctx context.Context, r domain.Queued, b body, doc Document) (int, error) {
	if r.Document != "" && !r.Edit {
		res, err := s.client.Upload(ctx, "sendDocument", captionParams(r.ChatID, b), "document", doc)
		if err != nil {
			return 0, err
		}
		return messageID(res), nil
	}
	if r.Photo != "" && !r.Edit {
		res, err := s.client.Call(ctx, "sendPhoto", photoParams(r.ChatID, b))
		if err != nil {
			return 0, err
		}
		return messageID(res), nil
	}
	if r.Edit {
		if r.Target == 0 {
			// Its send was never delivered (dropped, failed) or is pruned.
			return 0, &APIError{Code: 400, Status: 400, Description: "Bad Request: message to edit not found"}
		}
		switch {
		case b.Location != nil && b.Location.Stop:
			_, err := s.client.Call(ctx, "stopMessageLiveLocation", map[string]any{"chat_id": r.ChatID, "message_id": r.Target})
			return 0, err
		case b.Location != nil:
			_, err := s.client.Call(ctx, "editMessageLiveLocation", locationParams(r.ChatID, r.Target, b))
			return 0, err
		}
		if r.MarkupOnly {
			_, err := s.client.Call(ctx, "editMessageReplyMarkup", markupParams(r.ChatID, r.Target, b))
			return 0, err
		}
		_, err := s.client.Call(ctx, "editMessageText", editParams(r.ChatID, r.Target, b))
		return 0, err
	}
	if b.Location != nil {
		res, err := s.client.Call(ctx, "sendLocation", locationParams(r.ChatID, 0, b))
		if err != nil {
			return 0, err
		}
		return messageID(res), nil
	}
	if b.Rich != "" {
		res, err := s.client.Call(ctx, "sendRichMessage", richParams(r.ChatID, b))
		if err != nil {
			return 0, err
		}
		return messageID(res), nil
	}
	res, err := s.client.Call(ctx, "sendMessage", sendParams(r.ChatID, b))
	if err != nil {
		return 0, err
	}
	if b.OnlyFor != 0 && !ephemeral(res) {
		s.features.refused(FeatureEphemeral, errEphemeralIgnored)
	}
	return messageID(res), nil
}

func (s *Sender) retry(ctx context.Context, r domain.Queued, after time.Duration, why, reason string) {
	// A row put back for pacing was not tried: its attempts, which set the
	// backoff after a failure, count only calls to Telegram.
	tried := reason != "paced" && reason != "limiter"
	if err := s.save(ctx, "return outbox row", r.ID, func(ctx context.Context) error {
		return s.store.Retry(ctx, r.ID, r.Token, after, why, tried)
	}); err != nil {
		s.log.Error("return outbox row", "row", r.ID, "err", err)
		return
	}
	s.m.retried.WithLabelValues(r.Kind, reason).Inc()
}

// saveRetries are the waits between attempts of a row's closing mark the
// database refused, as River retries a job's completion (1, 2, 4 s).
var saveRetries = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}

// save runs a row's closing mark until the database answers, at most
// len(saveRetries)+1 times, each attempt with a deadline of its own and
// even when ctx has ended (stopping must not leave the row claimed). The
// marks name the claim token, so one that landed before its answer was
// lost is refused the second time, not applied twice.
func (s *Sender) save(ctx context.Context, what string, id int64, fn func(context.Context) error) error {
	attempt := func() error {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return fn(actx)
	}
	err := attempt()
	for _, d := range saveRetries {
		if err == nil {
			return nil
		}
		s.log.Warn(what+": database refused; retrying", "row", id, "err", err, "retry_in", d)
		if domain.Sleep(context.WithoutCancel(ctx), d) != nil {
			return err
		}
		err = attempt()
	}
	return err
}

func (s *Sender) drop(ctx context.Context, r domain.Queued, why string) {
	ok, err := s.store.End(ctx, r.ID, r.Token, "dropped", why)
	if err != nil {
		s.log.Error("drop outbox row", "row", r.ID, "err", err)
		return
	}
	if ok {
		s.m.dropped.WithLabelValues(r.Kind, "unreachable").Inc()
		s.afterDrop(ctx, r.Kind, r.Ref)
	}
}

func (s *Sender) afterDrop(ctx context.Context, kind string, ref int64) {
	if h := s.hooks[kind]; h != nil && ref != 0 {
		// One hook's panic must not skip the hooks of the chat's other
		// dropped rows; what it failed to move on is left to its own
		// deadline (an offer's expiry).
		_ = s.m.panics.Contain(s.log, "outbox_drop_hook", ref, func() { h(ctx, ref) })
	}
}

// backoff is the wait before the n-th attempt's retry: 1 s doubling to
// MaxBackoff, with jitter.
func (s *Sender) backoff(attempt int) time.Duration {
	d := time.Duration(math.Min(float64(s.cfg.MaxBackoff), float64(time.Second)*math.Pow(2, float64(max(attempt-1, 0)))))
	return jitter(d)
}

// head is the first n characters of s, for a log line.
func head(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:n])) + "…"
}

// SendWithin sends one message soon or never: only if the chat's and the
// bot's budgets have room within d (else ErrPaced, nothing taken), once,
// for what is worth sending only soon, such as an answer to a button
// press, which Telegram takes for 15 seconds and which must not wait long
// behind a busy group's pace (a group gets a message every three seconds).
// A 429 pauses the chat as for any message.
func (s *Sender) SendWithin(ctx context.Context, m domain.Message, d time.Duration) (int, error) {
	wait, err := s.limiter.Take(ctx, m.ChatID, d)
	if err != nil {
		return 0, fmt.Errorf("send to chat %d: %w", m.ChatID, err)
	}
	if wait > 0 {
		return 0, fmt.Errorf("send to chat %d: %w", m.ChatID, ErrPaced)
	}
	id, err := s.call(ctx, domain.Queued{Message: m}, Document{})
	if err != nil {
		if Classify(err) == Flood {
			s.flood(ctx, m.ChatID, err)
		}
		return 0, fmt.Errorf("send to chat %d: %w", m.ChatID, err)
	}
	s.m.sent.WithLabelValues(m.Kind).Inc()
	return id, nil
}

// SendNow sends one message at once (a sender built without a store
// marks and records nothing), through the same limiter and rules as
// the outbox: a direct reply to a user's own command. It waits out pacing
// and 429s (within ctx), retries transient failures a few times, marks an
// unreachable chat, and reports a bad request. The message id of a send.
func (s *Sender) SendNow(ctx context.Context, m domain.Message) (int, error) {
	r := domain.Queued{Message: m}
	if m.Edit {
		r.Target = m.ReplyTo // an edit names its message here
		r.ReplyTo = 0
	}
	for attempt := 1; ; attempt++ {
		if _, err := s.limiter.Take(ctx, m.ChatID, time.Hour); err != nil {
			return 0, fmt.Errorf("send to chat %d: %w", m.ChatID, err)
		}
		id, err := s.call(ctx, r, Document{})
		switch Classify(err) {
		case OK, NotModified:
			s.m.sent.WithLabelValues(m.Kind).Inc()
			return id, nil
		case Flood:
			s.flood(ctx, m.ChatID, err)
		case Transient:
			if attempt >= 3 {
				return 0, fmt.Errorf("send to chat %d: %w", m.ChatID, err)
			}
			if serr := domain.Sleep(ctx, s.backoff(attempt)); serr != nil {
				return 0, fmt.Errorf("send to chat %d: %w", m.ChatID, err)
			}
		case Gone:
			if s.store == nil {
				return 0, fmt.Errorf("send to chat %d: %w: %w", m.ChatID, domain.ErrUnreachable, err)
			}
			if _, merr := s.store.MarkUnreachable(ctx, m.ChatID, err.Error()); merr != nil {
				s.log.Error("mark unreachable", "chat", m.ChatID, "err", merr)
			}
			return 0, fmt.Errorf("send to chat %d: %w: %w", m.ChatID, domain.ErrUnreachable, err)
		default:
			s.m.failed.WithLabelValues(m.Kind).Inc()
			return 0, fmt.Errorf("send to chat %d: %w", m.ChatID, err)
		}
	}
}

type metrics struct {
	sent, failed     *prometheus.CounterVec
	retried, dropped *prometheus.CounterVec
	throttled        prometheus.Counter
	age              prometheus.Histogram
	panics           domain.Panics
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	r := domain.NewRegistrar(reg)
	m := &metrics{
		sent: r.CounterVec("outbox_sent_total", "Messages Telegram accepted, by kind.", "kind"),
		failed: r.CounterVec("outbox_failed_total",
			"Messages failed for good, Telegram refusing them as bad requests or their delivery panicking (bugs), by kind.", "kind"),
		retried: r.CounterVec("outbox_retried_total",
			"Deliveries put back for later, by kind and reason (paced, flood, transient).", "kind", "reason"),
		dropped: r.CounterVec("outbox_dropped_total",
			"Messages dropped, by kind and reason (unreachable, edit_gone, superseded, no_document).", "kind", "reason"),
		throttled: r.Counter("telegram_rate_limited_total", "429 answers from Telegram."),
		age: r.Histogram("outbox_queue_age_seconds",
			"Time from a message's row being written to Telegram accepting it.",
			[]float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800}),
		panics: domain.NewPanics(r),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("delivery metrics: %w", err)
	}
	return m, nil
}
