package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"switchboard/domain"
	"switchboard/internal/clip"
)

// Outbox is the outbox aggregate: every message the bot will send, written
// with the state change that causes it (or on its own through Enqueue),
// claimed by the sender (bot/delivery), and settled delivered, retried or
// ended; the chats Telegram refuses are kept here too.
type Outbox struct{ *db }

// Outbox is the store of the outbox's messages.
func (s *Store) Outbox() *Outbox { return &Outbox{s.db} }

// outboxBody is a row's body column: what a Bot API call needs beyond the chat.
type outboxBody struct {
	Text    string            `json:"text"`
	Buttons [][]domain.Button `json:"buttons,omitempty"`
	ReplyTo int               `json:"reply_to,omitempty"`
	IfGone  string            `json:"if_gone,omitempty"`
	Photo   string            `json:"photo,omitempty"`
	// Document, Ephemeral and OnlyFor: see domain.Message.
	Document  string `json:"document,omitempty"`
	Ephemeral bool   `json:"ephemeral,omitempty"`
	OnlyFor   int64  `json:"only_for,omitempty"`
	Topic     string `json:"topic,omitempty"`
	Thread    int    `json:"thread,omitempty"`
	Rich      string `json:"rich,omitempty"`
	// Location: see domain.Message.
	Location *domain.Location `json:"location,omitempty"`
}

// keptBody is what a row's body keeps once it has ended: an ephemeral
// row's text and buttons go, so nothing of what it said outlives it.
const keptBody = `CASE WHEN (body->>'ephemeral')::boolean THEN jsonb_build_object('text', '', 'ephemeral', true) ELSE body END`

// Enqueue writes messages to the outbox on their own (a state
// change with nothing to write alongside, or a test).
func (s *Outbox) Enqueue(ctx context.Context, msgs ...domain.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	sql, args, err := insertMessagesSQL(msgs)
	if err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("enqueue %d messages: %w", len(msgs), err)
	}
	return nil
}

// EnqueueAsync writes messages to the outbox that no state change causes
// (the memory chat). Unlike Enqueue, its commit does not wait for
// the disk: it serves intake, where only the user's message itself is
// worth a flush (PipelineRuns.Submit).
func (s *Outbox) EnqueueAsync(ctx context.Context, msgs []domain.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	rows, err := queueArgs(msgs)
	if err != nil {
		return fmt.Errorf("queue %d messages: %w", len(msgs), err)
	}
	if _, err := s.pool.Exec(ctx, queueMessages, rows...); err != nil {
		return fmt.Errorf("queue %d messages: %w", len(msgs), err)
	}
	return nil
}

// enqueueTx writes messages in the caller's transaction, so they exist
// exactly when the state change that causes them commits.
func enqueueTx(ctx context.Context, tx pgx.Tx, msgs []domain.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	sql, args, err := insertMessagesSQL(msgs)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("enqueue %d messages: %w", len(msgs), err)
	}
	return nil
}

// execTelling runs sql in a transaction of its own and, if it changed a
// row, writes msgs to the outbox in the same transaction: whether it did.
// What a change tells is written with the change, once, or not at all.
func (s *db) execTelling(ctx context.Context, msgs []domain.Message, sql string, args ...any) (bool, error) {
	told := false
	err := s.withTx(ctx, func(tx pgx.Tx) (err error) {
		told, err = execTellingTx(ctx, tx, msgs, sql, args...)
		return err
	})
	return told && err == nil, err
}

// execTellingTx is execTelling in the caller's transaction tx.
func execTellingTx(ctx context.Context, tx pgx.Tx, msgs []domain.Message, sql string, args ...any) (bool, error) {
	tag, err := tx.Exec(ctx, sql, args...)
	if err != nil || tag.RowsAffected() == 0 {
		return false, err
	}
	return true, enqueueTx(ctx, tx, msgs)
}

