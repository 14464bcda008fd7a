package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Rating is a customer's rating of a finished order, of the master who did
// it. It names no customer: the customer's identity is contact data that
// retention clears, and the rating outlives it.
type Rating struct {
	OrderID  int64
	MasterID int64
	Stars    int       // MinStars to MaxStars
	Comment  string    // "": none
	At       time.Time // rated_at
}

// Limits on a rating.
const (
	MinStars         = 1
	MaxStars         = 5
	MaxRatingComment = 1000 // characters
)

// Record is a master's ratings over the last RatingWindow.
type Record struct {
	// Average is of their stars; zero with no ratings.
	Average float64
	Count   int
}

// Counts reports whether the record ranks the master (MinRatings).
func (r Record) Counts() bool { return r.Count >= MinRatings }

// Rank is the master's rank among a step's candidates (RankOf).
func (r Record) Rank() float64 { return RankOf(r.Average, r.Count) }

// RosterLine is one master of /masters, with their record.
type RosterLine struct {
	Master Master
	Record Record
}

// RosterPageSize is how many masters one page of /masters lists: with
// every field at its budget the page stays one message, which its buttons
// edit in place.
const RosterPageSize = 10

// Errors of a rating and its comment.
var (
	// ErrRated: the order was rated already; a rating is given once and
	// never changed.
	ErrRated = errors.New("order rated already")
	// ErrNotRated: a comment came before the stars it would go with.
	ErrNotRated = errors.New("order not rated yet")
	// ErrCommented: the rating has its comment already; like the stars, it
	// is given once.
	ErrCommented = errors.New("rating has a comment already")
)

// CheckRating refuses stars outside MinStars..MaxStars and a comment over
// MaxRatingComment characters (as PostgreSQL counts them, by code point).
func CheckRating(stars int, comment string) error {
	if stars < MinStars || stars > MaxStars {
		return inputError("rating.error_stars", "")
	}
	return checkComment(comment)
}

// checkComment is CheckRating's check of the comment.
func checkComment(comment string) error {
	if utf8.RuneCountInString(comment) > MaxRatingComment {
		return inputError("rating.error_comment_long", "")
	}
	return nil
}

// Rate records the rating by customerID, the order's customer, of a
// finished (DONE or CLOSED) order of the master assigned to it, with an
// optional comment (spaces around it dropped), and writes its line of the
// live log with it. Who rates is checked by the statement that records it,
// so a customer unlinked since their stars were shown (a reissued link,
// their /forget) rates nothing: ErrNotCustomer. A rating is given once:
// ErrRated with the rating as it stands if there is one, ErrOrderState if
// the order is not finished, domain.ErrNotFound if there is no such order.
func (s *Service) Rate(ctx context.Context, orderID, customerID int64, stars int, comment string) (Rating, error) {
	comment = strings.TrimSpace(comment)
	if err := CheckRating(stars, comment); err != nil {
		return Rating{}, err
	}
	st := s.newStory()
	r, ok, err := s.deps.Orders.Rate(ctx, orderID, customerID, stars, comment, st.tell(func(c Changed) {
		o := c.Order
		m, _ := masterOf(c, o.MasterID)
		st.event(Event{Kind: EventOrderRated, OrderID: o.ID, MasterID: o.MasterID, Master: known(m), Rating: c.Rating})
		st.customer(c, CustomerRated)
	}))
	switch {
	case err != nil:
		return Rating{}, err
	case !ok && r.OrderID != 0:
		return r, ErrRated
	case !ok:
		return Rating{}, ErrOrderState
	}
	st.logged()
	s.m.ratings.WithLabelValues(strconv.Itoa(stars)).Inc()
	return r, nil
}

// comment makes text (spaces around it dropped) the comment of the
// rating of o, a finished order, by its customer: the customer's reply
// to one of the bot's messages about it (Relay), which the done note asks
// for once the stars are given. It writes its line of the live log and
// the edit of the customer's done note with it. ErrNotRated before the
// stars, ErrCommented once a comment is there, the rating's InputError
// when the text is too long. The same reply handled again (its update run
// twice) finds its own words there and is answered as the first time,
// with nothing written.
func (s *Service) comment(ctx context.Context, o Order, customerID int64, text string) error {
	comment := strings.TrimSpace(text)
	if err := checkComment(comment); err != nil {
		return err
	}
	st := s.newStory()
	r, ok, err := s.deps.Orders.Comment(ctx, o.ID, customerID, comment, st.tell(func(c Changed) {
		m, _ := masterOf(c, c.Order.MasterID)
		st.event(Event{Kind: EventRatingCommented, OrderID: c.Order.ID, MasterID: c.Order.MasterID, Master: known(m), Rating: c.Rating})
		st.customer(c, CustomerCommented)
	}))
	switch {
	case err != nil:
		return err
	case ok:
		st.logged()
		return nil
	case r.OrderID == 0:
		return ErrNotRated
	case r.Comment == comment:
		return nil // written already, by this reply's first run
	case r.Comment == "":
		// Rated, no comment, and still refused: the order is no longer
		// theirs (a reissued link, their /forget) since Relay read it.
		return fmt.Errorf("order %d: %w", o.ID, ErrNotCustomer)
	}
	return ErrCommented
}

// Roster is one page (from 0) of /masters: the masters with their records,
// and how many masters there are. A page past the end is empty.
func (s *Service) Roster(ctx context.Context, page int) ([]RosterLine, int, error) {
	return s.deps.Masters.Roster(ctx, max(page, 0)*RosterPageSize, RosterPageSize)
}

// withRatings gives the finished orders of lines their ratings, for
// /orders.
func (s *Service) withRatings(ctx context.Context, lines []OrderLine) error {
	var ids []int64
	for _, l := range lines {
		if l.Order.State == Done || l.Order.State == Closed {
			ids = append(ids, l.Order.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	ratings, err := s.deps.Orders.Ratings(ctx, ids)
	if err != nil {
		return err
	}
	for i, l := range lines {
		if r, ok := ratings[l.Order.ID]; ok {
			lines[i].Rating = &r
		}
	}
	return nil
}
