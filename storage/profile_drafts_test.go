package storage_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/resume"
	"switchboard/storage"
)

type draftBundle struct{ *testBundle }

func setupDrafts(t *testing.T, users ...int64) draftBundle {
	t.Helper()
	b := draftBundle{setup(t)}
	b.users(domain.User{FirstName: "U"}, users...)
	return b
}

// note renders one outbox message naming the draft's state and revision.
func note(text string) domain.Render[resume.Draft] {
	return func(d resume.Draft) []domain.Message {
		return []domain.Message{{ChatID: d.ChatID, Kind: domain.KindReply, Text: text + ":" + string(d.State) + ":" + itoa(d.Revision)}}
	}
}

func itoa(n int) string { return time.Duration(n).String() }

func (b draftBundle) outboxTexts(t *testing.T, chat int64) []string {
	t.Helper()
	return b.strings(`SELECT body->>'text' FROM outbox WHERE chat_id = $1 ORDER BY id`, chat)
}

func (b draftBundle) create(t *testing.T, user int64, msg int) (resume.Draft, bool) {
	t.Helper()
	d, created, err := b.st.ProfileDrafts().Create(b.ctx, resume.Draft{UserID: user, ChatID: user, MessageID: msg, Lang: "en",
		FileID: "file-" + itoa(msg), FileName: "cv.pdf", Format: resume.PDF}, note("reading"))
	require.NoError(t, err)
	return d, created
}

// A document's update delivered twice makes one draft and one reply; a
// newer document replaces the draft, whatever its state.
func TestProfileDraftCreateIsIdempotentPerMessage(t *testing.T) {
	t.Parallel()
	b := setupDrafts(t, 1)
	d, created := b.create(t, 1, 10)
	require.True(t, created)
	require.Equal(t, resume.Reading, d.State)
	require.Equal(t, "file-10ns", d.FileID)
	again, created := b.create(t, 1, 10)
	require.False(t, created)
	require.Zero(t, again.ID)
	require.Len(t, b.outboxTexts(t, 1), 1, "one reply for the message")

	newer, created := b.create(t, 1, 11)
	require.True(t, created)
	require.NotEqual(t, d.ID, newer.ID)
	var n int
	require.NoError(t, b.st.Pool().QueryRow(b.ctx, `SELECT count(*) FROM profile_drafts`).Scan(&n))
	require.Equal(t, 1, n, "one draft per user")

	// The replaced draft's worker finds nothing to finish.
	claimed, ok, err := b.st.ProfileDrafts().Claim(b.ctx, time.Minute, "")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, newer.ID, claimed.ID)
	_, _ = b.create(t, 1, 12)
	done, err := b.st.ProfileDrafts().Finish(b.ctx, claimed.ID, claimed.Token, "profile", note("draft"))
	require.NoError(t, err)
	require.False(t, done)
}

// A draft whose file is refused stays failed, holding nothing of the file:
// its document's update handled again (after a crash) finds it and writes
// nothing, and no worker takes it; a newer document replaces it.
func TestProfileDraftFailedIsKeptForItsMessage(t *testing.T) {
	t.Parallel()
	b := setupDrafts(t, 1)
	d, created := b.create(t, 1, 10)
	require.True(t, created)
	c, ok, err := b.st.ProfileDrafts().Claim(b.ctx, time.Minute, "")
	require.NoError(t, err)
	require.True(t, ok)
	failed, err := b.st.ProfileDrafts().Fail(b.ctx, c.ID, c.Token, note("failed"))
	require.NoError(t, err)
	require.True(t, failed)
	require.Equal(t, []string{"reading:reading:1ns", "failed:failed:1ns"}, b.outboxTexts(t, 1))
	var fileID *string
	var fileName string
	require.NoError(t, b.st.Pool().QueryRow(b.ctx, `SELECT file_id, file_name FROM profile_drafts WHERE id = $1`, d.ID).Scan(&fileID, &fileName))
	require.Nil(t, fileID, "the file's handle is forgotten")
	require.Empty(t, fileName)

	_, created = b.create(t, 1, 10)
	require.False(t, created, "the message's draft is there, failed")
	require.Len(t, b.outboxTexts(t, 1), 2, "nothing told again")
	_, ok, err = b.st.ProfileDrafts().Claim(b.ctx, time.Minute, "")
	require.NoError(t, err)
	require.False(t, ok, "nothing to read")
	held, err := b.st.Users().Held(b.ctx, 1)
	require.NoError(t, err)
	require.False(t, held.JobSearch, "a failed draft is no job-search data of the user's")

	newer, created := b.create(t, 1, 11)
	require.True(t, created)
	require.Equal(t, resume.Reading, newer.State)
	require.Equal(t, []int64{newer.ID}, b.int64s(`SELECT id FROM profile_drafts`))
}

