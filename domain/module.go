package domain

import (
	"context"
	"time"
)

// Module is what one workflow plugs into the house beside its commands
// and buttons (which the bot registers, bot/bot.go's registerWorkflows):
// its periodic jobs, its long-running loops, and what it does when
// Telegram refuses one of its messages for good. Each workflow's Service
// returns its own (Module methods); app.go composes them in one list and
// wires each part where it runs, so a new workflow adds one entry there.
type Module struct {
	// Name is the workflow's, for logs.
	Name string
	// Jobs run on a schedule, each locked per tick across replicas.
	Jobs []Job
	// Loops run on every replica until ctx ends; listen is the
	// database's LISTEN, for the loops that wake on a NOTIFY.
	Loops []Loop
	// Drops are called, by the outbox kind of a message Telegram refused
	// for good (the chat blocked the bot, say), with the row's reference.
	Drops map[string]func(ctx context.Context, ref int64)
}

// Job is a periodic job: Run every Every, on one replica per tick.
type Job struct {
	Name  string
	Every time.Duration
	Run   func(context.Context) error
}

// Loop is a long-running part of a workflow; it returns when ctx ends.
type Loop func(ctx context.Context, listen Listen)

// WakeOn is a loop that calls wake on every NOTIFY of channel and on each
// (re)connect of the listener, when a notification may have been missed.
func WakeOn(channel string, wake func()) Loop {
	return func(ctx context.Context, listen Listen) {
		listen(ctx, channel, wake, func(string) { wake() })
	}
}

// Uncounted adapts a job that also returns what it did to Job.Run, which
// takes only the error.
func Uncounted[T any](job func(context.Context) (T, error)) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := job(ctx)
		return err
	}
}
