package storage

import (
	"cmp"
	"context"
	"fmt"
	"html"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"switchboard/domain/memory"
)

// What /forget does to each table (README "Forgetting a user" says the same
// to users):
//
//   - pipeline_runs, raw_logs, lsm_storage (current and superseded
//     memories), memory_requests (a correction or a confirmation waiting),
//     memory_settings (incognito and the last export's request): the
//     user's rows deleted. An export waiting to be sent is outbox rows of
//     their private chat (below); its files are built from these tables
//     when sent, so nothing else holds them.
//   - users: deleted (the user may /start again), unless their master record
//     is kept (below): then the row stays as its anchor, with username,
//     first name, both languages and the profile erased and created_at
//     renewed (the person is new if they come back; see Forget).
//   - searches, ban_words, hidden_employers, vacancy_matches (every state), cover_letters,
//     profile_drafts, vacancy_settings (the rhythm), vacancy_digests: deleted.
//     discovery_state and search_hits belong to a search key, which users
//     with equal searches share: deleted only when no other user's search
//     has the key. vacancies are HH's public data and stay.
//   - group_messages they wrote: a message a proposal cites stays, so the
//     proposal keeps its sources, with its text, author and author id
//     erased; the others are deleted. Verbatim copies of their texts (at
//     least minCopy characters) in the proposals citing them and in the
//     outbox's rows of other chats (a run's board in the admin chat) are
//     replaced by deletedCopy. Proposals are otherwise the LLM's and the
//     admins' work and stay.
//   - outbox, outbox_throttles, unreachable_chats, chat_topics: every row
//     of their private chat (chat id = user id), sent or waiting, deleted.
//     The chat's topics stay in Telegram with the bot's past messages, as
//     those messages always did without topics; the next message after
//     /forget opens its workflow's topic anew.
//   - masters: a master no order or offer names is deleted. One they do name
//     is kept, detached: inactive (no new offers), city, district and skills
//     erased; orders (assigned to them, commission owed or paid) and offers
//     keep pointing at it, since the admins' accounts and the orders'
//     history depend on them; so do the admins' /paid records
//     (commission_settlements), deleted with a master record deleted.
//   - github_logins: deleted. A queued push (task_pushes) reads its source
//     messages when it goes, and a cited message erased above is no longer
//     one of them: no quote, author or link (erasedMessage).
//   - orders.customer_id: an order they opened the link of stays, without
//     them (customer_id NULL); its rating keeps the stars and loses the
//     comment (order_ratings.comment NULL); order_messages of their chat
//     and the texts they sent through the bot (order_relays): deleted.
//   - orders.created_by, analysis_runs.created_by, analysis_proposals.decided_by,
//     system_prompt_sets.chat_id (an admin's /prompt, in private their id):
//     an admin's id on the work they did for others; kept.
//   - vacancies, group_chats, system_prompts, job_runs, replicas,
//     admin_notices, hh_app_tokens: hold nothing of a user's.

// deletedCopy replaces a copy of a forgotten user's group message found in
// someone else's text.
const deletedCopy = "[deleted]"

// minCopy is the shortest text of theirs looked for as a copy: a shorter
// one ("ok", "thanks") is nobody's in particular, and replacing it would
// mangle other people's words.
const minCopy = 8

// detachedPlace stands for a kept master's erased city and district (the
// columns refuse an empty string) and, as the only skill, for their skills.
const detachedPlace = "-"

// Forget erases everything of the user's that is theirs alone, in one
// transaction, if their users row is the one created at known: the row the
// confirmation was asked for. A second press of the confirm button finds it
// deleted, or made anew by the press itself, or (a kept master's) renewed,
// and gets memory.ErrAlreadyForgotten with nothing touched; a failed
// attempt rolls back, so pressing again finishes it. See the table above.
func (s *Users) Forget(ctx context.Context, userID int64, known time.Time) (memory.Forgotten, error) {
	var f memory.Forgotten
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		f = memory.Forgotten{} // a retried transaction counts afresh
		// Two presses of the confirm button take turns, on one replica or
		// two; rows written for the user meanwhile (a discovery, an
		// intake) wait for the end and then find the user gone.
		tag, err := tx.Exec(ctx, `SELECT 1 FROM users WHERE id = $1 AND created_at = $2 FOR UPDATE`, userID, known)
		if err != nil {
			return fmt.Errorf("lock user: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return memory.ErrAlreadyForgotten
		}
		if err := scrubCopies(ctx, tx, userID); err != nil {
			return err
		}
		if err := deleteUserRows(ctx, tx, userID, &f); err != nil {
			return err
		}
		return forgetUserRow(ctx, tx, userID, &f)
	})
	if err != nil {
		return memory.Forgotten{}, fmt.Errorf("forget user %d: %w", userID, err)
	}
	return f, nil
}

