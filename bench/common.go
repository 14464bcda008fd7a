package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"switchboard/storage"
)

// runScenario is the tail every scenario's run shares once its flags are
// parsed: it profiles the CPU into cpuprofile ("" profiles nothing) while
// bench runs, then prints bench's report as one JSON object, the last line
// of stdout.
func runScenario[R any](stdout io.Writer, cpuprofile string, bench func() (R, error)) error {
	stop, err := startCPUProfile(cpuprofile)
	if err != nil {
		return err
	}
	defer stop()
	rep, err := bench()
	if err != nil {
		return err
	}
	line, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", line)
	return err
}

// benchDB is a scenario's own database (switchboard_bench_<random>) on the
// -db server, created and migrated by openBenchDB and dropped by close.
type benchDB struct {
	store     *storage.Store
	server    string // the -db server URL, which drops it
	name      string
	url       string // the database's own URL
	pgVersion string // SHOW server_version
}

// openBenchDB creates a fresh bench database on server, opens a store on it
// and migrates it. When it fails after naming the database, it has closed
// the store and dropped the database already, the drop's error joined to
// its own; otherwise the caller defers close.
func openBenchDB(ctx context.Context, server string, log *slog.Logger) (_ *benchDB, err error) {
	name, dbURL, err := benchDatabaseURL(server)
	if err != nil {
		return nil, err
	}
	db := &benchDB{server: server, name: name, url: dbURL}
	opened := false
	defer func() {
		// On a panic too, as the scenarios' deferred close does.
		if !opened {
			db.close(&err)
		}
	}()
	// storage.Open creates the missing database, as it does for a newcomer.
	if db.store, err = storage.Open(ctx, dbURL, log); err != nil {
		return nil, err
	}
	if err := db.store.Migrate(ctx); err != nil {
		return nil, err
	}
	if err := db.store.Pool().QueryRow(ctx, `SHOW server_version`).Scan(&db.pgVersion); err != nil {
		return nil, err
	}
	opened = true
	return db, nil
}

// close closes the store (if open) and drops the database, disconnecting
// whatever still holds it, whatever happened: a drop's failure is joined
// into *err. Scenarios defer it with their named error result.
func (db *benchDB) close(err *error) {
	if db.store != nil {
		db.store.Close()
	}
	if derr := dropDatabase(db.server, db.name); derr != nil {
		*err = errors.Join(*err, fmt.Errorf("drop database %s: %w", db.name, derr))
	}
}
