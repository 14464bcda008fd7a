package outage

import (
	"context"
	"time"

	"switchboard/domain"
	"switchboard/hh"
	"switchboard/llm"
)

// LLMKey is the admin_notices key of "the LLM refuses the model or key".
const LLMKey = "llm_refused"

// HHKey is the admin_notices key of "HH refuses our requests".
const HHKey = "hh_refused"

// LLM asks the model server at start which configured models it lacks
// (logging the fix for each), then follows this replica's LLM client: when
// a refusal (model not found, 401/403) opens its breaker the admin chat is
// told, and when this replica's calls succeed again after a refusal it
// saw, the end is told; a refusal a replica that died told ends with this
// replica's first call that succeeds. notice renders either (reason "":
// the end).
func LLM(d Deps, c *llm.Client, notice func(reason string) []domain.Message) *Watch {
	return &Watch{
		deps: d, key: LLMKey, what: "the LLM refuses the model or key; work waits", back: "the LLM answers again",
		start: func(ctx context.Context) { checkModels(ctx, d, c) },
		reason: func() (string, string) {
			if rf := c.Refusal(); rf != nil {
				return rf.Reason, ""
			}
			return "", ""
		},
		over:     func() bool { return c.BreakerState() == llm.BreakerClosed },
		answered: c.Answered,
		notice:   func(reason, _ string) []domain.Message { return notice(reason) },
	}
}

func checkModels(ctx context.Context, d Deps, c *llm.Client) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	missing, err := c.CheckModels(cctx)
	cancel()
	switch {
	case err != nil:
		d.Log.Warn("could not ask the LLM server which models it serves", "err", err)
	case len(missing) == 0:
		d.Log.Info("the LLM server serves every configured model")
	}
	for _, m := range missing {
		d.Log.Error("LLM model missing", "model", m.Model, "setting", m.Setting, "fix", m.Fix)
	}
}

// HH follows this replica's HH breaker: when HH blocks us (captcha,
// forbidden, 429) the admin chat is told, with the captcha's URL and how
// to be let in for good, and once when HH answers again (a block a replica
// that died told: when HH answers this one); then ended runs
// (vacancy work that waited for HH goes on now, not at the next sweep).
func HH(d Deps, c *hh.Client, notice func(reason, captcha string) []domain.Message, ended func()) *Watch {
	return &Watch{
		deps: d, key: HHKey, what: "HH refuses our requests; vacancy work waits", back: "HH answers again",
		reason: func() (string, string) {
			if r := c.Block(); r != nil {
				return r.Short(), r.CaptchaURL
			}
			return "", ""
		},
		over:     func() bool { return true },
		answered: c.Answered,
		notice:   notice,
		ended:    ended,
	}
}
