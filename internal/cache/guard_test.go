//go:build race

package cache

import (
	"strings"
	"testing"
)

// TestCache_GuardCatchesAModifiedSharedObject: in race builds, a reader
// that modifies what Peek handed out makes the next hand-out fail loudly.
func TestCache_GuardCatchesAModifiedSharedObject(t *testing.T) {
	c, st, _ := newCache(t)
	a := mustCreate(t, st, svc("default", "a", map[string]string{"team": "x"}))
	wait(t, c, a.Revision)
	o, ok := c.Peek(a.Key())
	if !ok {
		t.Fatal("Peek found nothing")
	}
	if again, _ := c.Peek(a.Key()); again != o {
		t.Fatal("a second Peek of an unchanged resource gave another object")
	}
	o.Labels["team"] = "y" // what a reader must not do
	defer func() {
		r := recover()
		if msg, _ := r.(string); !strings.Contains(msg, "was modified after the cache handed it out shared") {
			t.Errorf("Peek after a modification: recovered %v, want the guard's panic", r)
		}
	}()
	c.Peek(a.Key())
}
