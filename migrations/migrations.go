// Package migrations holds Switchboard's schema as numbered goose SQL files,
// and the few data rewrites that need the domain's code as numbered Go
// files (Go lists them). They are built into the binary so `switchboard
// migrate` and every start apply exactly the schema the code was built
// against. Add a change as the next number, in one file or the other;
// never edit one that has shipped.
package migrations

import (
	"embed"

	"github.com/pressly/goose/v3"
)

// FS holds every *.sql migration in this folder.
//
//go:embed *.sql
var FS embed.FS

// Go is the Go migrations, new values for each provider (goose links the
// ones it is given): pass them with goose.WithGoMigrations.
func Go() []*goose.Migration {
	return []*goose.Migration{
		goose.NewGoMigration(56, &goose.GoFunc{RunTx: canonicalSearches}, &goose.GoFunc{}),
	}
}
