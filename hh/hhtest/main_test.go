package hhtest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Latency, cancellation and Close all involve goroutines on both sides of
// the connection; goleak proves none of them outlives the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
