package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf16"

	"switchboard/bot"
)

// telegram is a minimal Telegram Bot API for the delivery path: sendMessage
// is answered like Telegram does and counted, editMessageText edits a
// message sent before, sendChatAction is checked and counted, getMe names a
// bot, any other method answers {"ok":true,"result":true}. It refuses (400)
// what Telegram would refuse and a broken delivery would send: no chat_id,
// no text, a text over 4096 characters, a reply_markup that is not JSON, a
// reply to message id 0, a chat action without an action, an edit of a
// message it did not send to that chat. Every message's match id is read
// back from its "Applied" button, every analysis proposal's id from its
// "Approve" button, and every reply (reply_to_message_id, or
// reply_parameters.message_id as Bot API 7 sends it) is counted per chat
// and replied-to message, so that the bench can prove each match, each
// proposal, or each memory chat message, was sent once. An edit that
// changes neither the text nor the markup gets Telegram's "message is not
// modified" (counted apart, not as a refusal).
//
// By default it enforces no rate limit. withFloodLimits makes it enforce
// Telegram's flood limits on sendMessage (see floodLimits), answering 429
// with retry_after as Telegram does; withTranscript makes it keep every
// accepted message's text per chat, in order, and when it was accepted.
type telegram struct {
	srv   *httptest.Server
	token string

	flood      *floodState // nil: no flood limits
	transcript bool
	updates    *tgUpdates // nil: getUpdates answers true (withUpdates)

	conns atomic.Int64 // TCP connections accepted

	mu         sync.Mutex
	nextID     int
	messages   int
	perMatch   map[int64]int    // match id → messages carrying its buttons
	perReply   map[replyKey]int // replied-to message → replies (not counted in perMatch)
	unmatched  int              // messages with neither a match id, a proposal id nor a reply
	actions    int              // sendChatAction calls accepted
	rejected   int
	lastReject string
	// perProposal is proposal id → the messages carrying its Approve
	// button (not counted in unmatched).
	perProposal map[int64][]int
	perChat     map[int64]int   // chat id → messages sent there
	sent        map[int]*tgSent // message id → what an edit needs to know
	edits       int             // editMessageText calls accepted
	editedMsgs  int             // distinct messages edited
	notModified int             // edits refused as "message is not modified"

	sendRequests int       // sendMessage requests, whatever the answer
	firstSent    time.Time // when the first sendMessage was accepted
	lastSent     time.Time // when the last sendMessage was accepted
	// texts (withTranscript) is chat id → the texts accepted there, in
	// order; sentAt the acceptance times of every chat, in order.
	texts  map[int64][]string
	sentAt []time.Time
}

// tgOption configures the fake Telegram.
type tgOption func(*telegram)

// withFloodLimits makes the fake enforce l on sendMessage.
func withFloodLimits(l floodLimits) tgOption {
	return func(t *telegram) { t.flood = &floodState{limits: l, chats: map[int64]*gcra{}} }
}

// withTranscript makes the fake keep what each chat was sent, in order.
func withTranscript() tgOption {
	return func(t *telegram) { t.transcript = true }
}

// tgSent is a message the fake sent: its chat, a hash of its text and
// markup (an edit that changes neither is refused, as by Telegram), how
// often it was edited and its text after the last edit.
type tgSent struct {
	chat  int64
	sum   uint64
	edits int
	last  string // "" until edited
}

const maxMessageLen = 4096 // UTF-16 code units, as Telegram counts

// appliedAction is the callback action of a vacancy's "Applied" button
// (bot/vacancies.go); its one id is the match id. approveAction is an
// analysis proposal's "Approve" button (bot/analysis.go); its one id is the
// proposal id. pressed is what the fake reads buttons against.
var (
	appliedAction = bot.NewAction("va", 1)
	approveAction = bot.NewAction("pa", 1)
	pressed       = bot.Actions{appliedAction.Name: appliedAction, approveAction.Name: approveAction}
)

func newTelegram(token string, opts ...tgOption) *telegram {
	t := &telegram{token: token, perMatch: map[int64]int{}, perReply: map[replyKey]int{},
		perProposal: map[int64][]int{}, perChat: map[int64]int{}, sent: map[int]*tgSent{}, texts: map[int64][]string{}}
	for _, o := range opts {
		o(t)
	}
	t.srv = httptest.NewUnstartedServer(http.HandlerFunc(t.serve))
	t.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			t.conns.Add(1)
		}
	}
	t.srv.Start()
	return t
}

