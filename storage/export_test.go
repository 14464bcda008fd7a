package storage_test

import (
	"io/fs"

	"switchboard/migrations"
)

func migrationsDir() ([]string, error) {
	entries, err := fs.ReadDir(migrations.FS, ".")
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, err
}