// queueRows is a CTE that writes outbox rows (the columns and the order
// of insertOutboxSQL, from the parallel arrays queueArgs makes, numbered
// from $first) once for the row the CTE named from returns, and none when
// it returns nothing: the rows ride in the statement of the state change
// that causes them, so they are written exactly when it happens.
func queueRows(first int, from string) string {
	p := func(i int) string { return fmt.Sprintf("$%d", first+i) }
	return `queued AS (
    INSERT INTO outbox (chat_id, kind, ref, msg_key, edit, body, lane, spacing_ms, merge)
    SELECT q.chat_id, q.kind, q.ref, q.msg_key, q.edit, q.body, q.lane, q.spacing_ms, q.merge
    FROM ` + from + `, unnest(` + p(0) + `::bigint[], ` + p(1) + `::text[], ` + p(2) + `::bigint[], ` + p(3) + `::text[], ` +
		p(4) + `::bool[], ` + p(5) + `::jsonb[], ` + p(6) + `::text[], ` + p(7) + `::int[], ` + p(8) + `::bool[])
        WITH ORDINALITY AS q(chat_id, kind, ref, msg_key, edit, body, lane, spacing_ms, merge, n)
    ORDER BY q.n
)`
}

// queueArgs are queueRows' nine arrays, validated as the outbox's own
// inserts validate them. A held message (Message.Delay) or one with an
// origin does not ride in a state change's statement: queueRows writes
// neither, and such a message goes through the outbox's own insert.
func queueArgs(msgs []domain.Message) ([]any, error) {
	for i, m := range msgs {
		if m.Delay != 0 || m.Origin != "" {
			return nil, fmt.Errorf("message %d is held or has an origin: not written with a state change", i)
		}
	}
	_, args, err := insertMessagesSQL(msgs)
	if err != nil {
		return nil, err
	}
	return args[:9], nil
}

// insertOutboxSQL inserts rows from parallel arrays; WITH ORDINALITY keeps
// the caller's order in the ids, which is the order of delivery. An edit
// coalesces with what waits for its message (the latest state wins, and a
// message edited on every batch of a run costs its chat one delivery, not
// one per batch): pending edits of its key nobody has claimed are deleted,
// and a send of its key still waiting in the queue takes its text and
// buttons instead of a row being added. Of several edits of one key in
// the batch only the last is written. Claimed rows are left alone: they
// may be on their way to Telegram. Joins, not a subquery per row: a
// watchdog sweep writes an edit per expired offer in one batch, and a
// correlated lookup in latest made it quadratic (10 000 edits took 9 s).
const insertOutboxSQL = `
WITH m AS (
    SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::bool[], $6::jsonb[],
                         $7::text[], $8::int[], $9::bool[], $10::bigint[], $11::text[])
         WITH ORDINALITY AS m(chat_id, kind, ref, msg_key, edit, body, lane, spacing_ms, merge, delay_us, origin, n)
), latest AS (
    SELECT DISTINCT ON (chat_id, msg_key) chat_id, msg_key, body, n FROM m WHERE edit AND msg_key <> '' ORDER BY chat_id, msg_key, n DESC
), waiting AS (
    -- SKIP LOCKED: a row locked now is being claimed or settled, so it is
    -- on its way and must not change; and the writer must not wait for it,
    -- since its settling may wait for a workflow row this writer holds (a
    -- delivered offer records its message id on the offer an expiry is
    -- changing): that wait would be a deadlock.
    -- LATERAL: one index lookup (outbox_pending_key) per edit written, and
    -- none for a batch without edits, whatever plan the statement gets;
    -- a join let a generic plan read every pending row of the table.
    SELECT o.id, o.edit, l.body, l.n FROM latest l, LATERAL (
        SELECT x.id, x.edit FROM outbox x
        WHERE x.chat_id = l.chat_id AND x.msg_key = l.msg_key AND x.state = 'pending' AND x.msg_key <> ''
          AND (x.claimed_until IS NULL OR x.claimed_until < now())
        FOR UPDATE SKIP LOCKED) o
), stale AS (
    DELETE FROM outbox o USING waiting w WHERE o.id = w.id AND w.edit
), folded AS (
    -- A live location's move takes the waiting map's place; its stop
    -- leaves the map where it is, sent still.
    UPDATE outbox o SET body = (o.body - 'text' - 'buttons' - 'rich' - 'location')
                              || jsonb_strip_nulls(jsonb_build_object('text', w.body->'text', 'buttons', w.body->'buttons', 'rich', w.body->'rich',
                                     'location', COALESCE(CASE WHEN (w.body->'location'->>'stop')::boolean
                                                               THEN (o.body->'location') - 'live' - 'heading'
                                                               ELSE w.body->'location' END, o.body->'location')))
    FROM waiting w
    WHERE o.id = w.id AND NOT w.edit
    RETURNING w.n
)
INSERT INTO outbox (chat_id, kind, ref, msg_key, edit, body, lane, spacing_ms, merge, not_before, origin)
SELECT m.chat_id, m.kind, m.ref, m.msg_key, m.edit, m.body, m.lane, m.spacing_ms, m.merge,
       now() + m.delay_us * interval '1 microsecond', m.origin
FROM m LEFT JOIN latest l ON l.chat_id = m.chat_id AND l.msg_key = m.msg_key
WHERE (NOT m.edit OR m.n = l.n)
  AND NOT EXISTS (SELECT 1 FROM folded f WHERE f.n = m.n)
ORDER BY m.n
` + onOrigin