func (t *telegram) URL() string { return t.srv.URL }

func (t *telegram) Close() { t.srv.Close() }

// replyKey names the message a reply answers.
type replyKey struct {
	Chat      int64
	MessageID int64
}

// telegramStats is a snapshot of what the fake saw.
type telegramStats struct {
	Messages   int
	Distinct   int // distinct match ids delivered
	Duplicates int // messages beyond the first for a match id
	Replies    int // messages replying to a message (and carrying no match id)
	// ReplyDistinct and ReplyDuplicates are as Distinct and Duplicates,
	// per replied-to message.
	ReplyDistinct   int
	ReplyDuplicates int
	Unmatched       int
	ChatActions     int
	Rejected        int
	LastReject      string
	Conns           int64
	// Proposals counts messages carrying a proposal's Approve button;
	// ProposalDistinct and ProposalDuplicates are as Distinct and
	// Duplicates, per proposal id.
	Proposals          int
	ProposalDistinct   int
	ProposalDuplicates int
	Edits              int // editMessageText calls accepted
	EditedMessages     int // distinct messages edited
	NotModified        int // edits refused because they changed nothing
	// SendRequests counts sendMessage requests, whatever the answer;
	// Throttled the 429s the flood limits answered (ThrottledGlobal and
	// ThrottledChat by the bucket that refused; a refusal by both counts
	// in each) and Early the requests into a scope whose announced
	// retry_after had not passed yet (a sender that obeys keeps it 0).
	SendRequests    int
	Throttled       int
	ThrottledGlobal int
	ThrottledChat   int
	Early           int
	// FirstSent and LastSent are when the first and the last sendMessage
	// were accepted (zero before the first); minus keeps them.
	FirstSent, LastSent time.Time
}

// refused is an error when the fake has refused a call: a run that sent
// it could never finish.
func (t *telegram) refused() error {
	if st := t.stats(); st.Rejected > 0 {
		return fmt.Errorf("fake Telegram refused %d calls (last: %s)", st.Rejected, st.LastReject)
	}
	return nil
}

func (t *telegram) stats() telegramStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := telegramStats{Messages: t.messages, Distinct: len(t.perMatch), ReplyDistinct: len(t.perReply),
		Unmatched: t.unmatched, ChatActions: t.actions, Rejected: t.rejected, LastReject: t.lastReject,
		Conns: t.conns.Load()}
	for _, n := range t.perMatch {
		st.Duplicates += n - 1
	}
	for _, n := range t.perReply {
		st.Replies += n
		st.ReplyDuplicates += n - 1
	}
	st.ProposalDistinct = len(t.perProposal)
	for _, ids := range t.perProposal {
		st.Proposals += len(ids)
		st.ProposalDuplicates += len(ids) - 1
	}
	st.Edits, st.EditedMessages, st.NotModified = t.edits, t.editedMsgs, t.notModified
	st.SendRequests, st.FirstSent, st.LastSent = t.sendRequests, t.firstSent, t.lastSent
	if f := t.flood; f != nil {
		st.Throttled, st.ThrottledGlobal, st.ThrottledChat, st.Early = f.throttled, f.throttledGlobal, f.throttledChat, f.early
	}
	return st
}

// minus is what the fake saw since the snapshot before (the last refusal
// stays the latest).
func (s telegramStats) minus(before telegramStats) telegramStats {
	s.Messages -= before.Messages
	s.Distinct -= before.Distinct
	s.Duplicates -= before.Duplicates
	s.Replies -= before.Replies
	s.ReplyDistinct -= before.ReplyDistinct
	s.ReplyDuplicates -= before.ReplyDuplicates
	s.Unmatched -= before.Unmatched
	s.ChatActions -= before.ChatActions
	s.Rejected -= before.Rejected
	s.Conns -= before.Conns
	s.Proposals -= before.Proposals
	s.ProposalDistinct -= before.ProposalDistinct
	s.ProposalDuplicates -= before.ProposalDuplicates
	s.Edits -= before.Edits
	s.EditedMessages -= before.EditedMessages
	s.NotModified -= before.NotModified
	s.SendRequests -= before.SendRequests
	s.Throttled -= before.Throttled
	s.ThrottledGlobal -= before.ThrottledGlobal
	s.ThrottledChat -= before.ThrottledChat
	s.Early -= before.Early
	return s
}

