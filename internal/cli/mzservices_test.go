package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/resource"
)

// multiZoneObjects are MeshMultiZoneServices as the API returns them: one
// whose status a zone computed (ports left out), one with declared ports
// and no match, one not computed yet.
func multiZoneObjects() []*resource.Object {
	redis := &resource.Object{
		Kind: resource.MeshMultiZoneService, Mesh: "default", Name: "redis", CreationTime: created,
		Labels: map[string]string{"team": "db"},
		Spec: &resource.MeshMultiZoneServiceSpec{Selector: resource.MultiZoneSelector{
			MeshService: &resource.LabelSelector{MatchLabels: map[string]string{resource.LabelServiceName: "redis"}},
		}},
		Status: &resource.MultiZoneServiceStatus{
			ServiceStatus: resource.ServiceStatus{
				VIPs:      []resource.VIP{{IP: "243.0.0.1", Type: resource.VIPKuma}},
				Addresses: []resource.Address{{Hostname: "redis.mzsvc.mesh.local", Status: resource.AddressAvailable}},
				Conditions: []resource.Condition{
					{Type: resource.ConditionMeshServicesMatched, Status: resource.ConditionTrue, Reason: resource.ReasonMatchesFound, Message: "2 MeshServices of mesh default match"},
					{Type: resource.ConditionPortsConsistent, Status: resource.ConditionFalse, Reason: resource.ReasonPortsDiffer, Message: "ports not on every matched MeshService are left out: 9121/http is not on redis-x (zone west)"},
				},
			},
			MeshServices: []resource.MeshServiceRef{
				{Name: "redis", Namespace: "db", Zone: "east", Mesh: "default"},
				{Name: "redis", Namespace: "db", Zone: "west", Mesh: "default"},
			},
			Zones: []resource.ZoneRef{{Name: "east"}, {Name: "west"}},
			Ports: []resource.Port{{Port: 6379, AppProtocol: "tcp"}},
		},
	}
	web := &resource.Object{
		Kind: resource.MeshMultiZoneService, Mesh: "default", Name: "web", CreationTime: created,
		Spec: &resource.MeshMultiZoneServiceSpec{
			Selector: resource.MultiZoneSelector{MeshService: &resource.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
			Ports:    []resource.Port{{Port: 80, AppProtocol: "http"}},
		},
		Status: &resource.MultiZoneServiceStatus{
			ServiceStatus: resource.ServiceStatus{Conditions: []resource.Condition{
				{Type: resource.ConditionMeshServicesMatched, Status: resource.ConditionFalse, Reason: resource.ReasonNoMatchesFound, Message: "no MeshService of mesh default matches the selector {app=web}"},
			}},
			Ports: []resource.Port{{Port: 80, AppProtocol: "http"}},
		},
	}
	fresh := &resource.Object{
		Kind: resource.MeshMultiZoneService, Mesh: "default", Name: "fresh", CreationTime: created,
		Spec: &resource.MeshMultiZoneServiceSpec{
			Selector: resource.MultiZoneSelector{MeshService: &resource.LabelSelector{MatchLabels: map[string]string{"app": "fresh"}}},
		},
	}
	return []*resource.Object{fresh, redis, web}
}

// TestMultiZoneOutput checks the tables and JSON that show what a zone
// computed for MeshMultiZoneServices, against testdata/mzservices.golden
// (rewritten with -update).
func TestMultiZoneOutput(t *testing.T) {
	var out bytes.Buffer
	env := Env{Out: &out, Err: &out}
	objs := multiZoneObjects()
	d := resource.MustLookup(resource.MeshMultiZoneService)
	for _, c := range []struct {
		title string
		run   func() error
	}{
		{"get meshmultizoneservices", func() error { return printTable(&out, d, objs, false, now) }},
		{"get meshmultizoneservices -o wide", func() error { return printTable(&out, d, objs, true, now) }},
		{"inspect multizoneservices", func() error { return printMultiZone(env, "default", objs, "table") }},
		{"inspect multizoneservices -o json", func() error { return printMultiZone(env, "default", objs, "json") }},
		{"inspect multizoneservices (none)", func() error { return printMultiZone(env, "default", nil, "table") }},
	} {
		out.WriteString("$ meshnames " + c.title + "\n")
		if err := c.run(); err != nil {
			t.Fatalf("%s: %v", c.title, err)
		}
	}
	file := filepath.Join("testdata", "mzservices.golden")
	if *update {
		if err := os.WriteFile(file, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(want), out.String()); d != "" {
		t.Errorf("output mismatch (-want +got); rerun with -update if the change is intended:\n%s", d)
	}
	if strings.Contains(out.String(), "<nil>") {
		t.Errorf("output shows a nil value")
	}
}
