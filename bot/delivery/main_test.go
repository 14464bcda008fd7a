package delivery_test

import (
	"os"
	"testing"

	"switchboard/internal/testkit"
)

// The tests here mostly wait on the fake Bot API's pacing: at six at once
// the package took 39 s alone on a 2-vCPU host (60 s at go test's default
// of two there, beside the other packages) with at most 18 connections to
// PostgreSQL.
func TestMain(m *testing.M) {
	testkit.DefaultParallel(6)
	os.Exit(m.Run())
}
