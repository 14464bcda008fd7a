// Package service runs a replica's long-lived loops as one list: each on a
// goroutine of its own, all told to stop at once, and waited for together,
// so that the wiring neither counts goroutines by hand nor forgets one.
package service

import (
	"context"
	"sync"
)

// Service is a loop that runs until its context ends.
type Service interface {
	Run(ctx context.Context)
}

// Func adapts a function to Service.
type Func func(ctx context.Context)

// Run implements Service.
func (f Func) Run(ctx context.Context) { f(ctx) }

// Group is services started together.
type Group struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs every service under a context of its own, which only Cancel
// ends (ctx's end does not): the caller's shutdown decides when they stop.
func Start(ctx context.Context, list ...Service) *Group {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	g := &Group{cancel: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(len(list))
	for _, s := range list {
		go func() { defer wg.Done(); s.Run(runCtx) }()
	}
	go func() { wg.Wait(); close(g.done) }()
	return g
}

// Cancel tells every service to stop; it does not wait.
func (g *Group) Cancel() { g.cancel() }

// Wait waits until every service has returned (true) or ctx ends (false).
func (g *Group) Wait(ctx context.Context) bool {
	select {
	case <-g.done:
		return true
	case <-ctx.Done():
		return false
	}
}
