package migrations_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"switchboard/storage/storagetest"
)

// before gives a fresh database migrated up to version, as a database of
// the build before holds it, for a test to fill and then take past the
// migration under test; ctx ends with the test, a minute at the most.
func before(t *testing.T, version int64) (context.Context, *sql.DB, *goose.Provider) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	_, db, p := storagetest.Migrator(t)
	_, err := p.UpTo(ctx, version)
	require.NoError(t, err)
	return ctx, db, p
}
