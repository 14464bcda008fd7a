package storage_test

import (
	"os"
	"testing"

	"switchboard/internal/testkit"
)

// The tests here mostly wait on PostgreSQL (a database cloned for each,
// leases run out): at eight at once the package took 29 s alone on a
// 2-vCPU host (78 s at go test's default of two there) with at most 32
// connections to the server.
func TestMain(m *testing.M) {
	testkit.DefaultParallel(8)
	os.Exit(m.Run())
}
