// Package migrations holds Switchboard's schema as numbered goose SQL files.
// They are embedded in the binary so `switchboard migrate` and every start
// apply exactly the schema the code was built against. Add a change as the
// next number; never edit a file that has shipped.
package migrations

import "embed"

// FS holds every *.sql migration in this folder.
//
//go:embed *.sql
var FS embed.FS