// erasedMessage holds of a cited group message m that deleteUserRows
// erased: its author's name and id, which it blanks. The text it blanks
// too is not part of the test: an edit in Telegram after /forget writes a
// text into the erased row again (EditMessage, SaveMessage's upsert), and
// the words are still the forgotten member's. No message the bot records
// has no author: Telegram names a sender of every group message (a stand-in
// for one sent on behalf of a chat), and the bot records groups only. A
// cited message whose row is gone (pruned by date) is NULL here, not true.
const erasedMessage = `(m.author_id = 0 AND m.author = '')`

// deleteUserRows deletes (or, for cited group messages, erases) the user's
// rows in every table but users and masters, counting them into f.
func deleteUserRows(ctx context.Context, tx pgx.Tx, userID int64, f *memory.Forgotten) error {
	for _, step := range []struct {
		what, q string
		n       *int
	}{
		{"cited group messages", `UPDATE group_messages m SET text = '', author = '', author_id = 0
WHERE m.author_id = $1 AND EXISTS (SELECT 1 FROM analysis_proposal_sources s
                                   WHERE s.chat_id = m.chat_id AND s.message_id = m.message_id)`, &f.GroupMessages},
		{"group messages", `DELETE FROM group_messages WHERE author_id = $1`, &f.GroupMessages},
		{"runs", `DELETE FROM pipeline_runs WHERE user_id = $1`, &f.Runs},
		// An order they were the customer of stays the admins', without
		// them; its rating keeps its stars, the master's record, and loses
		// the comment, their words. One statement, the orders first: a
		// comment being written (Orders.Comment, holding the order's row
		// FOR SHARE) commits before the orders' update goes on, and the
		// ratings' update, finding that row changed since its snapshot,
		// reads it again and clears the comment too; a "comment IS NOT
		// NULL" here would pass over it, as the snapshot shows none.
		{"orders' customer", `WITH unlinked AS (
    UPDATE orders SET customer_id = NULL, customer_joined_at = NULL, customer_joined_by = NULL, updated_at = now()
    WHERE customer_id = $1
    RETURNING id
)
UPDATE order_ratings SET comment = NULL WHERE order_id IN (SELECT id FROM unlinked)`, nil},
		{"order messages", `DELETE FROM order_messages WHERE chat_id = $1`, nil},
		{"relayed texts", `DELETE FROM order_relays WHERE sender_id = $1`, nil},
		{"raw logs", `DELETE FROM raw_logs WHERE user_id = $1`, &f.Logs},
		{"memory requests", `DELETE FROM memory_requests WHERE user_id = $1`, nil},
		{"summaries", `DELETE FROM lsm_storage WHERE user_id = $1`, &f.Summaries},
		{"memory settings", `DELETE FROM memory_settings WHERE user_id = $1`, nil},
		{"cover letters", `DELETE FROM cover_letters WHERE user_id = $1`, nil},
		{"matches", `DELETE FROM vacancy_matches WHERE user_id = $1`, &f.Matches},
		{"digests", `DELETE FROM vacancy_digests WHERE user_id = $1`, nil},
		{"vacancy settings", `DELETE FROM vacancy_settings WHERE user_id = $1`, nil},
		{"ban words", `DELETE FROM ban_words WHERE user_id = $1`, &f.BanWords},
		{"hidden employers", `DELETE FROM hidden_employers WHERE user_id = $1`, nil},
		{"profile draft", `DELETE FROM profile_drafts WHERE user_id = $1`, nil},
		// The statement's snapshot still shows the deleted searches,
		// hence user_id <> $1: a key stays while another user has it.
		{"searches", `WITH gone AS (
    DELETE FROM searches WHERE user_id = $1 RETURNING search_key
), orphan AS (
    SELECT DISTINCT g.search_key FROM gone g
    WHERE NOT EXISTS (SELECT 1 FROM searches s WHERE s.search_key = g.search_key AND s.user_id <> $1)
), state AS (
    DELETE FROM discovery_state WHERE search_key IN (SELECT search_key FROM orphan)
), hits AS (
    DELETE FROM search_hits WHERE search_key IN (SELECT search_key FROM orphan)
)
SELECT 1 FROM gone`, &f.Searches},
		{"outbox", `DELETE FROM outbox WHERE chat_id = $1`, &f.Messages},
		{"throttles", `DELETE FROM outbox_throttles WHERE chat_id = $1`, nil},
		{"unreachable mark", `DELETE FROM unreachable_chats WHERE chat_id = $1`, nil},
		{"topics", `DELETE FROM chat_topics WHERE chat_id = $1`, nil},
		{"GitHub login", `DELETE FROM github_logins WHERE user_id = $1`, nil},
	} {
		tag, err := tx.Exec(ctx, step.q, userID)
		if err != nil {
			return fmt.Errorf("%s: %w", step.what, err)
		}
		if step.n != nil {
			*step.n += int(tag.RowsAffected())
		}
	}
	return nil
}

