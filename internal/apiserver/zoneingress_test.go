package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/resource"
)

// A ZoneIngress through REST on a zone: created in Kuma's flat shape,
// labelled with this zone, read back and listed (by its zone label too),
// updated, and deleted.
func TestZoneIngress_RoundTrip(t *testing.T) {
	e := newEnv(t, resource.ModeZone)
	path := "/zoneingresses/ingress-1"
	flat := "type: ZoneIngress\nname: ingress-1\nnetworking:\n  address: 192.168.0.1\n  port: 10001\n"
	if r := e.put(path, flat); r.code != http.StatusCreated {
		t.Fatalf("PUT = %d %s", r.code, r.body)
	}
	r := e.do(http.MethodGet, path, "", "")
	var got resource.Object
	if err := json.Unmarshal(r.body, &got); err != nil || r.code != http.StatusOK {
		t.Fatalf("GET = %d %v %s", r.code, err, r.body)
	}
	want := &resource.Object{Kind: resource.ZoneIngress, Name: "ingress-1",
		Labels: map[string]string{resource.LabelOrigin: resource.OriginZone, resource.LabelZone: "east", resource.LabelDisplayName: "ingress-1"},
		Spec:   &resource.ZoneIngressSpec{Networking: resource.ZoneIngressNetworking{Address: "192.168.0.1", Port: 10001}}}
	got.CreationTime, got.ModificationTime = want.CreationTime, want.ModificationTime
	if d := cmp.Diff(want, &got); d != "" {
		t.Errorf("GET (-want +got):\n%s", d)
	}
	// What GET returned, applied again, is unchanged.
	if r := e.do(http.MethodPut, path, "application/json", string(r.body)); r.code != http.StatusOK || r.header.Get(ResultHeader) != ResultUnchanged {
		t.Errorf("PUT of what GET returned = %d %s %s", r.code, r.header.Get(ResultHeader), r.body)
	}
	lb := strings.Replace(flat, "  port: 10001\n", "  port: 10001\n  advertisedAddress: ingress.east.example.com\n  advertisedPort: 443\n", 1)
	if r := e.put(path, lb); r.code != http.StatusOK || r.header.Get(ResultHeader) != ResultUpdated {
		t.Fatalf("PUT with an advertised address = %d %s %s", r.code, r.header.Get(ResultHeader), r.body)
	}
	for _, list := range []string{"/zoneingresses", "/zoneingresses?filter%5Blabels.kuma.io%2Fzone%5D=east"} {
		r := e.do(http.MethodGet, list, "", "")
		var page struct {
			Total int                `json:"total"`
			Items []*resource.Object `json:"items"`
		}
		if err := json.Unmarshal(r.body, &page); err != nil || page.Total != 1 || page.Items[0].Name != "ingress-1" {
			t.Errorf("GET %s = %d %s; want ingress-1", list, r.code, r.body)
		} else if n := page.Items[0].Spec.(*resource.ZoneIngressSpec).Networking; n.AdvertisedAddress != "ingress.east.example.com" || n.AdvertisedPort != 443 {
			t.Errorf("GET %s: networking %+v; want the advertised address", list, n)
		}
	}
	if r := e.do(http.MethodGet, "/zoneingresses?filter%5Blabels.kuma.io%2Fzone%5D=west", "", ""); !strings.Contains(string(r.body), `"total":0`) {
		t.Errorf("list of zone west = %s; want none", r.body)
	}
	if r := e.do(http.MethodGet, "/meshes/default/zoneingresses", "", ""); r.code != http.StatusNotFound {
		t.Errorf("GET under a mesh = %d, want 404: ZoneIngress is not mesh-scoped", r.code)
	}
	if r := e.do(http.MethodDelete, path, "", ""); r.code != http.StatusOK {
		t.Fatalf("DELETE = %d %s", r.code, r.body)
	}
	if r := e.do(http.MethodGet, path, "", ""); r.code != http.StatusNotFound {
		t.Errorf("GET after DELETE = %d", r.code)
	}
}

