package pebble

import (
	"context"
	"testing"

	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/storetest"
)

// TestRecent_SameAsTheDatabase checks that Changes served from memory
// equals Changes read from the revision keys.
func TestRecent_SameAsTheDatabase(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.RecentMatchesDatabase(t, s, &s.recent, func(ctx context.Context, after int64, limit int) ([]store.Event, error) {
		return s.changesFromDB(ctx, after, s.synced.last.Load(), limit, nil)
	})
}

// TestChangesKnown runs storetest.KnownFeed on the database's feed.
func TestChangesKnown(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.KnownFeed(t, s, s.recent.Clear)
}
