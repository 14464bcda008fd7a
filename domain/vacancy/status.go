package vacancy

import (
	"errors"
	"slices"

	"switchboard/domain"
)

// Status is where a (user, vacancy) match is in the workflow.
type Status string

// The statuses of the vacancy table in docs/ARCHITECTURE.md ("Vacancies").
const (
	// New is a recovered match about to re-enter the queue.
	New Status = "NEW"
	// Queued waits for a worker: HH detail, ban words, LLM.
	Queued Status = "QUEUED"
	// Analyzed was judged relevant; its card waits in the outbox (written
	// by the same transaction). A card dropped because the user blocked
	// the bot leaves the match here.
	Analyzed Status = "ANALYZED"
	// SentToUser was delivered with buttons: Telegram accepted the card.
	SentToUser Status = "SENT_TO_USER"
	// Skipped failed Config.MaxFailures turns (or its card could not be
	// rendered, or the database refused its result); recovery retries it,
	// but for the refused.
	Skipped Status = "SKIPPED"
	// NotSuitable was judged not relevant (final).
	NotSuitable Status = "NOT_SUITABLE"
	// InArchive: HH no longer serves the vacancy (final).
	InArchive Status = "IN_ARCHIVE"
	// Applied: the user pressed Applied; the application waits for the
	// employer's answer, which the person reports (pipeline.go).
	Applied Status = "APPLIED"
	// NotInterested: the user pressed Not interested; Undo on the card
	// brings it back to SentToUser.
	NotInterested Status = "NOT_INTERESTED"
	// Invited: the employer invited the person to an interview or a test.
	Invited Status = "INVITED"
	// Offer: the employer made an offer (final).
	Offer Status = "OFFER"
	// Rejected: the employer turned the person down (final).
	Rejected Status = "REJECTED"
	// NoAnswer: the person reports the employer has not answered; an
	// answer may still come.
	NoAnswer Status = "NO_ANSWER"
)

// Statuses lists every status in workflow order (for counts and CHECKs).
var Statuses = []Status{New, Queued, Analyzed, SentToUser, Skipped, NotSuitable, InArchive, Applied, NotInterested,
	NoAnswer, Invited, Offer, Rejected}

// transitions is docs/ARCHITECTURE.md's table, plus NEW and SKIPPED → IN_ARCHIVE:
// a vacancy HH reports archived takes every open match of it along, in
// one statement (storage's ArchiveVacancy), not only the one claimed. Entering QUEUED from nothing (fetch)
// and leaving QUEUED by deletion (ban word) are not status changes and are
// handled by their own statements. ANALYZED → SENT_TO_USER happens on the
// card's delivery: the workflow's delivery hook (storage/vacancy_matches.go),
// checked against this table, makes it in the statement that marks the
// card's outbox row sent, with the chat, message id and sent_at.
var transitions = domain.NewTransitions(ErrIllegalTransition, "", map[Status][]Status{
	New:           {Queued, InArchive},                         // recovered item re-enters the queue; its vacancy archived
	Queued:        {InArchive, Analyzed, NotSuitable, Skipped}, // HH 404; LLM verdict (+ card to the outbox); technical failure
	Analyzed:      {SentToUser},                                // the card delivered (its delivery hook)
	SentToUser:    {Applied, NotInterested},                    // the user's button
	NotInterested: {SentToUser},                                // the user's Undo on the card
	Skipped:       {New, InArchive},                            // recovery within the window; its vacancy archived
	// The job seeker's pipeline (pipeline.go): what the person reports
	// after applying, by the buttons of the card, of a follow-up reminder
	// or of /applications. There is no way back: a press meant for an
	// earlier state is refused as stale.
	Applied:  {Invited, Rejected, NoAnswer}, // the employer answered, or has not so far
	NoAnswer: {Invited, Rejected},           // a late answer
	Invited:  {Offer, Rejected},             // the interview's outcome
})

// ErrIllegalTransition is returned for a change the table does not allow.
var ErrIllegalTransition = errors.New("illegal vacancy status transition")

// CanTransition reports whether the table allows from → to.
func CanTransition(from, to Status) bool { return transitions.Can(from, to) }

// checkTransition returns a wrapped ErrIllegalTransition for a change the
// table refuses.
func checkTransition(from, to Status) error { return transitions.Check(from, to) }

// Final reports whether nothing leaves s.
func (s Status) Final() bool { return transitions.Final(s) }

// Valid reports whether s is one of Statuses.
func (s Status) Valid() bool { return slices.Contains(Statuses, s) }
