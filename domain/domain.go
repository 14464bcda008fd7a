// Package domain holds what every workflow shares: the user, the not-found
// error that storage maps pgx.ErrNoRows to, the input error every workflow
// turns a user's input down with (InputError), the outgoing message and
// what a state change tells (outbox.go), the defaults every workflow
// service fills in (Defaults, OrDefault), the check of a workflow's
// transition table (Transitions) and the LISTEN a replica wakes on
// (Listen). Each workflow lives
// in its own subpackage (vacancy, analysis, dispatch, memory) and declares the
// small interfaces it needs; domain never imports bot, jobs, storage or telebot.
package domain

import (
	"errors"
	"time"
)

// MessageRef names a Telegram message: the chat and the message's id in it.
// A write keyed by the message that asked for it (an /order) happens once,
// however often that message's update is run.
type MessageRef struct {
	Chat int64
	ID   int
}

// ErrNotFound is returned by repositories when the row asked for does not exist.
var ErrNotFound = errors.New("not found")

// User is a Telegram user known to the bot.
type User struct {
	ID        int64
	Username  string
	FirstName string
	// Language is the one chosen with /lang; empty means Telegram's language_code decides.
	Language string
	// TelegramLanguage is the supported language nearest the client's
	// language_code, kept so that jobs can write in it too.
	TelegramLanguage string
	// TimeZone is the zone chosen with /timezone (an IANA name or
	// "UTC+03:00"); empty: not chosen, the bot infers one.
	TimeZone string
	// MasterCity is the city the user registered in as a master; empty
	// for everyone else. A master's times default to their city's zone.
	MasterCity string
	CreatedAt  time.Time
}

// Lang is the language to write to the user in: the one chosen with /lang,
// else the client's, else English.
func (u User) Lang() string {
	switch {
	case u.Language != "":
		return u.Language
	case u.TelegramLanguage != "":
		return u.TelegramLanguage
	}
	return "en"
}