// forgetUserRow deletes the users row, or keeps it, erased and renewed, as
// the anchor of a master record that orders or offers still name.
func forgetUserRow(ctx context.Context, tx pgx.Tx, userID int64, f *memory.Forgotten) error {
	err := tx.QueryRow(ctx, `
SELECT EXISTS (SELECT 1 FROM orders WHERE master_id = $1) OR EXISTS (SELECT 1 FROM offers WHERE master_id = $1),
       (SELECT count(*) FROM orders WHERE master_id = $1)`, userID).Scan(&f.MasterKept, &f.Orders)
	if err != nil {
		return fmt.Errorf("dispatch records: %w", err)
	}
	if !f.MasterKept {
		// The cascade takes a master record nothing names.
		if _, err := tx.Exec(ctx, `DELETE FROM users WHERE id = $1`, userID); err != nil {
			return fmt.Errorf("user: %w", err)
		}
		return nil
	}
	if _, err := tx.Exec(ctx, `UPDATE masters SET active = false, city = $2, district = $2, skills = ARRAY[$2],
    updated_at = now() WHERE user_id = $1`, userID, detachedPlace); err != nil {
		return fmt.Errorf("detach master: %w", err)
	}
	// A new created_at makes the kept row a new user's, so a second
	// press of the confirm button sees the forgetting done.
	if _, err := tx.Exec(ctx, `UPDATE users SET username = '', first_name = '', language = '', telegram_language = '',
    time_zone = NULL, profile = '', created_at = clock_timestamp(), updated_at = now() WHERE id = $1`, userID); err != nil {
		return fmt.Errorf("detach user: %w", err)
	}
	return nil
}

// Held says what ForgetUser would erase of the user's, for the confirmation.
func (s *Users) Held(ctx context.Context, userID int64) (memory.Held, error) {
	var h memory.Held
	err := s.pool.QueryRow(ctx, `SELECT
    EXISTS (SELECT 1 FROM pipeline_runs WHERE user_id = $1) OR EXISTS (SELECT 1 FROM raw_logs WHERE user_id = $1)
        OR EXISTS (SELECT 1 FROM lsm_storage WHERE user_id = $1),
    EXISTS (SELECT 1 FROM users WHERE id = $1 AND profile <> '') OR EXISTS (SELECT 1 FROM profile_drafts WHERE user_id = $1 AND state <> 'failed')
        OR EXISTS (SELECT 1 FROM searches WHERE user_id = $1)
        OR EXISTS (SELECT 1 FROM ban_words WHERE user_id = $1) OR EXISTS (SELECT 1 FROM hidden_employers WHERE user_id = $1)
        OR EXISTS (SELECT 1 FROM vacancy_matches WHERE user_id = $1)
        OR EXISTS (SELECT 1 FROM vacancy_settings WHERE user_id = $1),
    EXISTS (SELECT 1 FROM group_messages WHERE author_id = $1),
    EXISTS (SELECT 1 FROM masters WHERE user_id = $1),
    EXISTS (SELECT 1 FROM orders WHERE master_id = $1) OR EXISTS (SELECT 1 FROM offers WHERE master_id = $1)`, userID).
		Scan(&h.Memory, &h.JobSearch, &h.GroupMessages, &h.Master, &h.MasterKept)
	if err != nil {
		return memory.Held{}, fmt.Errorf("what user %d has: %w", userID, err)
	}
	return h, nil
}

// scrubCopies replaces verbatim copies of the user's group messages in the
// proposals that cite them and in other chats' outbox rows (the board
// shows proposals' titles, HTML-escaped) with deletedCopy. It runs before
// the messages themselves are erased.
func scrubCopies(ctx context.Context, tx pgx.Tx, userID int64) error {
	c, err := copiesOf(ctx, tx, userID)
	if err != nil || len(c.texts) == 0 {
		return err
	}
	if err := scrubProposals(ctx, tx, userID, c); err != nil {
		return err
	}
	return scrubOutbox(ctx, tx, `chat_id <> $1`, userID, c)
}

