package bot_test

import (
	"os"
	"testing"

	"switchboard/internal/testkit"
)

// The tests here mostly wait on the fake Bot API's pacing and the outbox,
// not on the processor: at six at once the package took 90 s alone on a
// 2-vCPU host (128 s at four, about 240 s at go test's default of two
// there) with at most 26 connections to PostgreSQL.
func TestMain(m *testing.M) {
	testkit.DefaultParallel(6)
	os.Exit(m.Run())
}
