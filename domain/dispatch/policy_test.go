package dispatch

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
)

func TestAdmit(t *testing.T) {
	open := Gate{}
	closed := Gate{Configured: []string{"kyiv"}, Closed: []string{"kyiv"}}
	o := Order{ID: 1, City: "Kyiv", State: Searching, Round: 1}
	for name, c := range map[string]struct {
		o      Order
		locked bool
		gate   Gate
		want   StepPlan
		done   bool
	}{
		"held elsewhere": {o, false, open, StepPlan{Outcome: Busy, Round: 1}, true},
		"not searching":  {Order{State: Assigned, Round: 2}, true, open, StepPlan{Outcome: NotSearching, Round: 2}, true},
		"after hours":    {o, true, closed, StepPlan{Outcome: AfterHours, Round: 1}, true},
		"after hours, reported": {Order{City: "Kyiv", State: Searching, Round: 2, Unassignable: time.Unix(1, 0)}, true, closed,
			StepPlan{Outcome: AfterHours, Round: 2, Park: true}, true},
		"goes on": {o, true, open, StepPlan{}, false},
	} {
		plan, done := Admit(c.o, c.locked, c.gate)
		require.Equal(t, c.done, done, name)
		require.Equal(t, c.want, plan, name)
	}
}

func TestHold(t *testing.T) {
	o := Order{Round: 2}
	plan, done := Hold(o, StepFacts{Open: true})
	require.True(t, done)
	require.Equal(t, StepPlan{Outcome: Busy, Round: 2}, plan, "an open offer: the step writes nothing")
	_, done = Hold(o, StepFacts{})
	require.False(t, done)
}

func TestOwed(t *testing.T) {
	fresh := Order{Round: 1}
	reported := Order{Round: 2, Unassignable: time.Unix(1, 0)}
	require.True(t, StepFacts{}.Owed(fresh), "no offer open and never reported: owed")
	require.False(t, StepFacts{Open: true}.Owed(fresh), "an open offer: not owed")
	require.False(t, StepFacts{}.Owed(reported), "reported after its last offer ended: not owed")
	require.True(t, StepFacts{Parked: true}.Owed(reported), "reported, then parked: owed")
	require.False(t, StepFacts{Open: true, Parked: true}.Owed(reported), "an open offer wins over a mark")
}

func TestEscalate(t *testing.T) {
	offered := StepFacts{OfferedInRound1: true}
	for name, c := range map[string]struct {
		round int
		f     StepFacts
		p     Pick
		next  int
		again bool
	}{
		"round 1 used up":     {1, offered, Pick{}, 2, true},
		"nobody ever offered": {1, StepFacts{}, Pick{}, 1, false},
		"a candidate":         {1, offered, Pick{Master: 7}, 1, false},
		"a master busy":       {1, offered, Pick{Busy: true}, 1, false},
		"round 2 has no next": {2, offered, Pick{}, 2, false},
	} {
		next, again := Escalate(c.round, c.f, c.p)
		require.Equal(t, c.next, next, name)
		require.Equal(t, c.again, again, name)
	}
}

func TestDecide(t *testing.T) {
	fresh := Order{Round: 1}
	reported := Order{Round: 2, Unassignable: time.Unix(1, 0)}
	for name, c := range map[string]struct {
		o       Order
		f       StepFacts
		round   int
		p       Pick
		attempt int
		want    StepPlan
	}{
		"busy parks":               {fresh, StepFacts{}, 1, Pick{Busy: true}, 0, StepPlan{Outcome: Busy, Round: 1, Park: true}},
		"busy parks reported":      {reported, StepFacts{}, 2, Pick{Busy: true}, 0, StepPlan{Outcome: Busy, Round: 2, Park: true}},
		"busy already parked":      {fresh, StepFacts{Parked: true}, 1, Pick{Busy: true}, 0, StepPlan{Outcome: Busy, Round: 1}},
		"picks exhausted":          {fresh, StepFacts{}, 1, Pick{Master: 7}, maxPicks, StepPlan{Outcome: Busy, Round: 1, Park: true}},
		"offer in the same round":  {fresh, StepFacts{}, 1, Pick{Master: 7}, 0, StepPlan{Outcome: Offered, Round: 1, Master: 7}},
		"offer settles parked":     {fresh, StepFacts{Parked: true}, 1, Pick{Master: 7}, 1, StepPlan{Outcome: Offered, Round: 1, Master: 7, Settle: true}},
		"offer in the next round":  {fresh, StepFacts{}, 2, Pick{Master: 7}, 0, StepPlan{Outcome: Offered, Round: 2, Master: 7, Settle: true}},
		"offer clears unassigned":  {reported, StepFacts{}, 2, Pick{Master: 7}, 0, StepPlan{Outcome: Offered, Round: 2, Master: 7, Settle: true}},
		"nobody: reported":         {fresh, StepFacts{}, 2, Pick{}, 0, StepPlan{Outcome: Unassignable, Round: 2, MarkUnassignable: true}},
		"nobody: already reported": {reported, StepFacts{}, 2, Pick{}, 0, StepPlan{Outcome: StillUnassignable, Round: 2}},
		"nobody: parked settled":   {reported, StepFacts{Parked: true}, 2, Pick{}, 0, StepPlan{Outcome: StillUnassignable, Round: 2, MarkUnassignable: true}},
	} {
		require.Equal(t, c.want, Decide(c.o, c.f, c.round, c.p, c.attempt), name)
	}
}

func TestRankOf(t *testing.T) {
	for name, c := range map[string]struct {
		avg   float64
		count int
		want  float64
	}{
		"no ratings":                   {0, 0, UnratedRank},
		"two fives are no record":      {5, 2, UnratedRank},
		"two ones are no record":       {1, 2, UnratedRank},
		"three fives":                  {5, 3, 5},
		"4.67 is four and a half":      {14.0 / 3, 3, 4.5},
		"4.75 rounds up to five":       {4.75, 4, 5},
		"4.25 rounds up to 4.5":        {4.25, 4, 4.5},
		"4.2 is four":                  {4.2, 5, 4},
		"3.75 is four, as the unrated": {3.75, 4, 4},
		"3.33 is three and a half":     {10.0 / 3, 3, 3.5},
		"1.2 is one":                   {1.2, 5, 1},
		"many ratings":                 {4.4, 1000, 4.5},
	} {
		require.Equal(t, c.want, RankOf(c.avg, c.count), name)
	}
	require.Equal(t, 4.0, UnratedRank, "an unrated master ranks with the good ones (3.75 to under 4.25)")
	require.Equal(t, 3, MinRatings)
	require.Equal(t, 90*24*time.Hour, RatingWindow)
	// Neither preferred nor buried: above a 3.5 record, below a 4.5 one.
	require.Less(t, RankOf(3.6, 10), RankOf(5, 2))
	require.Greater(t, RankOf(4.3, 10), RankOf(5, 2))
}

func TestCheckRating(t *testing.T) {
	require.NoError(t, CheckRating(1, ""))
	require.NoError(t, CheckRating(5, strings.Repeat("я", MaxRatingComment)))
	for _, stars := range []int{0, 6, -1} {
		var ie *domain.InputError
		require.ErrorAs(t, CheckRating(stars, ""), &ie)
		require.Equal(t, "rating.error_stars", ie.Key)
	}
	var ie *domain.InputError
	require.ErrorAs(t, CheckRating(5, strings.Repeat("я", MaxRatingComment+1)), &ie)
	require.Equal(t, "rating.error_comment_long", ie.Key)
	require.Equal(t, MaxRatingComment, ie.Args["Max"])
}
