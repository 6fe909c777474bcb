// Package storetest is the conformance suite of store.Store: Run is written
// once and every backend's tests call it (sqlite/sqlite_test.go,
// postgres/postgres_test.go), so the backends cannot drift apart. It also
// holds the benchmarks both backends run.
//
// It imports store, store/backend and resource (and testing); production
// code must not
// import it. The suite's subtests run in parallel, each on its own fresh
// storage, with a fake clock so that no test sleeps.
package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/store"
)

// Opener opens a store on fresh, empty backing storage that belongs to t,
// with now as its clock, and closes it when t ends. reopen opens the same
// storage again with the same clock; the suite calls it only after closing
// the store it had.
type Opener func(t testing.TB, now func() time.Time) (s store.Store, reopen func() store.Store)

// Clock is a fake clock that moves only when told.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at a fixed time with nanoseconds, so that a
// backend that drops precision fails the round-trip tests.
func NewClock() *Clock {
	return &Clock{t: time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// waitTimeout bounds every wait for something that should happen at once;
// it is a deadline against hangs, not a delay.
const waitTimeout = 10 * time.Second