func insertMessagesSQL(msgs []domain.Message) (string, []any, error) {
	chats := make([]int64, len(msgs))
	kinds := make([]string, len(msgs))
	refs := make([]int64, len(msgs))
	keys := make([]string, len(msgs))
	edits := make([]bool, len(msgs))
	bodies := make([]string, len(msgs))
	lanes := make([]string, len(msgs))
	spacing := make([]int32, len(msgs))
	merges := make([]bool, len(msgs))
	delays := make([]int64, len(msgs))
	origins := make([]*string, len(msgs))
	for i, m := range msgs {
		if m.ChatID == 0 || m.Kind == "" || (m.Edit && m.Key == "") {
			return "", nil, fmt.Errorf("enqueue message %d: chat, kind and (for an edit) key are required", i)
		}
		if m.Merge && (m.Edit || len(m.Buttons) > 0 || m.Lane == "" || m.Photo != "") {
			return "", nil, fmt.Errorf("enqueue message %d: only a text send without buttons in its own lane merges", i)
		}
		if (m.Photo != "" || m.Document != "") && m.Edit {
			return "", nil, fmt.Errorf("enqueue message %d: a photo or document is never an edit", i)
		}
		if m.Document != "" && (m.Photo != "" || m.Merge) {
			return "", nil, fmt.Errorf("enqueue message %d: a document is sent alone", i)
		}
		if m.Delay < 0 || m.Delay > 0 && (m.Lane == "" || m.Edit || m.Merge) {
			return "", nil, fmt.Errorf("enqueue message %d: only a send in a lane of its own is held", i)
		}
		if m.Rich != "" && (m.Photo != "" || m.Document != "" || m.Merge || utf16Len(m.Text) > mergeLimit) {
			return "", nil, fmt.Errorf("enqueue message %d: a rich message is one message of text", i)
		}
		if l := m.Location; l != nil && (m.Text != "" || m.Photo != "" || m.Document != "" || m.Rich != "" || m.Merge ||
			l.Stop && (!m.Edit || m.IfGone == domain.IfGoneSend)) {
			return "", nil, fmt.Errorf("enqueue message %d: a location is a message of its own, stopped only by an edit of one that is there", i)
		}
		if m.MarkupOnly {
			return "", nil, fmt.Errorf("enqueue message %d: an edit of the buttons alone goes at once, never through the outbox", i)
		}
		b, err := json.Marshal(outboxBody{Text: m.Text, Buttons: m.Buttons, ReplyTo: m.ReplyTo, IfGone: m.IfGone, Photo: m.Photo,
			Document: m.Document, Ephemeral: m.Ephemeral, OnlyFor: m.OnlyFor, Topic: m.Topic, Thread: m.Thread, Rich: m.Rich, Location: m.Location})
		if err != nil {
			return "", nil, fmt.Errorf("enqueue message %d: %w", i, err)
		}
		chats[i], kinds[i], refs[i], keys[i], edits[i], bodies[i] = m.ChatID, m.Kind, m.Ref, m.Key, m.Edit, string(b)
		lanes[i], spacing[i], merges[i] = m.Lane, int32(min(m.Every.Milliseconds(), math.MaxInt32)), m.Merge
		delays[i] = m.Delay.Microseconds()
		if m.Origin != "" {
			origins[i] = &msgs[i].Origin
		}
	}
	sql := insertOutboxSQL
	if !slices.Contains(edits, true) {
		sql = insertSendsSQL
	}
	return sql, []any{chats, kinds, refs, keys, edits, bodies, lanes, spacing, merges, delays, origins}, nil
}

