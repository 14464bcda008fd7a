// Package isolate runs a piece of work that reads untrusted bytes in a child
// process of this same binary, with a deadline. A parser that loops for ever
// on a crafted file (a PDF whose page tree holds itself) cannot be stopped
// inside the process: a goroutine is not killed, and it would spin on one
// core until the bot restarts. A child is killed at its deadline, and a
// child that runs out of memory or crashes takes only itself down.
//
// The parent runs Child.Run; the child is the binary started with
// Child.Args, whose main hands its stdin and stdout to the work
// (resume.ServeExtract, for résumés) and calls Limit first.
package isolate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"time"
)

// ErrTimeout means the child was still working at its deadline and was
// killed: the input's fault, as a healthy input takes a fraction of it.
var ErrTimeout = errors.New("isolate: the child was killed at its deadline")

// CrashError means the child ended without an answer: a panic, the memory
// limit, a signal. Tail is the end of what it wrote to stderr.
type CrashError struct {
	Err  error
	Tail string
}

func (e *CrashError) Error() string {
	return fmt.Sprintf("isolate: the child failed: %v: %s", e.Err, e.Tail)
}

func (e *CrashError) Unwrap() error { return e.Err }

// Child starts one process per Run.
type Child struct {
	// Path is the binary (os.Executable(), for this one) and Args the
	// command that makes it the child.
	Path string
	Args []string
	// Timeout bounds one Run (0: 30 s); MaxOutput bounds what it keeps
	// of the child's stdout (0: 16 MiB), past which the child is killed.
	Timeout   time.Duration
	MaxOutput int64
}

// Run starts the child with stdin and returns what it wrote to stdout once
// it exits 0. An error that is not ErrTimeout or a *CrashError means the
// child could not be started (the binary is gone, no memory for a
// process): that is the machine's fault, not the input's.
func (c Child) Run(ctx context.Context, stdin []byte) ([]byte, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	max := c.MaxOutput
	if max <= 0 {
		max = 16 << 20
	}
	run, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(run, c.Path, c.Args...)
	cmd.Stdin = bytes.NewReader(stdin)
	out := &capped{max: max, cancel: cancel}
	cmd.Stdout = out
	var stderr tail
	cmd.Stderr = &stderr
	// The child gets no environment: nothing of the bot's settings (its
	// token, the database's password) is any of its business.
	cmd.Env = []string{}
	// A grandchild holding the pipes open must not hold Run past the kill.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("isolate: start %s: %w", c.Path, err)
	}
	err := cmd.Wait()
	switch {
	case out.over:
		return nil, &CrashError{Err: fmt.Errorf("more than %d bytes of output", max), Tail: stderr.String()}
	case ctx.Err() != nil: // the caller stopped: nobody's fault
		return nil, fmt.Errorf("isolate: %w", ctx.Err())
	case run.Err() != nil:
		return nil, fmt.Errorf("%w (%s)", ErrTimeout, timeout)
	case err != nil:
		return nil, &CrashError{Err: err, Tail: stderr.String()}
	}
	return out.buf.Bytes(), nil
}

// Limit is the child's first call. Under memory the collector works harder
// rather than let the heap grow (debug.SetMemoryLimit), so a large but sane
// file still fits; past it the child ends at once (exit 3, "memory limit"
// on stderr), so that a decompression bomb takes only the child down, never
// the machine's memory from the bot or its database. The heap is read every
// 20 ms (runtime/metrics, no stop of the world): a bomb overshoots by what
// it allocates in that time.
func Limit(memory int64) {
	if memory <= 0 {
		return
	}
	debug.SetMemoryLimit(memory)
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		for range time.Tick(20 * time.Millisecond) {
			metrics.Read(sample)
			if used := sample[0].Value.Uint64(); used > uint64(memory) {
				fmt.Fprintf(os.Stderr, "isolate: memory limit: %d bytes of heap, limit %d\n", used, memory)
				os.Exit(3)
			}
		}
	}()
}

// capped keeps at most max bytes and cancels the run past them.
type capped struct {
	buf    bytes.Buffer
	max    int64
	over   bool
	cancel context.CancelFunc
}

func (c *capped) Write(p []byte) (int, error) {
	if int64(c.buf.Len()+len(p)) > c.max {
		c.over = true
		c.cancel()
		return 0, io.ErrShortWrite
	}
	return c.buf.Write(p)
}

// tail keeps the last 2 KiB written: a panic's message and first frames.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 2048 {
		t.b = t.b[len(t.b)-2048:]
	}
	return len(p), nil
}

func (t *tail) String() string { return strings.TrimSpace(string(t.b)) }
