package vacancy_test

import (
	"os"
	"testing"

	"switchboard/internal/testkit"
)

// Four at once: the package took 58 s alone on a 2-vCPU host (about
// 100 s at go test's default of two there, beside the other packages).
// Its detail-fetch race holds two services of eight workers each, so the
// package reached 35 connections to PostgreSQL at four and 40 at eight;
// four leaves room for the two packages beside it.
func TestMain(m *testing.M) {
	testkit.DefaultParallel(4)
	os.Exit(m.Run())
}