// Claims: one worker per draft, a lapsed claim taken over and the first
// worker's writes refused, a release's backoff respected.
func TestProfileDraftClaims(t *testing.T) {
	t.Parallel()
	b := setupDrafts(t, 1, 2)
	first, _ := b.create(t, 1, 10)
	second, _ := b.create(t, 2, 20)

	a, ok, err := b.st.ProfileDrafts().Claim(b.ctx, time.Minute, "")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, first.ID, a.ID)
	require.Equal(t, 1, a.Attempts)
	c, ok, err := b.st.ProfileDrafts().Claim(b.ctx, time.Minute, "")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, second.ID, c.ID)
	_, ok, err = b.st.ProfileDrafts().Claim(b.ctx, time.Minute, "")
	require.NoError(t, err)
	require.False(t, ok, "both held")

	// A released with a backoff: not claimable until it passes.
	require.NoError(t, b.st.ProfileDrafts().Release(b.ctx, a.ID, a.Token, time.Hour, true))
	_, ok, err = b.st.ProfileDrafts().Claim(b.ctx, time.Minute, "")
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, b.st.ProfileDrafts().Release(b.ctx, c.ID, c.Token, 0, false))
	again, ok, err := b.st.ProfileDrafts().Claim(b.ctx, time.Millisecond, "")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, second.ID, again.ID)
	require.Equal(t, 1, again.Attempts, "a release on stop does not count the attempt")

	// Its claim lapses: another worker takes it, and the first one's
	// writes change nothing.
	_, err = b.st.Pool().Exec(b.ctx, `UPDATE profile_drafts SET claimed_until = now() - interval '1 second' WHERE id = $1`, again.ID)
	require.NoError(t, err)
	taken, ok, err := b.st.ProfileDrafts().Claim(b.ctx, time.Minute, "")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 2, taken.Attempts)
	done, err := b.st.ProfileDrafts().Finish(b.ctx, again.ID, again.Token, "stale", note("draft"))
	require.NoError(t, err)
	require.False(t, done)
	failed, err := b.st.ProfileDrafts().Fail(b.ctx, again.ID, again.Token, note("failed"))
	require.NoError(t, err)
	require.False(t, failed)

	done, err = b.st.ProfileDrafts().Finish(b.ctx, taken.ID, taken.Token, "Go developer", note("draft"))
	require.NoError(t, err)
	require.True(t, done)
	require.Equal(t, []string{"reading:reading:1ns", "draft:ready:2ns"}, b.outboxTexts(t, 2))
	var fileID *string
	require.NoError(t, b.st.Pool().QueryRow(b.ctx, `SELECT file_id FROM profile_drafts WHERE id = $1`, taken.ID).Scan(&fileID))
	require.Nil(t, fileID, "the file's handle is forgotten once read")
}

