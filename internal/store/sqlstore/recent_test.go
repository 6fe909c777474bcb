package sqlstore

import (
	"context"
	"testing"

	"github.com/meshnames/meshnames/internal/store"

	"github.com/meshnames/meshnames/internal/store/storetest"
)

// TestRecent_SameAsTheDatabase writes random creates, updates, status
// patches and deletes, some in batches, and checks that the changes served
// from the events kept in memory equal those read from the database, from
// every revision and with several limits.
func TestRecent_SameAsTheDatabase(t *testing.T) {
	s, err := openSQLite(t, t.TempDir(), schema(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	storetest.RecentMatchesDatabase(t, s, &s.recent, func(ctx context.Context, after int64, limit int) ([]store.Event, error) {
		return s.changesFromDB(ctx, after, limit, nil)
	})
}

// TestChangesKnown runs storetest.KnownFeed on the database's feed.
func TestChangesKnown(t *testing.T) {
	s, err := openSQLite(t, t.TempDir(), schema(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.KnownFeed(t, s, s.recent.Clear)
}
