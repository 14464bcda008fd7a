package tasks_test

import (
	"errors"
	"net/url"
	"testing"

	"switchboard/domain"
	"switchboard/domain/tasks"
)

// Whatever an admin gives /tracker, ParseDestination refuses with a reason
// the admin can read, or returns a destination a push can reach: a
// repository's owner/name, or a webhook's absolute http(s) URL with a host.
func FuzzParseDestination(f *testing.F) {
	for _, s := range [][3]string{
		{"github", "acme/tracker", ""}, {"github", "https://github.com/acme/tracker/", "close"}, {"github", "acme", ""},
		{"webhook", "https://hooks.example.com/tasks?k=1", "approve"}, {"webhook", "https://", ""}, {"webhook", "http://:80/x", ""},
		{"webhook", "https://exa mple.com", ""}, {"none", "", ""}, {"jira", "X", ""}, {"github", "acme/tracker", "later"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, kind, target, when string) {
		d, err := tasks.ParseDestination(kind, target, when)
		if err != nil {
			var ie *domain.InputError
			if !errors.As(err, &ie) {
				t.Fatalf("%q %q %q refused with %v, which the admin cannot be told", kind, target, when, err)
			}
			return
		}
		if d.Kind == tasks.KindWebhook {
			u, err := url.Parse(d.Target)
			if err != nil || u.Host == "" || u.Hostname() == "" || (u.Scheme != "https" && u.Scheme != "http") {
				t.Fatalf("webhook %q accepted, which no push can reach (%v)", d.Target, err)
			}
		}
	})
}