// A draft waiting for the model: its user is told once, however many
// claims wait; the wait is measured from the first, on the database's
// clock; a lost claim or a replaced draft records and tells nothing.
func TestProfileDraftWaitForModel(t *testing.T) {
	t.Parallel()
	b := setupDrafts(t, 1)
	d, _ := b.create(t, 1, 10)
	wait := func(c resume.Draft) (time.Duration, bool, bool) {
		t.Helper()
		waited, told, ok, err := b.st.ProfileDrafts().WaitForModel(b.ctx, c.ID, c.Token,
			[]domain.Message{{ChatID: 1, Kind: domain.KindReply, Text: "waiting"}})
		require.NoError(t, err)
		return waited, told, ok
	}
	c, _, err := b.st.ProfileDrafts().Claim(b.ctx, time.Minute, "")
	require.NoError(t, err)
	waited, told, ok := wait(c)
	require.True(t, ok)
	require.True(t, told, "the first wait tells")
	require.Less(t, waited, time.Minute, "the wait has just begun")
	require.NoError(t, b.st.ProfileDrafts().Release(b.ctx, c.ID, c.Token, 0, false))

	// Its start moved back an hour: the next claim's wait is that long,
	// and tells nothing again.
	_, err = b.st.Pool().Exec(b.ctx, `UPDATE profile_drafts SET model_wait_since = model_wait_since - interval '1 hour' WHERE id = $1`, d.ID)
	require.NoError(t, err)
	c2, _, err := b.st.ProfileDrafts().Claim(b.ctx, time.Minute, "")
	require.NoError(t, err)
	require.Equal(t, 1, c2.Attempts, "the waits spent no attempt")
	waited, told, ok = wait(c2)
	require.True(t, ok)
	require.False(t, told)
	require.GreaterOrEqual(t, waited, time.Hour)
	require.Less(t, waited, time.Hour+time.Minute)
	require.Equal(t, []string{"reading:reading:1ns", "waiting"}, b.outboxTexts(t, 1))

	_, _, ok = wait(c)
	require.False(t, ok, "an earlier claim's wait records nothing")
	_, _ = b.create(t, 1, 11)
	_, told, ok = wait(c2)
	require.False(t, ok, "a replaced draft records nothing")
	require.False(t, told)
	require.Equal(t, []string{"reading:reading:1ns", "waiting", "reading:reading:1ns"}, b.outboxTexts(t, 1))
}

// The buttons: only the owner's press on the current revision acts, once;
// Edit and the corrected text move the revision on; Use makes the profile.
func TestProfileDraftButtons(t *testing.T) {
	t.Parallel()
	b := setupDrafts(t, 1, 2)
	d, _ := b.create(t, 1, 10)
	c, _, err := b.st.ProfileDrafts().Claim(b.ctx, time.Minute, "")
	require.NoError(t, err)
	_, err = b.st.ProfileDrafts().Finish(b.ctx, c.ID, c.Token, "Go developer, 7 years", note("draft"))
	require.NoError(t, err)
	rev := 2

	_, ok, err := b.st.ProfileDrafts().Edit(b.ctx, 2, d.ID, rev, time.Hour)
	require.NoError(t, err)
	require.False(t, ok, "someone else's draft")
	_, ok, err = b.st.ProfileDrafts().Confirm(b.ctx, 1, d.ID, rev-1, time.Hour)
	require.NoError(t, err)
	require.False(t, ok, "an older message's button")
	waiting, _, err := b.st.ProfileDrafts().Editing(b.ctx, 1, 0, time.Hour)
	require.NoError(t, err)
	require.False(t, waiting)

	edited, ok, err := b.st.ProfileDrafts().Edit(b.ctx, 1, d.ID, rev, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, resume.Editing, edited.State)
	require.Equal(t, rev+1, edited.Revision)
	_, ok, err = b.st.ProfileDrafts().Edit(b.ctx, 1, d.ID, rev, time.Hour)
	require.NoError(t, err)
	require.False(t, ok, "a second press")
	waiting, _, err = b.st.ProfileDrafts().Editing(b.ctx, 1, 0, time.Hour)
	require.NoError(t, err)
	require.True(t, waiting)
	waiting, _, err = b.st.ProfileDrafts().Editing(b.ctx, 2, 0, time.Hour)
	require.NoError(t, err)
	require.False(t, waiting)

	revised, ok, err := b.st.ProfileDrafts().Revise(b.ctx, 1, 51, "Go developer, 8 years", time.Hour, note("revised"))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, resume.Ready, revised.State)
	require.Equal(t, rev+2, revised.Revision)
	_, ok, err = b.st.ProfileDrafts().Revise(b.ctx, 1, 52, "again", time.Hour, note("revised"))
	require.NoError(t, err)
	require.False(t, ok, "no longer waiting for text")
	waiting, revisedBy, err := b.st.ProfileDrafts().Editing(b.ctx, 1, 51, time.Hour)
	require.NoError(t, err)
	require.False(t, waiting)
	require.True(t, revisedBy, "message 51 revised it: handled again, it is known")
	_, revisedBy, err = b.st.ProfileDrafts().Editing(b.ctx, 1, 52, time.Hour)
	require.NoError(t, err)
	require.False(t, revisedBy, "message 52 found nothing to revise")

	confirmed, ok, err := b.st.ProfileDrafts().Confirm(b.ctx, 1, d.ID, revised.Revision, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "Go developer, 8 years", confirmed.Text)
	profile, err := b.st.Users().Profile(b.ctx, 1)
	require.NoError(t, err)
	require.Equal(t, "Go developer, 8 years", profile)
	_, ok, err = b.st.ProfileDrafts().Confirm(b.ctx, 1, d.ID, revised.Revision, time.Hour)
	require.NoError(t, err)
	require.False(t, ok, "a second press")
	cancelled, err := b.st.ProfileDrafts().Cancel(b.ctx, 1, d.ID, revised.Revision)
	require.NoError(t, err)
	require.False(t, cancelled)
	require.Equal(t, []string{"reading:reading:1ns", "draft:ready:2ns", "revised:ready:4ns"}, b.outboxTexts(t, 1))
}

