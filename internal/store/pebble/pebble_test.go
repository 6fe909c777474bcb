package pebble_test

import (
	"errors"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/pebble"
	"github.com/meshnames/meshnames/internal/store/storetest"
)

// openIn opens the store in dir and closes it when tb ends.
func openIn(tb testing.TB, dir string, opts ...pebble.Option) *pebble.Store {
	tb.Helper()
	s, err := pebble.Open(dir, opts...)
	if err != nil {
		tb.Fatalf("Open(%q) = %v", dir, err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
			tb.Errorf("Close = %v", err)
		}
	})
	return s
}

func open(tb testing.TB, now func() time.Time) (store.Store, func() store.Store) {
	tb.Helper()
	dir := tb.TempDir()
	reopen := func() store.Store { return openIn(tb, dir, pebble.WithClock(now)) }
	return reopen(), reopen
}

func TestConformance(t *testing.T) {
	storetest.Run(t, open)
}
