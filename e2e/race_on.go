//go:build race

package e2e

// raceEnabled builds the binary under test with -race when the tests run
// with it, so data races inside the bot fail the end-to-end suite too.
const raceEnabled = true