// A draft older than the TTL: its buttons are stale, and the prune job
// deletes it while a younger one stays; /forget erases a user's draft.
func TestProfileDraftExpiresAndIsForgotten(t *testing.T) {
	t.Parallel()
	b := setupDrafts(t, 1, 2)
	old, _ := b.create(t, 1, 10)
	young, _ := b.create(t, 2, 20)
	for _, d := range []resume.Draft{old, young} {
		c, _, err := b.st.ProfileDrafts().Claim(b.ctx, time.Minute, "")
		require.NoError(t, err)
		_, err = b.st.ProfileDrafts().Finish(b.ctx, c.ID, c.Token, "profile", note("draft"))
		require.NoError(t, err)
		_ = d
	}
	_, err := b.st.Pool().Exec(b.ctx, `UPDATE profile_drafts SET updated_at = now() - interval '25 hours' WHERE id = $1`, old.ID)
	require.NoError(t, err)
	_, ok, err := b.st.ProfileDrafts().Confirm(b.ctx, 1, old.ID, 2, resume.DraftTTL)
	require.NoError(t, err)
	require.False(t, ok, "expired")

	results := b.st.Jobs().Prune(b.ctx, time.Now(), storage.Retention{}, storage.PruneOptions{})
	for _, r := range results {
		if r.Kind == storage.PruneProfileDrafts {
			require.NoError(t, r.Err)
			require.EqualValues(t, 1, r.Rows)
		}
	}
	require.Equal(t, []int64{young.ID}, b.int64s(`SELECT id FROM profile_drafts`))

	held, err := b.st.Users().Held(b.ctx, 2)
	require.NoError(t, err)
	require.True(t, held.JobSearch, "a draft is the user's job-search data")
	var created time.Time
	require.NoError(t, b.st.Pool().QueryRow(b.ctx, `SELECT created_at FROM users WHERE id = 2`).Scan(&created))
	_, err = b.st.Users().Forget(b.ctx, 2, created)
	require.NoError(t, err)
	var n int
	require.NoError(t, b.st.Pool().QueryRow(b.ctx, `SELECT count(*) FROM profile_drafts`).Scan(&n))
	require.Zero(t, n)
}
