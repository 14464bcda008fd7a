// Package tasks carries approved analysis proposals past the bot's edge:
// each tracked group names a destination (a GitHub repository, a webhook
// URL), approving a proposal queues a push to it in the approval's own
// transaction, and a worker files each push exactly once, whatever
// crashes or refusals come between (the marker a filed task carries lets a
// retry find what an earlier attempt filed). Before filing, a task whose
// title reads like an open task of its destination (dups.go) is held for
// the admins, who link it to that task or file it anyway. This file is the
// port to a tracker; the trackers themselves live in package tracker.
package tasks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// The kinds of destination.
const (
	KindGitHub  = "github"  // Target: "owner/repo"
	KindWebhook = "webhook" // Target: the URL signed JSON is posted to
)

// Destination is where a tracked group's approved tasks go.
type Destination struct {
	ChatID int64
	Kind   string
	Target string
	// OnClose: its tasks go when their run is closed, not as each is
	// approved (the admins review a whole run before anything leaves).
	OnClose bool
}

// Task is an approved proposal as a tracker receives it.
type Task struct {
	ProposalID  int64
	RunID       int64
	Title       string
	Description string
	Priority    string // low, medium, high
	// Assignee is the GitHub login the proposal's assignee maps to; ""
	// for none. Mention is the assignee as the messages named them.
	Assignee string
	Mention  string
	Deadline string // YYYY-MM-DD, "" for none
	Sources  []Source
	// ApprovedAt and ApprovedBy: when and by whom (a Telegram user id).
	ApprovedAt time.Time
	ApprovedBy int64
}

// Marker names the task in what its tracker stores: a retry looks for it
// before filing, so a push whose answer was lost is not filed twice.
func (t Task) Marker() string { return Marker(t.ProposalID) }

// Marker is the marker of proposal id's task.
func Marker(proposalID int64) string {
	return "switchboard-proposal-" + strconv.FormatInt(proposalID, 10)
}

// Source is a group message a task was made from.
type Source struct {
	ChatID    int64
	ChatTitle string
	MessageID int64
	// Link opens the message in Telegram (t.me/c/… for a supergroup); ""
	// where no link exists (a basic group), which Chat and At stand for.
	Link   string
	Author string
	Text   string
	At     time.Time
}

// Filed is a task in its tracker.
type Filed struct {
	// Number and URL name it there (a webhook's receiver has neither: 0
	// and "").
	Number int
	URL    string
	State  string // open, closed; "" where the tracker does not say
	// AssigneeDropped: the tracker refused the assignee (a login that
	// cannot be assigned), and the task was filed without one.
	AssigneeDropped bool
	// Created counts what filing made in the tracker that its content
	// limits count (GitHub: the issue, and a priority label made first);
	// 0 for a task found filed. The pacer reads it back (Config.Content).
	Created int
}

// Tracker files tasks into destinations of one kind.
type Tracker interface {
	// Find is the task filed for marker in target, if any: what an attempt
	// that crashed after the tracker's answer filed. It must see a task
	// filed a moment ago (no search index that lags).
	Find(ctx context.Context, target, marker string) (Filed, bool, error)
	// File files t in target.
	File(ctx context.Context, target string, t Task) (Filed, error)
}

// The refusals a tracker's error wraps, for the worker to act on.
var (
	// ErrAccess: the tracker refuses our credentials (a token revoked or
	// without access): the admins are told once and the pushes wait.
	ErrAccess = errors.New("the tracker refuses our credentials")
	// ErrGone: the destination is no more (a repository deleted, its
	// issues disabled, a webhook's URL answering 404 or 410): the admins
	// are told which, and its pushes wait for a new destination.
	ErrGone = errors.New("the destination is gone")
	// ErrRefused: the tracker refuses this task's request for what it
	// holds (GitHub's 400, or its 422 Validation Failed): the same request
	// would be refused again however long we waited, so the push is set
	// aside, the admins are told with the tracker's words, and the other
	// pushes go on; an admin sends it again once the cause is gone.
	ErrRefused = errors.New("the tracker refuses this task")
)

// RateLimited is a tracker's "not before": no request to it until Until.
type RateLimited struct {
	Until time.Time
	// Secondary: GitHub's secondary limit (too fast), not the hourly one.
	Secondary bool
}

func (e *RateLimited) Error() string {
	kind := "rate limit"
	if e.Secondary {
		kind = "secondary rate limit"
	}
	return fmt.Sprintf("tracker %s: not before %s", kind, e.Until.UTC().Format(time.RFC3339))
}
