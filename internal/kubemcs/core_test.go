package kubemcs

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/resource"
)

func ms(name, zone string, created int, ports ...resource.Port) Service {
	return Service{Key: resource.Key{Kind: resource.MeshService, Mesh: "default", Name: name}, Zone: zone, Ports: ports,
		Created: time.Unix(int64(created), 0), Exported: true}
}

func TestConditions(t *testing.T) {
	http80 := resource.Port{Name: "http", Port: 80, AppProtocol: "http"}
	local := ms("web.shop", "east", 1, http80)
	for _, tc := range []struct {
		name string
		in   ExportInput
		want [][3]string // type, status, reason
	}{
		{"no-service", ExportInput{Missing: ReasonNoService, MissingMessage: "none"},
			[][3]string{{CondValid, "False", ReasonNoService}, {CondReady, "False", ReasonPending}, {CondConflict, "False", ReasonNoConflicts}}},
		{"alone", ExportInput{Local: &local},
			[][3]string{{CondValid, "True", ReasonValid}, {CondReady, "True", ReasonExported}, {CondConflict, "False", ReasonNoConflicts}}},
		{"not-exported-yet", ExportInput{Local: &Service{Key: local.Key, Ports: local.Ports}},
			[][3]string{{CondValid, "True", ReasonValid}, {CondReady, "False", ReasonPending}, {CondConflict, "False", ReasonNoConflicts}}},
		{"same-ports-elsewhere", ExportInput{Local: &local, Remote: []Service{ms("web-1", "west", 2, http80)}},
			[][3]string{{CondValid, "True", ReasonValid}, {CondReady, "True", ReasonExported}, {CondConflict, "False", ReasonNoConflicts}}},
		{"protocol-differs", ExportInput{Local: &local, Remote: []Service{ms("web-1", "west", 2, resource.Port{Name: "http", Port: 80, AppProtocol: "grpc"})}},
			[][3]string{{CondValid, "True", ReasonValid}, {CondReady, "True", ReasonExported}, {CondConflict, "True", ReasonPortConflict}}},
		{"name-on-another-port", ExportInput{Local: &local, Remote: []Service{ms("web-1", "west", 2, resource.Port{Name: "http", Port: 8080, AppProtocol: "http"})}},
			[][3]string{{CondValid, "True", ReasonValid}, {CondReady, "True", ReasonExported}, {CondConflict, "True", ReasonPortConflict}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got [][3]string
			for _, c := range Conditions(tc.in) {
				got = append(got, [3]string{c.Type, c.Status, c.Reason})
				if c.Message == "" {
					t.Errorf("%s has no message", c.Type)
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestImport_FollowsTheClusterSetName(t *testing.T) {
	old := ms("web-a", "west", 1, resource.Port{Name: "http", Port: 80, AppProtocol: "http"})
	old.VIPs = []string{"241.0.0.1"}
	younger := ms("web-b", "north", 2, resource.Port{Port: 81})
	younger.VIPs = []string{"fd00::2", "241.0.0.2", "241.0.0.3"}
	if _, _, ok := Import("shop", "web", nil); ok {
		t.Fatal("an import without candidates")
	}
	// Nobody holds the name yet: the oldest's ports, no IPs.
	spec, status, ok := Import("shop", "web", []Service{younger, old})
	want := ImportSpec{Type: "ClusterSetIP", Ports: []ImportPort{{Name: "http", Protocol: "TCP", AppProtocol: "http", Port: 80}}}
	if d := cmp.Diff(want, spec); !ok || d != "" {
		t.Errorf("unnamed: (-want +got):\n%s", d)
	}
	if d := cmp.Diff(ImportStatus{Clusters: []Cluster{{"north"}, {"west"}}}, status); d != "" {
		t.Errorf("clusters (-want +got):\n%s", d)
	}
	// The younger holds web.shop.svc.clusterset.local: its VIPs (one per
	// family, IPv4 first) and ports.
	younger.Hostnames = []string{ClusterSetHostname("shop", "web")}
	spec, _, _ = Import("shop", "web", []Service{old, younger})
	want = ImportSpec{Type: "ClusterSetIP", IPs: []string{"241.0.0.2", "fd00::2"}, Ports: []ImportPort{{Protocol: "TCP", Port: 81}}}
	if d := cmp.Diff(want, spec); d != "" {
		t.Errorf("held: (-want +got):\n%s", d)
	}
}
