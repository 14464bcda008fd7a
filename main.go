// Command switchboard is a Telegram bot that is the only interface to four
// workflows — vacancies, analysis runs, dispatch and memory chat — over one
// PostgreSQL, one Redis and one LLM. This file and app.go are the only places
// that know every package: they read the configuration, wire the pieces,
// start them, and stop them in reverse order on SIGINT/SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"switchboard/config"
	"switchboard/domain/resume"
	"switchboard/internal/isolate"
)

// extractCommand makes the binary the child that reads one résumé file
// (resume.Isolated); it is not in the help, which is for people.
const extractCommand = "extract-resume"

// extractMemory is the child's heap limit (isolate.Limit): a 20 MB file's
// text and the PDF library's objects fit many times over.
const extractMemory = 256 << 20

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
}

// run is main without os.Exit, so tests can drive it.
func run(args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("switchboard", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { config.PrintHelp(stdout) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	cmd := fs.Arg(0)
	switch cmd {
	case extractCommand:
		// The bot's own child (isolate): no configuration, no logs; the
		// file on stdin, its text on stdout.
		isolate.Limit(extractMemory)
		if err := resume.ServeExtract(os.Stdin, stdout); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		return 0
	case "", "migrate":
	case "version":
		fmt.Fprintln(stdout, "switchboard", version)
		return 0
	default:
		fmt.Fprintf(stderr, "unknown command %q\n\n", cmd)
		config.PrintHelp(stderr)
		return 2
	}
	cfg, err := config.Load(lookup, version)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	log := config.NewLogger(cfg.LogLevel, stdout, &cfg)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if cmd == "migrate" {
		if err := migrateOnly(ctx, cfg, log); err != nil {
			log.Error("migrate failed", "err", err)
			return 1
		}
		return 0
	}
	log.Info("switchboard starting", "version", version, "config", cfg)
	a, err := newApp(ctx, cfg, log)
	if err != nil {
		log.Error("start failed", "err", err)
		return 1
	}
	if err := a.run(ctx); err != nil {
		log.Error("stopped with error", "err", err)
		return 1
	}
	return 0
}
