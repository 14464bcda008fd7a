// Package health is a replica's operator endpoints: /healthz (the process
// answers), /readyz (its dependencies answer and the schema is current,
// with reports that do not judge readiness) and /metrics.
package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check is one thing /readyz checks; an error makes the replica unready.
type Check struct {
	Name  string
	Check func(ctx context.Context) error
}

// Report is something /readyz shows without judging readiness by it.
type Report struct {
	Name string
	Read func(ctx context.Context) (any, error)
}

// Handler serves /healthz (the process answers), /readyz (its
// dependencies answer and the schema is current) and /metrics. /readyz
// also shows reports — the work held past its lease, say — whose values do
// not make the replica unready: taking a replica out of the load balancer
// would not free a claim a dead worker left; the reaper and the next
// claims do. Only a failing check (the database down) answers 503.
func Handler(reg *prometheus.Registry, checks []Check, reports ...Report) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		status := map[string]any{}
		code := http.StatusOK
		for _, c := range checks {
			if err := c.Check(ctx); err != nil {
				status[c.Name] = err.Error()
				code = http.StatusServiceUnavailable
				continue
			}
			status[c.Name] = "ok"
		}
		for _, rp := range reports {
			v, err := rp.Read(ctx)
			if err != nil {
				v = err.Error()
			}
			status[rp.Name] = v
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(status)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return mux
}

// Serve listens on addr and serves until ctx ends; the listener is bound
// before it returns so a port conflict fails start-up, not later.
func Serve(ctx context.Context, addr string, h http.Handler, log *slog.Logger) (stop func(context.Context) error, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on HTTP_ADDR %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server", "err", err)
		}
	}()
	log.Info("http listening", "addr", ln.Addr().String())
	return srv.Shutdown, nil
}