// transcriptTexts returns a copy of what each chat was sent (withTranscript):
// chat id → the texts in the order the fake accepted them.
func (t *telegram) transcriptTexts() map[int64][]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return cloneLists(t.texts)
}

// sendTimes returns when each message was accepted, oldest first
// (withTranscript).
func (t *telegram) sendTimes() []time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.sentAt)
}

// proposals returns a copy of the proposals posted: proposal id → the
// ids of the messages carrying its buttons.
func (t *telegram) proposals() map[int64][]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return cloneLists(t.perProposal)
}

// cloneLists is a copy of m whose lists are copies too, for a caller to
// read after the lock is released.
func cloneLists[K comparable, V any](m map[K][]V) map[K][]V {
	out := make(map[K][]V, len(m))
	for k, list := range m {
		out[k] = slices.Clone(list)
	}
	return out
}

// messagesTo is the number of messages sent to a chat.
func (t *telegram) messagesTo(chat int64) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.perChat[chat]
}

// edited returns how often message id of chat was edited and its text
// after the last edit; ok is false if the fake never sent it there.
func (t *telegram) edited(chat int64, id int) (edits int, last string, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m, found := t.sent[id]
	if !found || m.chat != chat {
		return 0, "", false
	}
	return m.edits, m.last, true
}

// replies returns a copy of the replies per replied-to message.
func (t *telegram) replies() map[replyKey]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.perReply)
}

// delivered returns a copy of the match ids delivered.
func (t *telegram) delivered() map[int64]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.perMatch)
}

type tgUser struct {
	ID        int64  `json:"id"`
	IsBot     bool   `json:"is_bot"`
	FirstName string `json:"first_name"`
	Username  string `json:"username,omitempty"`
}

type tgChat struct {
	ID   int64  `json:"id"`
	Type string `json:"type"`
}

type tgMessage struct {
	MessageID int    `json:"message_id"`
	Date      int64  `json:"date"`
	Chat      tgChat `json:"chat"`
	From      tgUser `json:"from"`
	Text      string `json:"text"`
}

var benchBot = tgUser{ID: 7000000001, IsBot: true, FirstName: "Switchboard bench", Username: "switchboard_bench_bot"}

func (t *telegram) serve(w http.ResponseWriter, r *http.Request) {
	method, ok := strings.CutPrefix(r.URL.Path, "/bot"+t.token+"/")
	if !ok || method == "" || strings.Contains(method, "/") {
		writeTG(w, http.StatusNotFound, map[string]any{"ok": false, "error_code": 404, "description": "Not Found"})
		return
	}
	method = strings.ToLower(method)
	if method == "getme" {
		writeTG(w, http.StatusOK, map[string]any{"ok": true, "result": benchBot})
		return
	}
	var handle func(http.ResponseWriter, map[string]string)
	switch method {
	case "sendmessage":
		handle = t.sendMessage
	case "editmessagetext":
		handle = t.editMessageText
	case "sendchataction":
		handle = t.sendChatAction
	case "getupdates":
		if t.updates != nil {
			handle = t.updates.getUpdates
		}
	}
	if handle == nil {
		_, _ = io.Copy(io.Discard, r.Body)
		writeTG(w, http.StatusOK, map[string]any{"ok": true, "result": true})
		return
	}
	params, err := readParams(r)
	if err != nil {
		t.reject(w, "Bad Request: "+err.Error())
		return
	}
	handle(w, params)
}

