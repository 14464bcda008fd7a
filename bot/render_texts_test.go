package bot

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain/analysis"
	"switchboard/locales"
)

// A commission deadline is typically whole days: "7 d", never "7 d 0 h".
func TestDurationOfWholeDays(t *testing.T) {
	rd := NewRenderer(RenderConfig{}, locales.MustLoad(), nil)
	for _, c := range []struct {
		lang string
		d    time.Duration
		want string
	}{
		{"en", 7 * 24 * time.Hour, "7 d"},
		{"ru", 7 * 24 * time.Hour, "7 д"},
		{"uk", 7 * 24 * time.Hour, "7 д"},
		{"en", 7*24*time.Hour + 3*time.Hour, "7 d 3 h"},
		{"uk", 26 * time.Hour, "1 д 2 год"},
		{"en", 3 * time.Hour, "3 h"},
	} {
		require.Equal(t, c.want, rd.duration(c.lang, c.d), "%s %s", c.lang, c.d)
	}
}

// A failed run names its step in the admins' language, not by its
// identifier in the code.
func TestRunFailureNamesTheStep(t *testing.T) {
	rd := NewRenderer(RenderConfig{}, locales.MustLoad(), nil)
	failed := func(step string, batch int) analysis.Event {
		return analysis.Event{Kind: analysis.EventFailed, Run: analysis.Run{ID: 3, State: analysis.Failed,
			ErrorLog: &analysis.ErrorLog{Step: step, Batch: batch, Error: "lease expired"}}}
	}
	require.Equal(t, "❌ Прогон #3: сбой на шаге «работа прервана»: lease expired", rd.renderRunEvent("ru", failed(analysis.StepInterrupted, 0)))
	require.Equal(t, "❌ Прогін #3: збій на кроці «пропозиції моделі», пакет 2: lease expired", rd.renderRunEvent("uk", failed(analysis.StepProposals, 2)))
	require.Equal(t, "❌ Run #3 failed at step proposals, batch 2: lease expired", rd.renderRunEvent("en", failed(analysis.StepProposals, 2)))
	require.Equal(t, "❌ Прогон #3: сбой на шаге «someday»: lease expired", rd.renderRunEvent("ru", failed("someday", 0)), "an unknown step as stored")
}
