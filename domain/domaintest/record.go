package domaintest

import (
	"slices"
	"sync"
)

// Record appends v to *list under mu. The tests' stand-ins for the bot
// record what the services asked them to render from the services'
// goroutines while the test reads it from its own; one mu guards all of
// a stand-in's lists.
func Record[T any](mu *sync.Mutex, list *[]T, v T) {
	mu.Lock()
	defer mu.Unlock()
	*list = append(*list, v)
}

// Recorded is a copy of *list taken under mu: what Record kept so far,
// safe to read while the services record more.
func Recorded[T any](mu *sync.Mutex, list *[]T) []T {
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(*list)
}
