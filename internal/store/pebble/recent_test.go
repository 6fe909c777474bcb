package pebble

import (
	"testing"

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
	storetest.RecentMatchesDatabase(t, s, &s.recent, s.changesFromDB)
}
