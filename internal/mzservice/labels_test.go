package mzservice

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/resource"
)

// TestPackService checks that every label and port reads back as given,
// and that absent labels read as absent.
func TestPackService(t *testing.T) {
	long := strings.Repeat("k", 200) + "/key" // a key whose length takes two uvarint bytes
	tests := []struct {
		name   string
		svc    string
		labels map[string]string
		ports  []resource.Port
		absent []string
	}{
		{name: "Nothing", svc: "a", absent: []string{resource.LabelDisplayName, resource.LabelZone}},
		{name: "DisplayNameIsTheName", svc: "redis", labels: map[string]string{resource.LabelDisplayName: "redis", resource.LabelZone: "east"}},
		{name: "DisplayNameBeginsTheName", svc: "redis-5c7f", labels: map[string]string{resource.LabelDisplayName: "redis", resource.LabelZone: "east"}},
		{name: "DisplayNameElsewhereInTheName", svc: "my-redis", labels: map[string]string{resource.LabelDisplayName: "redis"}},
		{name: "DisplayNameLongerThanTheName", svc: "re", labels: map[string]string{resource.LabelDisplayName: "redis"}},
		{name: "EmptyDisplayName", svc: "redis", labels: map[string]string{resource.LabelDisplayName: ""}},
		{name: "NameFarLongerThanTheDisplayName", svc: "r" + strings.Repeat("x", 255), labels: map[string]string{resource.LabelDisplayName: "r"}},
		{name: "KnownAndCustomKeys", svc: "web", labels: map[string]string{
			resource.LabelNamespace: "ns", resource.LabelServiceName: "web", "app": "web", "team": "", long: strings.Repeat("v", 63),
		}, absent: []string{resource.LabelZone, "ap", "apps", resource.LabelDisplayName}},
		{name: "Ports", svc: "web", labels: map[string]string{"app": "web"}, ports: []resource.Port{
			{Port: 8080, AppProtocol: "TCP", Name: "alt"}, {Port: 80, AppProtocol: "http"}, {Port: 65535}, {Port: -1, AppProtocol: "grpc"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d dedup
			s, _ := packService(&d, nil, tt.svc, tt.labels, tt.ports)
			labels, packedPorts := splitService(s)
			for k, want := range tt.labels {
				if got, ok := label(labels, tt.svc, k); !ok || got != want {
					t.Errorf("label %q = %q, %t; want %q", k, got, ok, want)
				}
			}
			for _, k := range tt.absent {
				if got, ok := label(labels, tt.svc, k); ok {
					t.Errorf("label %q = %q; want absent", k, got)
				}
			}
			var want []port
			for _, p := range tt.ports {
				want = append(want, port{num: p.Port, proto: protocol(p.AppProtocol), name: p.Name})
			}
			got := unpackPorts(nil, packedPorts)
			sortPorts(want)
			if d := cmp.Diff(want, got, cmp.AllowUnexported(port{})); d != "" {
				t.Errorf("ports (-want +got):\n%s", d)
			}
		})
	}
}

func sortPorts(ps []port) {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && comparePorts(ps[j-1], ps[j]) > 0; j-- {
			ps[j-1], ps[j] = ps[j], ps[j-1]
		}
	}
}

// TestPackService_SharesEqualServices checks that services differing only
// in a display name equal to their name share one string, and that the
// dedup cache stays bounded.
func TestPackService_SharesEqualServices(t *testing.T) {
	var d dedup
	labels := func(name string) map[string]string {
		return map[string]string{resource.LabelDisplayName: name, resource.LabelZone: "east", resource.LabelOrigin: "zone"}
	}
	ports := []resource.Port{{Port: 80, AppProtocol: "http"}}
	a, _ := packService(&d, nil, "a", labels("a"), ports)
	b, _ := packService(&d, nil, "b", labels("b"), ports)
	if a != b || unsafe.StringData(a) != unsafe.StringData(b) {
		t.Errorf("services differing only in their names do not share a string")
	}
	// Services synced from other zones, <display name>-<hash>, too.
	c, _ := packService(&d, nil, "c-5f2c", labels("c"), ports)
	e, _ := packService(&d, nil, "ee-90e1", labels("ee"), ports)
	if c != e || unsafe.StringData(c) != unsafe.StringData(e) {
		t.Errorf("synced services differing only in their names do not share a string")
	}
	if ls, _ := splitService(e); !contains(ls, "ee-90e1", []pair{{resource.LabelDisplayName, "ee"}}) || contains(ls, "ee-90e1", []pair{{resource.LabelDisplayName, "ee-90e1"}}) {
		t.Errorf("synced ee-90e1: selecting its display name ee does not match, or its name does")
	}
	for i := range 2 * dedupMax {
		packService(&d, nil, "x", map[string]string{"i": strings.Repeat("v", i%60) + string(rune('a'+i%26))}, nil)
	}
	if len(d.m) > dedupMax {
		t.Errorf("dedup holds %d strings; want at most %d", len(d.m), dedupMax)
	}
}

// FuzzPackService checks that any labels and ports read back as given.
func FuzzPackService(f *testing.F) {
	f.Add("redis", resource.LabelDisplayName, "redis", "app", "x", 6379, "tcp", "main")
	f.Add("a", strings.Repeat("k", 300), "", resource.LabelZone, "east", 0, "", "")
	f.Fuzz(func(t *testing.T, name, k1, v1, k2, v2 string, num int, proto, pname string) {
		if name == "" || len(protocol(proto)) > 255 || len(pname) > 255 {
			return // admission keeps both short; longer ones are cut
		}
		labels := map[string]string{k1: v1, k2: v2}
		var d dedup
		s, _ := packService(&d, nil, name, labels, []resource.Port{{Port: num, AppProtocol: proto, Name: pname}})
		ls, ps := splitService(s)
		for k, want := range labels {
			if got, ok := label(ls, name, k); !ok || got != want {
				t.Fatalf("label %q = %q, %t; want %q", k, got, ok, want)
			}
		}
		got := unpackPorts(nil, ps)
		if len(got) != 1 || got[0].num != int(int32(num)) || got[0].proto != protocol(proto) || got[0].name != pname {
			t.Fatalf("ports = %+v; want %d/%s/%s", got, num, protocol(proto), pname)
		}
	})
}
