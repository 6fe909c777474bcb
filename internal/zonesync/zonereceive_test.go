package zonesync

import (
	"context"
	"strings"
	"sync"
	"testing"

	pb "github.com/meshnames/meshnames/api/zonesync/v1"
	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/resource"
)

// TestZoneReceive_RefusesBadInput: what a zone's receiver refuses of a
// batch from the global - each resource that fails validation, by the
// field and rule, or that the zone may not take - is refused with a
// reason and counted, and only the good resource of the batch is stored,
// as the zone's view of it (origin global, no status).
func TestZoneReceive_RefusesBadInput(t *testing.T) {
	p := newCP(t, "west")
	var mu sync.Mutex
	var rejections []*pb.Rejection
	zs := &zoneSide{zone: "west", cache: p.c}
	l := &link{
		peer: "global", admit: admission.New(admission.Options{Mode: resource.ModeZone, Zone: "west", Store: p.st, Cache: p.c}),
		st: p.st, cache: p.c, side: zs, log: p.log, stats: newStats("west", newMetrics(nil)),
		send: func(env *pb.Envelope) error {
			if r := env.GetRejection(); r != nil {
				mu.Lock()
				rejections = append(rejections, r)
				mu.Unlock()
			}
			return nil
		},
	}
	l.init()
	synced := func(name string, edit func(*resource.Object)) *pb.Resource {
		o := meshService("default", name, 80)
		o.Name = HashedName(resource.MeshService, "default", name, "east", "")
		o.Labels = map[string]string{resource.LabelZone: "east", resource.LabelOrigin: resource.OriginZone, resource.LabelDisplayName: name}
		o.Status = &resource.ServiceStatus{VIPs: []resource.VIP{{IP: "241.0.0.9", Type: resource.VIPKuma}}}
		if edit != nil {
			edit(o)
		}
		return wire(t, o)
	}
	good := synced("good", nil)
	cases := []struct {
		name   string
		r      *pb.Resource
		reason string
	}{
		{"port", synced("port", func(o *resource.Object) { o.Spec.(*resource.MeshServiceSpec).Ports[0].Port = 70000 }), "spec.ports[0].port"},
		{"name", synced("name", func(o *resource.Object) { o.Name = "Not_A_Name" }), "name"},
		{"label", synced("label", func(o *resource.Object) { o.Labels["team"] = strings.Repeat("x", 64) }), "team"},
		{"no-zone", synced("nozone", func(o *resource.Object) { delete(o.Labels, resource.LabelZone) }), "kuma.io/zone"},
		{"own", synced("own", func(o *resource.Object) { o.Labels[resource.LabelZone] = "west" }), "own service"},
		{"unknown-field", &pb.Resource{Kind: "MeshService", Mesh: "default", Name: "x-" + strings.Repeat("b", 14),
			Labels: map[string]string{resource.LabelZone: "east"}, Spec: []byte(`{"bogus":1}`)}, "bogus"},
		{"kind", wire(t, &resource.Object{Kind: resource.Dataplane, Mesh: "default", Name: "dp",
			Spec: &resource.DataplaneSpec{Networking: resource.DataplaneNetworking{Address: "10.0.0.1",
				Inbound: []resource.Inbound{{Port: 80, Tags: map[string]string{"kuma.io/service": "web"}}}}}}), "do not flow from global"},
	}
	puts := []*pb.Resource{good}
	for _, tc := range cases {
		puts = append(puts, tc.r)
	}
	if err := l.apply(context.Background(), &pb.Changes{Revision: 3, Put: puts}, 1000); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := rejections
	mu.Unlock()
	if len(got) != len(cases) {
		t.Errorf("%d rejections, want %d: %v", len(got), len(cases), got)
	}
	for _, tc := range cases {
		found := false
		for _, r := range got {
			found = found || strings.Contains(r.Reason, tc.reason)
		}
		if !found {
			t.Errorf("%s: no rejection says %q (rejections: %v)", tc.name, tc.reason, got)
		}
	}
	if in := l.stats.insight(); in.Refused != int64(len(cases)) {
		t.Errorf("refused %d, want %d", in.Refused, len(cases))
	}
	stored, _, err := p.st.List(context.Background(), resource.MeshService)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 1 || stored[0].Name != good.Name {
		var names []string
		for _, o := range stored {
			names = append(names, o.Name)
		}
		t.Fatalf("stored %v, want only %s", names, good.Name)
	}
	if o := stored[0]; o.Labels[resource.LabelOrigin] != resource.OriginGlobal || o.Labels[resource.LabelZone] != "east" || o.Status != nil {
		t.Errorf("stored %s with labels %v, status %v; want origin global, zone east, no status", o.Name, o.Labels, o.Status)
	}
}