func (t *telegram) sendMessage(w http.ResponseWriter, p map[string]string) {
	t.mu.Lock()
	t.sendRequests++
	t.mu.Unlock()
	chatID, err := strconv.ParseInt(p["chat_id"], 10, 64)
	if p["chat_id"] == "" {
		t.reject(w, "Bad Request: chat_id is empty")
		return
	}
	if err != nil || chatID == 0 {
		t.reject(w, "Bad Request: chat not found")
		return
	}
	text := p["text"]
	if !t.textOK(w, text, "message is too long") {
		return
	}
	buttons, err := readButtons(p)
	if err != nil {
		t.reject(w, "Bad Request: "+err.Error())
		return
	}
	matchID, hasMatch := buttons[appliedAction]
	proposalID, hasProposal := buttons[approveAction]
	replyTo, isReply, err := replyTarget(p)
	if err != nil {
		t.reject(w, "Bad Request: "+err.Error())
		return
	}
	t.mu.Lock()
	now := time.Now()
	if t.flood != nil {
		// The limits apply after every other check, as Telegram's do: a
		// refused request takes no token.
		if retryAfter := t.flood.admit(chatID, now); retryAfter > 0 {
			t.mu.Unlock()
			w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
			writeTG(w, http.StatusTooManyRequests, map[string]any{"ok": false, "error_code": 429,
				"description": fmt.Sprintf("Too Many Requests: retry after %d", retryAfter),
				"parameters":  map[string]any{"retry_after": retryAfter}})
			return
		}
	}
	if t.firstSent.IsZero() {
		t.firstSent = now
	}
	t.lastSent = now
	if t.transcript {
		t.texts[chatID] = append(t.texts[chatID], text)
		t.sentAt = append(t.sentAt, now)
	}
	t.nextID++
	id := t.nextID
	t.messages++
	t.perChat[chatID]++
	t.sent[id] = &tgSent{chat: chatID, sum: contentSum(text, p["reply_markup"])}
	switch {
	case hasMatch:
		t.perMatch[matchID]++
	case hasProposal:
		t.perProposal[proposalID] = append(t.perProposal[proposalID], id)
	case isReply:
		t.perReply[replyKey{Chat: chatID, MessageID: replyTo}]++
	default:
		t.unmatched++
	}
	t.mu.Unlock()
	writeTG(w, http.StatusOK, map[string]any{"ok": true, "result": tgMessage{
		MessageID: id, Date: time.Now().Unix(), Chat: tgChat{ID: chatID, Type: chatType(chatID)}, From: benchBot, Text: text,
	}})
}

// readButtons checks a reply_markup as Telegram would and returns, per
// callback action, the first id of the first button with that action.
func readButtons(p map[string]string) (map[bot.Action]int64, error) {
	raw, ok := p["reply_markup"]
	if !ok {
		return nil, nil
	}
	var kb struct {
		InlineKeyboard [][]struct {
			Text         string `json:"text"`
			CallbackData string `json:"callback_data"`
			URL          string `json:"url"`
		} `json:"inline_keyboard"`
	}
	if err := json.Unmarshal([]byte(raw), &kb); err != nil {
		return nil, errors.New("can't parse reply keyboard markup JSON object")
	}
	out := map[bot.Action]int64{}
	for _, row := range kb.InlineKeyboard {
		for _, b := range row {
			if b.Text == "" {
				return nil, errors.New("text buttons are unallowed in the inline keyboard")
			}
			if len(b.CallbackData) > bot.MaxCallbackData {
				return nil, errors.New("BUTTON_DATA_INVALID")
			}
			if cb, err := pressed.Decode(b.CallbackData); err == nil && len(cb.IDs) > 0 {
				if _, seen := out[cb.Action]; !seen {
					out[cb.Action] = cb.IDs[0]
				}
			}
		}
	}
	return out, nil
}

// contentSum hashes what an edit must change: the text and the markup.
func contentSum(text, markup string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(text))
	h.Write([]byte{0})
	h.Write([]byte(markup))
	return h.Sum64()
}

