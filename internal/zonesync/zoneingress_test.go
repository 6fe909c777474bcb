package zonesync

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
)

func zoneIngress(name, address string) *resource.Object {
	return &resource.Object{Kind: resource.ZoneIngress, Name: name, Spec: &resource.ZoneIngressSpec{
		Networking: resource.ZoneIngressNetworking{Address: address, Port: 10001}}}
}

// ingressesOf waits until p's cache holds exactly want (names) as the
// ZoneIngresses labelled with zone: the query xDS makes for "the
// ingresses of zone".
func ingressesOf(t *testing.T, p *cp, zone string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		objs, _ := p.c.List(cache.Query{Kind: resource.ZoneIngress, Labels: map[string]string{resource.LabelZone: zone}})
		var got []string
		for _, o := range objs {
			got = append(got, o.Name)
		}
		if len(got) == len(want) && (len(got) == 0 || got[0] == want[0]) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the ingresses of zone %s are %v, want %v", p.name, zone, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSync_ZoneIngressReachesOtherZones: each zone's ingress reaches the
// global and every other zone under the global's name (two zones may both
// call theirs ingress-1), keeps kuma.io/zone so that a label query finds
// the ingresses of a zone, is read-only where it was synced to, never goes
// back to its own zone, leaves the other zones while its zone is disabled
// and when it is deleted.
func TestSync_ZoneIngressReachesOtherZones(t *testing.T) {
	f := newFederation(t, "east", "west")
	east, west, global := f.zones["east"], f.zones["west"], f.global
	east.put(zoneIngress("ingress-1", "192.168.0.1"), resource.ModeZone, "east")
	west.put(zoneIngress("ingress-1", "192.168.1.1"), resource.ModeZone, "west")

	eastOnGlobal := resource.Key{Kind: resource.ZoneIngress, Name: HashedName(resource.ZoneIngress, "", "ingress-1", "east", "")}
	westOnGlobal := resource.Key{Kind: resource.ZoneIngress, Name: HashedName(resource.ZoneIngress, "", "ingress-1", "west", "")}
	for _, c := range []struct {
		k          resource.Key
		zone, addr string
	}{{eastOnGlobal, "east", "192.168.0.1"}, {westOnGlobal, "west", "192.168.1.1"}} {
		got := global.eventually(c.zone+"'s ingress", c.k, exists)
		want := map[string]string{resource.LabelOrigin: resource.OriginZone, resource.LabelZone: c.zone, resource.LabelDisplayName: "ingress-1"}
		for k, v := range want {
			if got.Labels[k] != v {
				t.Errorf("global: %s label %s = %q, want %q", c.k.Name, k, got.Labels[k], v)
			}
		}
		if a := got.Spec.(*resource.ZoneIngressSpec).Networking.Address; a != c.addr {
			t.Errorf("global: %s address %s, want %s", c.k.Name, a, c.addr)
		}
	}
	got := west.eventually("east's ingress", eastOnGlobal, exists)
	if got.Labels[resource.LabelOrigin] != resource.OriginGlobal || got.Labels[resource.LabelZone] != "east" || got.Labels[resource.LabelDisplayName] != "ingress-1" {
		t.Errorf("west holds %s", describe(got))
	}
	east.eventually("west's ingress", westOnGlobal, exists)
	ingressesOf(t, west, "east", eastOnGlobal.Name)
	ingressesOf(t, west, "west", "ingress-1")
	ingressesOf(t, east, "west", westOnGlobal.Name)
	ingressesOf(t, global, "east", eastOnGlobal.Name)
	f.waitAcked(t, "east")
	if _, err := east.st.Get(context.Background(), eastOnGlobal); err == nil {
		t.Errorf("east got its own ingress back as %s", eastOnGlobal.Name)
	}
	// The inventories count the ingresses as the streams carry them: each
	// side holds what the other's inventory says, and no full state is
	// asked for.
	global.waitLogs(`msg="this side holds what the peer sent" zone=east peer=east`, 1)
	west.waitLogs(`msg="this side holds what the peer sent"`, 1)
	if in, _ := f.g.Insight(context.Background(), "west"); in.Sent.Snapshots != 0 || in.Received.Snapshots != 0 {
		t.Errorf("full states to and from west: %d and %d, want none", in.Sent.Snapshots, in.Received.Snapshots)
	}

	// West's users cannot change east's ingress, nor the global's.
	for _, c := range []struct {
		p          *cp
		mode, zone string
		k          resource.Key
	}{{west, resource.ModeZone, "west", eastOnGlobal}, {global, resource.ModeGlobal, "", eastOnGlobal}} {
		adm := admission.New(admission.Options{Mode: c.mode, Zone: c.zone, Store: c.p.st, Cache: c.p.c})
		user := admission.Writer{Source: admission.User, Subject: "test"}
		changed := zoneIngress(c.k.Name, "10.9.9.9")
		changed.Labels = map[string]string{resource.LabelZone: "east"}
		if _, err := adm.Put(context.Background(), changed, user, admission.PutOptions{}); err == nil {
			t.Errorf("%s: a user replaced east's ingress", c.p.name)
		}
		if _, err := adm.Delete(context.Background(), c.k, user, 0); err == nil {
			t.Errorf("%s: a user deleted east's ingress", c.p.name)
		} else if c.mode == resource.ModeZone && (!errors.Is(err, admission.ErrReadOnly) || !strings.Contains(err.Error(), `change it in zone "east"`)) {
			t.Errorf("%s: deleting east's ingress: %v, want read-only, to be changed in east", c.p.name, err)
		}
	}

	// A disabled zone's ingresses leave the other zones with its services.
	off := false
	global.put(&resource.Object{Kind: resource.Zone, Name: "east", Spec: &resource.ZoneSpec{Enabled: &off}}, resource.ModeGlobal, "")
	west.eventually("the ingress of a disabled zone", eastOnGlobal, absent)
	global.put(&resource.Object{Kind: resource.Zone, Name: "east", Spec: &resource.ZoneSpec{}}, resource.ModeGlobal, "")
	west.eventually("the ingress of the zone enabled again", eastOnGlobal, exists)

	// A change in its zone follows; a deletion removes it everywhere.
	moved := zoneIngress("ingress-1", "192.168.0.2")
	moved.Spec.(*resource.ZoneIngressSpec).Networking.AdvertisedAddress = "ingress.east.example.com"
	moved.Spec.(*resource.ZoneIngressSpec).Networking.AdvertisedPort = 443
	east.put(moved, resource.ModeZone, "east")
	west.eventually("east's ingress, advertised", eastOnGlobal, func(o *resource.Object) bool {
		return o != nil && o.Spec.(*resource.ZoneIngressSpec).Networking.AdvertisedAddress == "ingress.east.example.com"
	})
	east.delete(resource.Key{Kind: resource.ZoneIngress, Name: "ingress-1"})
	global.eventually("east's deleted ingress", eastOnGlobal, absent)
	west.eventually("east's deleted ingress", eastOnGlobal, absent)
	ingressesOf(t, west, "east")
	ingressesOf(t, west, "west", "ingress-1")
	for _, z := range []string{"east", "west"} {
		if in := f.insight(t, z); in.Refused != 0 {
			t.Errorf("the global refused %d of %s's resources", in.Refused, z)
		}
	}
}