// insertSendsSQL is insertOutboxSQL for messages none of which is an edit,
// which fold with nothing: most of what workflows write (every card).
// PostgreSQL plans insertOutboxSQL anew at each call, and its planning
// cost more than its execution; this one it plans once a connection.
const insertSendsSQL = `
INSERT INTO outbox (chat_id, kind, ref, msg_key, edit, body, lane, spacing_ms, merge, not_before, origin)
SELECT m.chat_id, m.kind, m.ref, m.msg_key, m.edit, m.body, m.lane, m.spacing_ms, m.merge,
       now() + m.delay_us * interval '1 microsecond', m.origin
FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::bool[], $6::jsonb[],
            $7::text[], $8::int[], $9::bool[], $10::bigint[], $11::text[])
     WITH ORDINALITY AS m(chat_id, kind, ref, msg_key, edit, body, lane, spacing_ms, merge, delay_us, origin, n)
ORDER BY m.n
` + onOrigin

// onOrigin skips a message whose origin was written before: a reply the
// same update's first run wrote (domain.Message.Origin).
const onOrigin = `ON CONFLICT (origin) WHERE origin IS NOT NULL DO NOTHING`

// claimOutboxSQL claims the due heads of the outbox's lanes (ClaimOutbox).
const claimOutboxSQL = `
WITH RECURSIVE heads AS (
    -- The oldest pending row of each lane, by a skip scan of outbox_pending
    -- (chat_id, lane, id): one index descent per lane with pending rows,
    -- however many rows wait behind the heads, and no plan that depends
    -- on the table's statistics (DISTINCT ON would read every pending row
    -- per claim, and a table filled faster than autovacuum analyzes it
    -- could get a nested loop over them). Each descent reads the head's
    -- row, so the columns cand filters on come with it: probing each head
    -- again by its key read every lane twice.
    (SELECT chat_id, lane, id, not_before, claimed_until, edit, msg_key, spacing_ms FROM outbox
     WHERE state = 'pending' ORDER BY chat_id, lane, id LIMIT 1)
    UNION ALL
    SELECT n.chat_id, n.lane, n.id, n.not_before, n.claimed_until, n.edit, n.msg_key, n.spacing_ms FROM heads h, LATERAL (
        SELECT x.chat_id, x.lane, x.id, x.not_before, x.claimed_until, x.edit, x.msg_key, x.spacing_ms FROM outbox x
        WHERE x.state = 'pending' AND (x.chat_id, x.lane) > (h.chat_id, h.lane)
        ORDER BY x.chat_id, x.lane, x.id LIMIT 1) n
), cand AS (
    -- The due heads, the oldest first.
    SELECT h.chat_id, h.lane, h.id, h.not_before FROM heads h
    WHERE h.not_before <= now()
      AND (h.claimed_until IS NULL OR h.claimed_until < now())
      AND (h.lane = '' OR NOT h.edit OR NOT EXISTS (
          SELECT 1 FROM outbox s WHERE s.chat_id = h.chat_id AND s.state = 'pending' AND NOT s.edit AND s.msg_key = h.msg_key))
      AND (h.spacing_ms = 0 OR NOT EXISTS (
          SELECT 1 FROM outbox t WHERE t.chat_id = h.chat_id AND t.lane = h.lane AND t.state = 'sent' AND t.spacing_ms > 0
            AND t.done_at > now() - h.spacing_ms * interval '1 millisecond'))
    ORDER BY h.not_before, h.id
    LIMIT $1
), due AS (
    -- Locked one by one, skipping a head another sender holds, and checked
    -- again once locked: it may have been claimed or settled since.
    SELECT l.id FROM cand, LATERAL (
        SELECT o.id FROM outbox o
        WHERE o.chat_id = cand.chat_id AND o.lane = cand.lane AND o.id = cand.id AND o.state = 'pending'
          AND (o.claimed_until IS NULL OR o.claimed_until < now())
        FOR UPDATE SKIP LOCKED) l
)
UPDATE outbox o SET claimed_until = now() + $2 * interval '1 microsecond',
    claim_token = gen_random_uuid(), claimed_by = NULLIF($3, ''), attempts = o.attempts + 1
FROM due WHERE o.id = due.id
RETURNING o.id, o.chat_id, o.kind, o.ref, o.msg_key, o.edit, o.body, o.attempts, o.claim_token::text, o.created_at,
    o.lane, o.spacing_ms, o.merge, o.claimed_until,
    COALESCE((SELECT t.message_id FROM outbox t
              WHERE o.edit AND t.chat_id = o.chat_id AND t.msg_key = o.msg_key AND t.msg_key <> ''
                AND t.message_id IS NOT NULL
              ORDER BY t.id DESC LIMIT 1), 0),
    EXISTS (SELECT 1 FROM unreachable_chats u WHERE u.chat_id = o.chat_id),
    o.edit AND EXISTS (SELECT 1 FROM outbox n
              WHERE n.chat_id = o.chat_id AND n.state = 'pending' AND n.edit AND n.msg_key = o.msg_key AND n.id > o.id)`

