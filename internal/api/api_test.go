package api

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/resource"
)

func TestNameChanges(t *testing.T) {
	k := resource.Key{Kind: resource.MeshService, Mesh: "m", Name: "web"}
	st := func(vips []string, addrs ...resource.Address) resource.Status {
		s := &resource.ServiceStatus{Addresses: addrs}
		for _, ip := range vips {
			s.VIPs = append(s.VIPs, resource.VIP{IP: ip, Type: resource.VIPKuma})
		}
		return s
	}
	avail := func(h string) resource.Address {
		return resource.Address{Hostname: h, Status: resource.AddressAvailable}
	}
	refused := func(h, why string) resource.Address {
		return resource.Address{Hostname: h, Status: resource.AddressNotAvailable, Reason: why}
	}
	ch := func(host, vip, change, reason string) NameChange {
		return NameChange{Kind: k.Kind, Mesh: k.Mesh, Name: k.Name, Hostname: host, VIP: vip, Change: change, Reason: reason}
	}
	for _, tc := range []struct {
		name          string
		before, after resource.Status
		want          []NameChange
	}{
		{"New", nil, st([]string{"241.0.0.1"}, avail("web.mesh.local")),
			[]NameChange{ch("web.mesh.local", "", ChangeGains, ""), ch("", "241.0.0.1", ChangeGains, "")}},
		{"Same", st([]string{"241.0.0.1"}, avail("a")), st([]string{"241.0.0.1"}, avail("a")), nil},
		{"LosesToACollision", st(nil, avail("a")), st(nil, refused("a", "taken")),
			[]NameChange{ch("a", "", ChangeRefused, "taken"), ch("a", "", ChangeLoses, "")}},
		{"StillRefused", st(nil, refused("a", "taken")), st(nil, refused("a", "taken by another")), nil},
		{"RefusedThenGained", st(nil, refused("a", "taken")), st(nil, avail("a")), []NameChange{ch("a", "", ChangeGains, "")}},
		{"VIPReleased", st([]string{"241.0.0.1", "241.0.0.2"}), st([]string{"241.0.0.2"}), []NameChange{ch("", "241.0.0.1", ChangeLoses, "")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, NameChanges(k, tc.before, tc.after)); d != "" {
				t.Errorf("changes (-want +got):\n%s", d)
			}
		})
	}
}
