package main

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

// readiness is one thing /readyz checks; an error makes the replica unready.
type readiness struct {
	name  string
	check func(ctx context.Context) error
}

// report is something /readyz shows without judging readiness by it.
type report struct {
	name string
	read func(ctx context.Context) (any, error)
}

// newHTTPHandler serves /healthz (the process answers), /readyz (its
// dependencies answer and the schema is current) and /metrics. /readyz
// also shows reports — the work held past its lease, say — whose values do
// not make the replica unready: taking a replica out of the load balancer
// would not free a claim a dead worker left; the reaper and the next
// claims do. Only a failing check (the database down) answers 503.
func newHTTPHandler(reg *prometheus.Registry, checks []readiness, reports ...report) http.Handler {
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
			if err := c.check(ctx); err != nil {
				status[c.name] = err.Error()
				code = http.StatusServiceUnavailable
				continue
			}
			status[c.name] = "ok"
		}
		for _, rp := range reports {
			v, err := rp.read(ctx)
			if err != nil {
				v = err.Error()
			}
			status[rp.name] = v
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(status)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return mux
}

// serveHTTP listens on addr and serves until ctx ends; the listener is bound
// before it returns so a port conflict fails start-up, not later.
func serveHTTP(ctx context.Context, addr string, h http.Handler, log *slog.Logger) (stop func(context.Context) error, err error) {
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
