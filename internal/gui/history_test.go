package gui

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/history"
	"github.com/meshnames/meshnames/internal/resource"
)

// TestHistory_WhoHeldIt checks that "who is this?" and the service page
// show who held a VIP and a hostname over time, from the store's history.
func TestHistory_WhoHeldIt(t *testing.T) {
	u := newUnit(t, []*resource.Object{mesh("default"),
		svc("default", "redis", nil, []string{"241.0.0.1"}, held("redis.svc.mesh.local", "local"))})
	t1 := created.Add(-2 * time.Hour)
	events := []api.HistoryEvent{
		{Time: t1, Zone: "default", Mesh: "default", Kind: resource.MeshService, Name: "old-cache", VIP: "241.0.0.1", Event: api.HistoryAssigned},
		{Time: t1.Add(time.Hour), Zone: "default", Mesh: "default", Kind: resource.MeshService, Name: "old-cache", VIP: "241.0.0.1", Event: api.HistoryReleased, Reason: "the service was deleted"},
		{Time: t1.Add(90 * time.Minute), Zone: "default", Mesh: "default", Kind: resource.MeshService, Name: "redis", VIP: "241.0.0.1", Event: api.HistoryAssigned},
		{Time: t1.Add(90 * time.Minute), Zone: "default", Mesh: "default", Kind: resource.MeshService, Name: "redis", Hostname: "redis.svc.mesh.local", Event: api.HistoryAssigned},
	}
	for _, e := range events {
		op, err := history.Op(e)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := u.st.Apply(context.Background(), op); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		path string
		want []string
	}{
		{"/gui/search?q=241.0.0.1", []string{"Held over time", "MeshService default/old-cache", "2026-01-02 01:04:05Z", "2026-01-02 02:04:05Z", "released: the service was deleted", "MeshService default/redis", "holds it"}},
		{"/gui/search?q=redis.svc.mesh.local", []string{"Held over time", "MeshService default/redis", "holds it"}},
		{"/gui/services/meshservices/default/redis", []string{"History of its hostnames and VIPs", "old-cache", "released: the service was deleted", ">redis.svc.mesh.local</a>"}},
		{"/gui/search?q=241.0.0.99", []string{"The history records no holder of these values."}},
	}
	for _, tt := range tests {
		code, body := u.get(t, tt.path)
		if code != 200 {
			t.Fatalf("GET %s: %d", tt.path, code)
		}
		for _, w := range tt.want {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s: missing %q", tt.path, w)
			}
		}
	}
	// The holder that let the VIP go is listed before the one that holds it.
	_, body := u.get(t, "/gui/search?q=241.0.0.1")
	if i, j := strings.Index(body, "default/old-cache"), strings.Index(body, "default/redis</a></td>\n    <td>default</td>"); i < 0 || j < i {
		t.Errorf("holders out of order (old-cache at %d, redis at %d)", i, j)
	}
}
