package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/api"
)

// TestHistory_WhoHeldAVIPAndAName creates a service, deletes it and
// creates another that gets the same hostname, then asks meshnames inspect
// history who held the first service's VIP and the hostname: the
// controllers recorded each assignment with the status that made it, and
// each release when the service went.
func TestHistory_WhoHeldAVIPAndAName(t *testing.T) {
	p := start(t, "server", "--data-dir", t.TempDir())
	p.waitReady(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	apply := func(doc string) {
		t.Helper()
		if _, stderr, err := run(t, ctx, []byte(doc), "apply", "-f", "-", "--server", p.api); err != nil {
			t.Fatalf("apply: %v\n%s", err, stderr)
		}
	}
	apply("type: MeshService\nname: cache\nmesh: default\nspec:\n  ports:\n  - port: 6379\n")
	vip := waitVIP(t, p.api, "cache")
	if _, stderr, err := run(t, ctx, nil, "delete", "meshservice", "cache", "--server", p.api); err != nil {
		t.Fatalf("delete: %v\n%s", err, stderr)
	}
	apply("type: MeshService\nname: cache\nmesh: prod\nspec:\n  ports:\n  - port: 6379\n---\n" +
		"type: Mesh\nname: prod\n")
	report := func(flag, value string, wantHolders int) api.HistoryReport {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			out, stderr, err := run(t, ctx, nil, "inspect", "history", flag, value, "-o", "json", "--server", p.api)
			if err != nil {
				t.Fatalf("inspect history: %v\n%s", err, stderr)
			}
			var r api.HistoryReport
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if len(r.Holders) >= wantHolders && (wantHolders == 0 || !r.Holders[0].Until.IsZero()) {
				return r
			}
			if time.Now().After(deadline) {
				t.Fatalf("history of %s %s: %+v, want %d holders, the first ended", flag, value, r, wantHolders)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	r := report("--vip", vip, 1)
	h := r.Holders[0]
	if h.Mesh != "default" || h.Name != "cache" || h.From.IsZero() || h.Until.IsZero() || h.End != api.HistoryReleased || h.Reason != "the service was deleted" {
		t.Errorf("holder of %s: %+v, want default/cache from its naming until its deletion", vip, h)
	}
	// The hostname: held in mesh default, released, then held in mesh prod.
	r = report("--hostname", "cache.svc.mesh.local", 2)
	if len(r.Holders) != 2 || r.Holders[0].Mesh != "default" || r.Holders[1].Mesh != "prod" || !r.Holders[1].Until.IsZero() {
		t.Errorf("holders of cache.svc.mesh.local: %+v, want default/cache (ended) then prod/cache (holding)", r.Holders)
	}
	if !r.Holders[0].Until.After(r.Holders[0].From) || r.Holders[1].From.Before(r.Holders[0].Until) {
		t.Errorf("holdings overlap or run backwards: %+v", r.Holders)
	}
}
