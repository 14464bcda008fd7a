package health

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"switchboard/storage"
)

// /readyz shows the work held past its lease but stays ready for it; only
// a failing check (the database down) makes it 503.
func TestReadyzReportsHeldWork(t *testing.T) {
	var dbErr error
	h := Handler(prometheus.NewRegistry(),
		[]Check{{Name: "postgres", Check: func(context.Context) error { return dbErr }}},
		Report{Name: "held_past_lease", Read: func(context.Context) (any, error) {
			if dbErr != nil {
				return nil, dbErr
			}
			return storage.HeldWork{PipelineRuns: 2, OutboxRows: 1}, nil
		}})
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		body, _ := io.ReadAll(rec.Result().Body)
		return rec.Code, string(body)
	}
	code, body := get()
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"postgres":"ok","held_past_lease":{"pipeline_runs":2,"vacancy_matches":0,"outbox_rows":1,"inbox_updates":0}}`, body)

	dbErr = errors.New("connection refused")
	code, body = get()
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.JSONEq(t, `{"postgres":"connection refused","held_past_lease":"connection refused"}`, body)
}