// scanClaimed reads one row claimOutboxSQL returned, and its claim's end.
func scanClaimed(rows pgx.Rows) (domain.Queued, time.Time, error) {
	var r domain.Queued
	var until time.Time
	var raw []byte
	var target int64
	var spacing int32
	if err := rows.Scan(&r.ID, &r.ChatID, &r.Kind, &r.Ref, &r.Key, &r.Edit, &raw, &r.Attempts, &r.Token,
		&r.CreatedAt, &r.Lane, &spacing, &r.Merge, &until, &target, &r.Unreachable, &r.Superseded); err != nil {
		return r, until, fmt.Errorf("claim outbox: %w", err)
	}
	r.Every = time.Duration(spacing) * time.Millisecond
	r.Merged = 1
	var b outboxBody
	if err := json.Unmarshal(raw, &b); err != nil {
		return r, until, fmt.Errorf("claim outbox: row %d body: %w", r.ID, err)
	}
	r.Text, r.Buttons, r.ReplyTo, r.IfGone, r.Photo = b.Text, b.Buttons, b.ReplyTo, b.IfGone, b.Photo
	r.Document, r.Ephemeral, r.OnlyFor, r.Topic, r.Thread, r.Rich = b.Document, b.Ephemeral, b.OnlyFor, b.Topic, b.Thread, b.Rich
	r.Location = b.Location
	r.Target = int(target)
	return r, until, nil
}