// editMessageText edits a message the fake sent to that chat, as Telegram
// does for a bot's own message: the edited message comes back.
func (t *telegram) editMessageText(w http.ResponseWriter, p map[string]string) {
	if p["inline_message_id"] != "" {
		t.reject(w, "Bad Request: message to edit not found")
		return
	}
	chatID, err := strconv.ParseInt(p["chat_id"], 10, 64)
	if err != nil || chatID == 0 {
		t.reject(w, "Bad Request: chat not found")
		return
	}
	id, err := strconv.Atoi(p["message_id"])
	if err != nil || id <= 0 {
		t.reject(w, "Bad Request: message identifier is not specified")
		return
	}
	text := p["text"]
	if !t.textOK(w, text, "MESSAGE_TOO_LONG") {
		return
	}
	if _, err := readButtons(p); err != nil {
		t.reject(w, "Bad Request: "+err.Error())
		return
	}
	sum := contentSum(text, p["reply_markup"])
	t.mu.Lock()
	m, ok := t.sent[id]
	switch {
	case !ok || m.chat != chatID:
		t.mu.Unlock()
		t.reject(w, "Bad Request: message to edit not found")
		return
	case m.sum == sum:
		t.notModified++
		t.mu.Unlock()
		writeTG(w, http.StatusBadRequest, map[string]any{"ok": false, "error_code": 400, "description": "Bad Request: message is not modified: " +
			"specified new message content and reply markup are exactly the same as a current content and reply markup of the message"})
		return
	}
	if m.edits == 0 {
		t.editedMsgs++
	}
	m.sum, m.last = sum, text
	m.edits++
	t.edits++
	t.mu.Unlock()
	now := time.Now().Unix()
	writeTG(w, http.StatusOK, map[string]any{"ok": true, "result": tgEdited{tgMessage: tgMessage{
		MessageID: id, Date: now, Chat: tgChat{ID: chatID, Type: chatType(chatID)}, From: benchBot, Text: text,
	}, EditDate: now}})
}

// chatType is what Telegram calls a chat with this id: groups have
// negative ids.
func chatType(id int64) string {
	if id < 0 {
		return "supergroup"
	}
	return "private"
}

// tgEdited is an edited message as the Bot API returns it.
type tgEdited struct {
	tgMessage
	EditDate int64 `json:"edit_date"`
}

// replyTarget reads the message a sendMessage replies to, from
// reply_to_message_id (telebot v3) or reply_parameters (Bot API 7).
func replyTarget(p map[string]string) (int64, bool, error) {
	if raw, ok := p["reply_parameters"]; ok {
		var rp struct {
			MessageID int64 `json:"message_id"`
		}
		if err := json.Unmarshal([]byte(raw), &rp); err != nil {
			return 0, false, errors.New("can't parse reply parameters JSON object")
		}
		if rp.MessageID <= 0 {
			return 0, false, errors.New("message to be replied not found")
		}
		return rp.MessageID, true, nil
	}
	if raw, ok := p["reply_to_message_id"]; ok {
		id, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || id <= 0 {
			return 0, false, errors.New("message to be replied not found")
		}
		return id, true, nil
	}
	return 0, false, nil
}

func (t *telegram) sendChatAction(w http.ResponseWriter, p map[string]string) {
	if chatID, err := strconv.ParseInt(p["chat_id"], 10, 64); err != nil || chatID == 0 {
		t.reject(w, "Bad Request: chat not found")
		return
	}
	if p["action"] == "" {
		t.reject(w, "Bad Request: wrong parameter action in request")
		return
	}
	t.mu.Lock()
	t.actions++
	t.mu.Unlock()
	writeTG(w, http.StatusOK, map[string]any{"ok": true, "result": true})
}

// textOK refuses, as Telegram does, a text that is empty or over one
// message; tooLong is how the method words the latter (sendMessage and
// editMessageText differ).
func (t *telegram) textOK(w http.ResponseWriter, text, tooLong string) bool {
	switch {
	case strings.TrimSpace(text) == "":
		t.reject(w, "Bad Request: message text is empty")
	case len(utf16.Encode([]rune(text))) > maxMessageLen:
		t.reject(w, "Bad Request: "+tooLong)
	default:
		return true
	}
	return false
}

func (t *telegram) reject(w http.ResponseWriter, desc string) {
	t.mu.Lock()
	t.rejected++
	t.lastReject = desc
	t.mu.Unlock()
	writeTG(w, http.StatusBadRequest, map[string]any{"ok": false, "error_code": 400, "description": desc})
}

