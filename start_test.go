package main

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// `switchboard migrate` waits for an unreachable database only so long; an
// error waiting cannot fix (here a malformed URL) is returned at once.
func TestOpenStoreRetriesOnlyWhatWaitingCanFix(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now

	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	_, err = openStore(ctx, "postgres://postgres@"+addr+"/x?sslmode=disable", log, 2*time.Second)
	require.ErrorContains(t, err, "database not reachable within 2s")

	_, err = openStore(ctx, "postgres://postgres@127.0.0.1:notaport/x", log, 0)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "not reachable")

	// The server waits until it is told to stop.
	stopped, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = openStore(stopped, "postgres://postgres@"+addr+"/x?sslmode=disable", log, 0)
	require.ErrorContains(t, err, "stopped while waiting for the database")
}