// Claim claims up to n rows that are due, at most one per lane of a
// chat and only the oldest pending row of that lane, so rows of one lane go
// out in the order they were written even across replicas: the next row
// becomes claimable only once the one before it is done. A lane's edit
// waits for its message's send, and a paced lane (Every) for its interval
// since its last delivery. A merging row claims the merging rows behind it
// that fit one message with it (under its claim token). A claim lasts
// lease; a sender that dies leaves its rows to be claimed again after it,
// or, once its claimer's liveness lock is gone, sooner (Liveness).
func (s *Outbox) Claim(ctx context.Context, claimer string, n int, lease time.Duration) ([]domain.Queued, error) {
	rows, err := s.pool.Query(ctx, claimOutboxSQL, n, micros(lease), claimer)
	if err != nil {
		return nil, fmt.Errorf("claim outbox: %w", err)
	}
	defer rows.Close()
	var out []domain.Queued
	var untils []time.Time
	for rows.Next() {
		r, until, err := scanClaimed(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
		untils = append(untils, until)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim outbox: %w", err)
	}
	rows.Close()
	for i := range out {
		if out[i].Merge && !out[i].Unreachable {
			if err := s.claimFollowers(ctx, &out[i], claimer, untils[i]); err != nil {
				// The head alone is still a valid delivery.
				return out, fmt.Errorf("claim outbox: %w", err)
			}
		}
	}
	return out, nil
}

// mergeLimit is the length (UTF-16 code units, as Telegram counts) of a
// merged message: Telegram's 4096.
const mergeLimit = 4096

// mergeEntities is the most opening tags a merged message holds: Telegram
// keeps 100 formatting entities of a message and shows the rest as plain
// text without a word (bot.MaxMessageEntities).
const mergeEntities = 100

// openingTags counts the entities an HTML text asks for: in text the bot
// rendered every '<' of the text itself is escaped, so each raw one is a
// tag, and each tag that is not a closing one opens an entity.
func openingTags(html string) int {
	return strings.Count(html, "<") - strings.Count(html, "</")
}

// claimFollowers adds to a claimed merging head the merging rows right
// behind it in its lane that fit one message with it, claimed under the
// head's token so they are settled with it; each keeps its own line. The
// head is its lane's only claimable row, so nobody else claims these
// while the head's claim lasts.
func (s *Outbox) claimFollowers(ctx context.Context, head *domain.Queued, claimer string, until time.Time) error {
	rows, err := s.pool.Query(ctx, `
SELECT id, merge AND NOT edit, body->>'text' FROM outbox
WHERE chat_id = $1 AND lane = $2 AND state = 'pending' AND id > $3
ORDER BY id LIMIT 200`, head.ChatID, head.Lane, head.ID)
	if err != nil {
		return fmt.Errorf("followers of row %d: %w", head.ID, err)
	}
	var ids []int64
	var texts []string
	size, tags := utf16Len(head.Text), openingTags(head.Text)
	stop := false
	var id int64
	var merge bool
	var text string
	_, err = pgx.ForEachRow(rows, []any{&id, &merge, &text}, func() error {
		// Only an unbroken run behind the head joins it, and only while
		// it fits: the lines keep their order.
		if stop || !merge || size+1+utf16Len(text) > mergeLimit || tags+openingTags(text) > mergeEntities {
			stop = true
			return nil
		}
		size += 1 + utf16Len(text)
		tags += openingTags(text)
		ids = append(ids, id)
		texts = append(texts, text)
		return nil
	})
	if err != nil {
		return fmt.Errorf("followers of row %d: %w", head.ID, err)
	}
	if len(ids) == 0 {
		return nil
	}
	tag, err := s.pool.Exec(ctx, `
UPDATE outbox SET claimed_until = $3, claim_token = $2::uuid, claimed_by = NULLIF($4, '')
WHERE id = ANY($1) AND state = 'pending' AND (claimed_until IS NULL OR claimed_until < now())`, ids, head.Token, until, claimer)
	if err != nil {
		return fmt.Errorf("claim followers of row %d: %w", head.ID, err)
	}
	if int(tag.RowsAffected()) != len(ids) {
		// Another sender's claim of the same run (after a lapsed lease):
		// give these back and deliver the head alone.
		_, err := s.pool.Exec(ctx, `UPDATE outbox SET claimed_until = NULL, claim_token = NULL
WHERE id = ANY($1) AND claim_token = $2::uuid`, ids, head.Token)
		return err
	}
	head.Text += "\n" + strings.Join(texts, "\n")
	head.Merged += len(ids)
	return nil
}

// utf16Len is a text's length as Telegram counts it.
func utf16Len(s string) int { return clip.UTF16Len(s) }

// deliveryHooks lists, per message kind, what the delivery of a row of that
// kind does to the workflow that wrote it (a card makes its match
// SENT_TO_USER, an offer records its message id). Each hook is written beside
// its workflow's table; this is the one place that lists them, so the
// delivery code itself names no workflow's table. A hook is one or more
// named CTEs (named after their kind, so they never clash) that read the row
// just marked sent from "done" (kind, ref, chat_id, message_id, edit) and
// keep to rows of their kind: they become part of the one statement that
// marks the row sent, so a delivery and its consequence commit together in
// one round trip. Rows of a kind with no hook just settle.
var deliveryHooks = map[string]string{
	domain.KindVacancy:  vacancySentHook,
	domain.KindDigest:   digestSentHook,
	domain.KindOffer:    offerSentHook,
	domain.KindProposal: proposalSentHook,
	domain.KindProgress: progressSentHook,
	domain.KindCustomer: customerSentHook,
	domain.KindRelay:    relaySentHook,
}

// deliveredSQL marks a row sent and runs its delivery hook in the same
// statement; built once: one statement per kind with only that kind's hook, and under "" one with every
// hook, for a merged delivery (whose rows may be of several kinds). Each
// UPDATE in a statement opens its table and every index of it at each
// execution, whether or not a row of its kind comes by: carrying every
// workflow's hooks in every mark made a card's mark open offers,
// proposals, runs and digests too.
var deliveredSQL = sync.OnceValue(func() map[string]string {
	out := make(map[string]string, len(deliveryHooks)+1)
	kinds := make([]string, 0, len(deliveryHooks))
	for k, hook := range deliveryHooks {
		out[k] = markSentSQL([]string{strings.TrimSpace(hook)})
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	all := make([]string, len(kinds))
	for i, k := range kinds {
		all[i] = strings.TrimSpace(deliveryHooks[k])
	}
	out[""] = markSentSQL(all)
	return out
})

// plainMarkSQL marks a row of a kind without a hook.
var plainMarkSQL = sync.OnceValue(func() string { return markSentSQL(nil) })

// markSentSQL is a mark followed by hooks.
func markSentSQL(hooks []string) string {
	var b strings.Builder
	b.WriteString(`
WITH done AS (
    UPDATE outbox SET state = 'sent', done_at = now(), message_id = NULLIF($3, 0),
        claimed_until = NULL, last_error = '', body = ` + keptBody + `
    WHERE claim_token = $2::uuid AND state = 'pending' AND id >= $1
    RETURNING kind, ref, chat_id, message_id, edit
)`)
	for _, h := range hooks {
		b.WriteString(", ")
		b.WriteString(h)
	}
	// The mark does not wait for the disk: lost in a database crash, the
	// row is sent again once its claim lapses (a duplicate, never a loss),
	// as the memory chat's delivery mark always was.
	b.WriteString("\nSELECT count(*) FROM done, " + asyncCommit)
	return b.String()
}

// Delivered marks a claimed row (and the rows merged into its
// message) sent with the message id Telegram returned (0 for an edit) and
// runs their kind's delivery hook; false if the claim was lost meanwhile.
func (s *Outbox) Delivered(ctx context.Context, r domain.Queued, messageID int) (bool, error) {
	// A merged delivery takes every hook (its rows may be of several
	// kinds); a kind without a hook just settles.
	hook, ok := deliveredSQL()[r.Kind]
	sql := plainMarkSQL()
	switch {
	case r.Merged > 1:
		sql = deliveredSQL()[""]
	case ok:
		sql = hook
	}
	var n int
	if err := s.pool.QueryRow(ctx, sql, r.ID, r.Token, messageID).Scan(&n); err != nil {
		return false, fmt.Errorf("mark outbox row %d delivered: %w", r.ID, err)
	}
	return n >= 1, nil
}

// Extend lengthens a claim still held by token to lease from
// now, for a delivery that takes longer than a message (a document's
// upload); false if the claim was lost.
func (s *Outbox) Extend(ctx context.Context, id int64, token string, lease time.Duration) (bool, error) {
	tag, err := s.pool.Exec(ctx, `
UPDATE outbox SET claimed_until = now() + $3 * interval '1 microsecond'
WHERE id = $1 AND claim_token = $2::uuid AND state = 'pending'`, id, token, micros(lease))
	if err != nil {
		return false, fmt.Errorf("extend claim of outbox row %d: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Retry returns a claimed row to the queue, due again after after;
// why is kept for /status and the logs, cleaned: it may quote what
// Telegram or a document hook said, and a mark refused for a NUL in it
// would leave the row to be claimed and sent again after every lease.
// tried false (the row was only paced) takes back the attempt its claim
// counted.
func (s *Outbox) Retry(ctx context.Context, id int64, token string, after time.Duration, why string, tried bool) error {
	_, err := s.pool.Exec(ctx, `
UPDATE outbox SET claimed_until = NULL, claim_token = NULL,
    not_before = now() + $3 * interval '1 microsecond',
    last_error = CASE WHEN $5 THEN left($4, 500) ELSE last_error END,
    attempts = CASE WHEN $5 THEN attempts ELSE attempts - 1 END
WHERE claim_token = $2::uuid AND state = 'pending' AND id >= $1`, id, token, micros(after), domain.CleanText(why), tried)
	if err != nil {
		return fmt.Errorf("retry outbox row %d: %w", id, err)
	}
	return nil
}

// End ends a claimed row without delivery: state is "dropped" (the
// recipient is unreachable, an edit lost its message) or "failed" (Telegram
// refused the request itself: a bug). False if the claim was lost.
func (s *Outbox) End(ctx context.Context, id int64, token, state, why string) (bool, error) {
	if state != "dropped" && state != "failed" {
		return false, fmt.Errorf("end outbox row %d: bad state %q", id, state)
	}
	tag, err := s.pool.Exec(ctx, `
UPDATE outbox SET state = $3, done_at = now(), claimed_until = NULL, last_error = left($4, 500),
    body = `+keptBody+`
WHERE claim_token = $2::uuid AND state = 'pending' AND id >= $1`, id, token, state, domain.CleanText(why))
	if err != nil {
		return false, fmt.Errorf("end outbox row %d: %w", id, err)
	}
	return tag.RowsAffected() >= 1, nil
}

// MarkUnreachable records that Telegram refuses chatID for good and drops
// every pending row of it (the caller's claimed one included), returning
// them so whatever waits on them can move on.
func (s *Outbox) MarkUnreachable(ctx context.Context, chatID int64, reason string) ([]domain.Dropped, error) {
	const q = `
WITH dropped AS (
    UPDATE outbox SET state = 'dropped', done_at = now(), claimed_until = NULL, last_error = left($2, 500),
        body = ` + keptBody + `
    WHERE chat_id = $1 AND state = 'pending'
    RETURNING id, kind, ref
), mark AS (
    INSERT INTO unreachable_chats (chat_id, reason, dropped)
    VALUES ($1, left($2, 200), (SELECT count(*) FROM dropped))
    ON CONFLICT (chat_id) DO UPDATE SET dropped = unreachable_chats.dropped + EXCLUDED.dropped
)
SELECT id, kind, ref FROM dropped ORDER BY id`
	rows, err := s.pool.Query(ctx, q, chatID, domain.CleanText(reason))
	if err != nil {
		return nil, fmt.Errorf("mark chat %d unreachable: %w", chatID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.Dropped, error) {
		var d domain.Dropped
		return d, r.Scan(&d.ID, &d.Kind, &d.Ref)
	})
	if err != nil {
		return nil, fmt.Errorf("mark chat %d unreachable: %w", chatID, err)
	}
	return out, nil
}

// ClearUnreachable forgets the mark of chats that wrote to the bot again.
func (s *Outbox) ClearUnreachable(ctx context.Context, chatIDs ...int64) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM unreachable_chats WHERE chat_id = ANY($1)`, chatIDs); err != nil {
		return fmt.Errorf("clear unreachable chats: %w", err)
	}
	return nil
}

// Unreachable reports whether a chat is marked unreachable.
func (s *Outbox) Unreachable(ctx context.Context, chatID int64) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM unreachable_chats WHERE chat_id = $1)`, chatID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("unreachable chat %d: %w", chatID, err)
	}
	return ok, nil
}

// RecordThrottle notes a 429 Telegram answered, for /status's count over
// the last hour across replicas.
func (s *Outbox) RecordThrottle(ctx context.Context, chatID int64, retryAfter time.Duration) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO outbox_throttles (chat_id, retry_after_ms) VALUES ($1, $2)`,
		chatID, retryAfter.Milliseconds())
	if err != nil {
		return fmt.Errorf("record throttle: %w", err)
	}
	return nil
}

// Stats is the delivery's state as /status shows it.
type OutboxStats struct {
	Pending     int64
	OldestAge   time.Duration // of the oldest pending row; 0 when none
	Failed      int64         // rows Telegram refused as bad requests, all time
	Dropped     int64         // rows dropped (unreachable recipients, lost edits), all time
	Throttled   int64         // 429 answers in the last hour
	Unreachable int64         // chats marked unreachable
}

// Stats reads the backlog and the counters /status shows.
func (s *Outbox) Stats(ctx context.Context) (OutboxStats, error) {
	var st OutboxStats
	var oldest float64
	err := s.pool.QueryRow(ctx, `
SELECT
    (SELECT count(*) FROM outbox WHERE state = 'pending'),
    COALESCE((SELECT extract(epoch FROM now() - min(created_at)) FROM outbox WHERE state = 'pending'), 0),
    (SELECT count(*) FROM outbox WHERE state = 'failed'),
    (SELECT count(*) FROM outbox WHERE state = 'dropped'),
    (SELECT count(*) FROM outbox_throttles WHERE at > now() - interval '1 hour'),
    (SELECT count(*) FROM unreachable_chats)`).Scan(&st.Pending, &oldest, &st.Failed, &st.Dropped, &st.Throttled, &st.Unreachable)
	if err != nil {
		return OutboxStats{}, fmt.Errorf("outbox stats: %w", err)
	}
	st.OldestAge = time.Duration(oldest * float64(time.Second))
	return st, nil
}
