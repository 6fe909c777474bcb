package zonesync

import (
	"context"
	"fmt"
	"testing"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// TestSync_FullStateOfMoreBatchesThanInFlight: a full state the peer asked
// for, in more batches than the sender sends ahead of acknowledgements,
// arrives whole. The receiver acknowledges a full state only once its
// last batch is in (its position moves then), so the sender must not
// wait for acknowledgements between a full state's batches.
func TestSync_FullStateOfMoreBatchesThanInFlight(t *testing.T) {
	defer func(n, items int) { maxInFlight, batchItems = n, items }(maxInFlight, batchItems)
	maxInFlight, batchItems = 2, 50
	f := newFederation(t, "east", "west")
	east, west := f.zones["east"], f.zones["west"]
	n := 3*batchItems + 10 // four batches of east's services, and what the global holds besides
	for i := range n {
		east.put(meshService("default", fmt.Sprintf("s%d", i), 80), resource.ModeZone, "east")
	}
	last := msKey("default", HashedName(resource.MeshService, "default", fmt.Sprintf("s%d", n-1), "east", ""))
	west.eventually("east's last service", last, exists)
	f.waitAcked(t, "west")
	west.waitLogs(heldAll("global"), 1)
	f.stop("west")
	ghost := meshService("default", HashedName(resource.MeshService, "default", "ghost", "east", ""), 80)
	ghost.Labels = map[string]string{resource.LabelOrigin: resource.OriginGlobal, resource.LabelZone: "east", resource.LabelDisplayName: "ghost"}
	if _, err := store.Create(context.Background(), west.st, ghost); err != nil {
		t.Fatal(err)
	}
	f.start("west")
	west.waitLog(`msg="what this side holds of the peer's differs from the peer's inventory; asking for a full state" peer=global`)
	west.eventually("the ghost, deleted by the full state's last batch", ghost.Key(), absent)
	if in := f.insight(t, "west"); in.SentSnapshots != 1 {
		t.Errorf("west got %d full states, want 1", in.SentSnapshots)
	}
}