// copies are the texts looked for, the longest first so that a text that
// contains another goes whole, and their LIKE patterns.
type copies struct {
	texts, patterns []string
}

// copiesOf reads the user's group messages long enough to count as a copy.
func copiesOf(ctx context.Context, tx pgx.Tx, userID int64) (copies, error) {
	texts, err := queryAll(ctx, tx, pgx.RowTo[string], `SELECT DISTINCT btrim(text) FROM group_messages
WHERE author_id = $1 AND char_length(btrim(text)) >= $2`, userID, minCopy)
	if err != nil {
		return copies{}, fmt.Errorf("texts of group messages: %w", err)
	}
	return newCopies(texts), nil
}

// newCopies are the texts (trimmed, at least minCopy characters) to look
// for, each as written and HTML-escaped.
func newCopies(texts []string) copies {
	var c copies
	for _, t := range texts {
		if t = strings.TrimSpace(t); utf8.RuneCountInString(t) >= minCopy {
			c.texts = append(c.texts, t, html.EscapeString(t))
		}
	}
	slices.SortFunc(c.texts, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) })
	c.texts = slices.Compact(c.texts)
	for _, t := range c.texts {
		c.patterns = append(c.patterns, "%"+likeEscaper.Replace(t)+"%")
	}
	return c
}

// scrub replaces every copy in s with deletedCopy.
func (c copies) scrub(s string) string {
	for _, t := range c.texts {
		s = strings.ReplaceAll(s, t, deletedCopy)
	}
	return s
}

// scrubProposals scrubs the copies out of the proposals citing the user's
// messages.
func scrubProposals(ctx context.Context, tx pgx.Tx, userID int64, c copies) error {
	return c.scrubRows(ctx, tx, userID, "proposals citing group messages", "proposal",
		`SELECT p.id, p.title, p.description, p.assignee FROM analysis_proposals p
WHERE EXISTS (SELECT 1 FROM analysis_proposal_sources s
              JOIN group_messages m ON m.chat_id = s.chat_id AND m.message_id = s.message_id
              WHERE s.proposal_id = p.id AND m.author_id = $1)
  AND (p.title LIKE ANY ($2) OR p.description LIKE ANY ($2) OR p.assignee LIKE ANY ($2))
FOR UPDATE OF p`,
		`UPDATE analysis_proposals SET title = $2, description = $3, assignee = $4 WHERE id = $1`)
}

// scrubOutbox scrubs the copies out of the outbox rows that chats (a
// condition on chat_id = $1: other chats' rows, or the user's own) picks,
// text and last error.
func scrubOutbox(ctx context.Context, tx pgx.Tx, chats string, userID int64, c copies) error {
	return c.scrubRows(ctx, tx, userID, "outbox copies", "outbox row",
		`SELECT id, COALESCE(body->>'text', ''), last_error FROM outbox
WHERE `+chats+` AND (body->>'text' LIKE ANY ($2) OR last_error LIKE ANY ($2))
FOR UPDATE`,
		`UPDATE outbox SET last_error = $3,
    body = CASE WHEN body ? 'text' THEN jsonb_set(body, '{text}', to_jsonb($2::text)) ELSE body END
WHERE id = $1`)
}

// scrubRows replaces the copies in the rows that sel picks and locks ($1
// the user, $2 the patterns; it reads the id, then the texts) and writes
// each back with upd ($1 the id, then the scrubbed texts in sel's order).
// what and one name the rows and a row in errors.
func (c copies) scrubRows(ctx context.Context, tx pgx.Tx, userID int64, what, one, sel, upd string) error {
	type row struct {
		id    int64
		texts []string
	}
	rs, err := queryAll(ctx, tx, func(r pgx.CollectableRow) (row, error) {
		x := row{texts: make([]string, len(r.FieldDescriptions())-1)}
		dest := []any{&x.id}
		for i := range x.texts {
			dest = append(dest, &x.texts[i])
		}
		return x, r.Scan(dest...)
	}, sel, userID, c.patterns)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, r := range rs {
		args := []any{r.id}
		for _, t := range r.texts {
			args = append(args, c.scrub(t))
		}
		if _, err := tx.Exec(ctx, upd, args...); err != nil {
			return fmt.Errorf("scrub %s %d: %w", one, r.id, err)
		}
	}
	return nil
}

// likeEscaper quotes LIKE's wildcards and its escape character.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
