package vacancy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/vacancy"
)

// Hiding an employer from its card: the card is marked Not interested, the
// employer's queued match is dropped unjudged when claimed, discovery gives
// the user none of its later vacancies while others still get them, and
// showing it again lets the next ones through.
func TestHideEmployerKeepsItsVacanciesAway(t *testing.T) {
	t.Parallel()
	b := setupRelevant(t)
	vs := vacancies(3, 500, 31)
	for i := range vs {
		vs[i].Employer.Name = "Acme & Sons"
	}
	vs[2].Employer.Name = "Other Co"
	b.queue(t, vs[0])
	b.drain(t)
	b.deliverOutbox(t)
	require.Equal(t, vacancy.SentToUser, b.status(t, seeker, 500))
	card := b.matchID(t, seeker, 500)

	// Only the owner may hide through the card.
	_, _, _, err := b.svc.HideEmployer(b.ctx, seeker+1, card)
	require.ErrorIs(t, err, vacancy.ErrForbidden)
	_, _, _, err = b.svc.HideEmployer(b.ctx, seeker, 999999)
	require.ErrorIs(t, err, domain.ErrNotFound)

	// A second vacancy of the employer is queued before the hiding.
	b.hh.Add(vs[1])
	require.NoError(t, b.svc.Fetch(b.ctx))
	require.Equal(t, vacancy.Queued, b.status(t, seeker, 501))

	m, v, hidden, err := b.svc.HideEmployer(b.ctx, seeker, card)
	require.NoError(t, err)
	require.True(t, hidden)
	require.Equal(t, "Acme & Sons", v.Employer)
	require.Equal(t, vacancy.NotInterested, m.Status, "the card pressed is the first not wanted")
	_, _, hidden, err = b.svc.HideEmployer(b.ctx, seeker, card)
	require.NoError(t, err, "a second press finds it hidden and the card decided")
	require.False(t, hidden)

	calls := b.llm.Calls("relevance")
	b.drain(t)
	require.Equal(t, "(none)", string(b.status(t, seeker, 501)), "dropped when claimed")
	require.Equal(t, calls, b.llm.Calls("relevance"), "without asking the LLM")

	// Later vacancies: the seeker gets the other employer's, user 8 both.
	b.user(t, 8, "")
	b.search(t, 8, "golang")
	b.hh.Add(vs[2])
	vs[1].ID, vs[1].Name = "503", "Golang developer 503"
	b.hh.Add(vs[1])
	require.NoError(t, b.svc.Fetch(b.ctx))
	require.Equal(t, "(none)", string(b.status(t, seeker, 503)), "discovery passes the hidden employer by")
	require.Equal(t, vacancy.Queued, b.status(t, seeker, 502))
	require.Equal(t, vacancy.Queued, b.status(t, 8, 503), "another user still gets it")

	list, err := b.svc.HiddenEmployers(b.ctx, seeker)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "Acme & Sons", list[0].Name)
	_, ok, err := b.svc.ShowEmployer(b.ctx, 8, list[0].ID)
	require.NoError(t, err)
	require.False(t, ok, "another user's hiding is not theirs to undo")
	name, ok, err := b.svc.ShowEmployer(b.ctx, seeker, list[0].ID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "Acme & Sons", name)
	_, ok, err = b.svc.ShowEmployer(b.ctx, seeker, list[0].ID)
	require.NoError(t, err)
	require.False(t, ok, "a second press finds it shown")

	vs[0].ID, vs[0].Name = "504", "Golang developer 504"
	b.hh.Add(vs[0])
	require.NoError(t, b.svc.Fetch(b.ctx))
	require.Equal(t, vacancy.Queued, b.status(t, seeker, 504), "shown again: its next vacancy comes")
}

// A vacancy HH shows without an employer has nobody to hide; a user at the
// limit is told so and nothing is added.
func TestHideEmployerRefusals(t *testing.T) {
	t.Parallel()
	b := setupRelevant(t)
	vs := vacancies(2, 600, 32)
	vs[0].Employer.Name = ""
	vs[1].Employer.Name = "Busy Corp"
	b.queue(t, vs...)
	b.drain(t)
	b.deliverOutbox(t)
	_, _, _, err := b.svc.HideEmployer(b.ctx, seeker, b.matchID(t, seeker, 600))
	require.ErrorIs(t, err, vacancy.ErrNoEmployer)

	b.exec(t, `INSERT INTO hidden_employers (user_id, employer) SELECT $1, 'E' || g FROM generate_series(1, $2) g`,
		seeker, vacancy.MaxHiddenEmployers)
	_, _, _, err = b.svc.HideEmployer(b.ctx, seeker, b.matchID(t, seeker, 601))
	var ie *domain.InputError
	require.True(t, errors.As(err, &ie), "%v", err)
	require.Equal(t, "hide.error_too_many", ie.Key)
	require.Equal(t, vacancy.SentToUser, b.status(t, seeker, 601), "nothing changed")
}

// An employer name longer than a hiding can hold (HH's are far shorter) is
// hidden by its clipped form, which its later vacancies are compared by, so
// they are passed by like any other's.
func TestHideEmployerWithAnOverlongName(t *testing.T) {
	t.Parallel()
	b := setupRelevant(t)
	long := strings.Repeat("Я", 700)
	vs := vacancies(4, 700, 33)
	for i := range vs {
		vs[i].Employer.Name = long
	}
	b.queue(t, vs[0], vs[1])
	b.drain(t)
	b.deliverOutbox(t)
	want := strings.Repeat("Я", vacancy.MaxEmployer-1) + "…"

	_, v, hidden, err := b.svc.HideEmployer(b.ctx, seeker, b.matchID(t, seeker, 700))
	require.NoError(t, err)
	require.True(t, hidden)
	require.Equal(t, long, v.Employer, "the vacancy keeps its name whole")
	list, err := b.svc.HiddenEmployers(b.ctx, seeker)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, want, list[0].Name)
	require.Len(t, []rune(list[0].Name), vacancy.MaxEmployer)

	b.hh.Add(vs[2])
	require.NoError(t, b.svc.Fetch(b.ctx))
	require.Equal(t, "(none)", string(b.status(t, seeker, 702)), "discovery passes the hidden employer by")

	_, ok, err := b.svc.ShowEmployer(b.ctx, seeker, list[0].ID)
	require.NoError(t, err)
	require.True(t, ok)
	_, v, hidden, err = b.svc.HideEmployer(b.ctx, seeker, b.matchID(t, seeker, 701))
	require.NoError(t, err)
	require.True(t, hidden, "hidden again from another card")
	require.Equal(t, long, v.Employer)
	b.hh.Add(vs[3])
	require.NoError(t, b.svc.Fetch(b.ctx))
	require.Equal(t, "(none)", string(b.status(t, seeker, 703)), "and its later vacancies are passed by")
}