// Each bad ZoneIngress is refused 400 with every violation as a cause at
// its field, and changes nothing: the ingress of that name stays as it
// was, and no other is stored.
func TestZoneIngress_BadInput(t *testing.T) {
	e := newEnv(t, resource.ModeStandalone)
	const ok = "  address: 192.168.0.1\n  port: 10001\n"
	if r := e.put("/zoneingresses/ingress-1", "type: ZoneIngress\nnetworking:\n"+ok); r.code != http.StatusCreated {
		t.Fatalf("PUT the good ingress = %d %s", r.code, r.body)
	}
	before, err := e.st.Get(context.Background(), resource.Key{Kind: resource.ZoneIngress, Name: "ingress-1"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, body string
		fields     []string
	}{
		{"address-missing", "networking:\n  port: 10001\n", []string{"spec.networking.address"}},
		{"address-unspecified", "networking:\n  address: 0.0.0.0\n  port: 10001\n", []string{"spec.networking.address"}},
		{"address-ipv6-unspecified", "networking:\n  address: '::'\n  port: 10001\n", []string{"spec.networking.address"}},
		{"address-not-ip-or-name", "networking:\n  address: 10.0.0.300\n  port: 10001\n", []string{"spec.networking.address"}},
		{"address-bad-name", "networking:\n  address: Ingress_1\n  port: 10001\n", []string{"spec.networking.address"}},
		{"port-missing", "networking:\n  address: 192.168.0.1\n", []string{"spec.networking.port"}},
		{"port-out-of-range", "networking:\n  address: 192.168.0.1\n  port: 65536\n", []string{"spec.networking.port"}},
		{"port-not-a-number", "networking:\n  address: 192.168.0.1\n  port: ten\n", []string{"spec.networking.port"}},
		{"advertised-address-alone", "networking:\n" + ok + "  advertisedAddress: 10.0.0.1\n", []string{"spec.networking.advertisedPort"}},
		{"advertised-port-alone", "networking:\n" + ok + "  advertisedPort: 10001\n", []string{"spec.networking.advertisedAddress"}},
		{"advertised-address-bad", "networking:\n" + ok + "  advertisedAddress: 'lb 1'\n  advertisedPort: 10001\n", []string{"spec.networking.advertisedAddress"}},
		{"advertised-port-out-of-range", "networking:\n" + ok + "  advertisedAddress: 10.0.0.1\n  advertisedPort: 0x10000\n", []string{"spec.networking.advertisedPort"}},
		{"unknown-field", "networking:\n" + ok + "  admin: {port: 9901}\n", []string{"spec.networking.admin"}},
		{"zone-field", "zone: east\nnetworking:\n" + ok, []string{"spec.zone"}},
		{"mesh", "mesh: default\nnetworking:\n" + ok, []string{"mesh"}},
		{"other-zone", "labels: {kuma.io/zone: west}\nnetworking:\n" + ok, []string{`labels["kuma.io/zone"]`}},
		{"every-rule-at-once", "networking:\n  address: 0.0.0.0\n  port: 0\n  advertisedAddress: x..y\n",
			[]string{"spec.networking.address", "spec.networking.advertisedAddress", "spec.networking.advertisedPort", "spec.networking.port"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.put("/zoneingresses/ingress-1", "type: ZoneIngress\n"+tt.body)
			if r.code != http.StatusBadRequest {
				t.Fatalf("PUT = %d, want 400: %s", r.code, r.body)
			}
			want := slices.Clone(tt.fields)
			slices.Sort(want)
			if d := cmp.Diff(want, r.causeFields()); d != "" {
				t.Errorf("cause fields (-want +got):\n%s\nbody: %s", d, r.body)
			}
			for _, c := range r.error().Causes {
				if c.Message == "" {
					t.Errorf("cause %s without a message", c.Field)
				}
			}
		})
	}
	if objs, _, err := e.st.List(context.Background(), resource.ZoneIngress); err != nil || len(objs) != 1 || objs[0].Version != before.Version {
		t.Errorf("rejected writes changed the store: %v (%v); want ingress-1 at version %d alone", objs, err, before.Version)
	}
}