// readParams reads a Bot API call's parameters the ways Telegram accepts
// them: a JSON object (what telebot sends: every value a string, markup
// included), a urlencoded or a multipart form. Non-string JSON values are
// kept as their JSON text, so an object reply_markup still parses.
func readParams(r *http.Request) (map[string]string, error) {
	out := map[string]string{}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		var m map[string]json.RawMessage
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			return nil, fmt.Errorf("can't parse JSON body: %w", err)
		}
		for k, v := range m {
			var s string
			if json.Unmarshal(v, &s) == nil {
				out[k] = s
			} else {
				out[k] = string(v)
			}
		}
	case "multipart/form-data":
		if err := r.ParseMultipartForm(1 << 20); err != nil {
			return nil, err
		}
		for k, v := range r.MultipartForm.Value {
			out[k] = v[0]
		}
	default:
		if err := r.ParseForm(); err != nil {
			return nil, err
		}
		for k, v := range r.Form {
			out[k] = v[0]
		}
	}
	return out, nil
}

func writeTG(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"ok":false,"error_code":500,"description":"Internal Server Error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// floodLimits are Telegram's flood limits as the fake enforces them with
// withFloodLimits: a token bucket for the bot (all chats together) and one
// for each private chat (chat id > 0); groups are under the global bucket
// only. A zero bucket is no limit.
type floodLimits struct {
	Global, Private tgBucket
}

// tgBucket is a token bucket: Rate tokens a second, at most Burst, full at
// the start; an accepted message takes one.
type tgBucket struct {
	Rate  float64
	Burst int
}

func (b tgBucket) enabled() bool { return b.Rate > 0 && b.Burst > 0 }

// every is the bucket's emission interval: the time one token takes.
func (b tgBucket) every() time.Duration { return time.Duration(float64(time.Second) / b.Rate) }

// telegramFloodLimits are Telegram's published limits: about 30 messages
// a second per bot and one a second per private chat; Telegram lets short
// bursts through (30 for the bot, 3 for a chat).
func telegramFloodLimits() floodLimits {
	return floodLimits{Global: tgBucket{Rate: 30, Burst: 30}, Private: tgBucket{Rate: 1, Burst: 3}}
}

// gcra is one bucket's state as the equivalent GCRA: the theoretical
// arrival time (zero: full), and the end of the last retry_after answered
// for its scope.
type gcra struct {
	tat, until time.Time
}

// wait is how long b needs before it admits a message at now (0: at once).
func (g *gcra) wait(b tgBucket, now time.Time) time.Duration {
	tat := g.tat
	if tat.Before(now) {
		tat = now
	}
	return max(tat.Sub(now)-time.Duration(b.Burst-1)*b.every(), 0)
}

func (g *gcra) take(b tgBucket, now time.Time) {
	if g.tat.Before(now) {
		g.tat = now
	}
	g.tat = g.tat.Add(b.every())
}

// floodState is the fake's limiter; Telegram's mutex guards it.
type floodState struct {
	limits floodLimits
	global gcra
	chats  map[int64]*gcra

	throttled, throttledGlobal, throttledChat, early int
}

// admit applies the limits to a message to chat at now: 0 when every
// bucket admits it (each then gives a token), else the retry_after to
// answer, in whole seconds (rounded up, at least 1) until every refusing
// bucket has a token, and nothing is taken.
func (f *floodState) admit(chat int64, now time.Time) int {
	type scope struct {
		g *gcra
		b tgBucket
	}
	scopes := []scope{{&f.global, f.limits.Global}}
	if chat > 0 && f.limits.Private.enabled() {
		g := f.chats[chat]
		if g == nil {
			g = &gcra{}
			f.chats[chat] = g
		}
		scopes = append(scopes, scope{g, f.limits.Private})
	}
	var longest time.Duration
	early := false
	for i, sc := range scopes {
		if !sc.b.enabled() {
			continue
		}
		if now.Before(sc.g.until) {
			early = true
		}
		if w := sc.g.wait(sc.b, now); w > 0 {
			longest = max(longest, w)
			if i == 0 {
				f.throttledGlobal++
			} else {
				f.throttledChat++
			}
		}
	}
	if early {
		f.early++
	}
	if longest == 0 {
		for _, sc := range scopes {
			if sc.b.enabled() {
				sc.g.take(sc.b, now)
			}
		}
		return 0
	}
	retryAfter := max(int((longest+time.Second-1)/time.Second), 1)
	for _, sc := range scopes {
		if sc.b.enabled() && sc.g.wait(sc.b, now) > 0 {
			sc.g.until = now.Add(time.Duration(retryAfter) * time.Second)
		}
	}
	f.throttled++
	return retryAfter
}
