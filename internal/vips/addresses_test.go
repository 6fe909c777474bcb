package vips

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// TestController_DualStack gives services one VIP of each family when their
// kind has an IPv6 pool too, and a MeshExternalService one more of each per
// InternalVIP match.
func TestController_DualStack(t *testing.T) {
	pools := defaultPools()
	pools[resource.MeshService] = Prefixes{V4: netip.MustParsePrefix("241.0.0.0/8"), V6: netip.MustParsePrefix("fd00:241::/64")}
	pools[resource.MeshExternalService] = Prefixes{V4: netip.MustParsePrefix("242.0.0.0/8"), V6: netip.MustParsePrefix("fd00:242::/64")}
	e := newEnv(t, pools)
	e.create(ms("a"))
	e.create(&resource.Object{Kind: resource.MeshExternalService, Mesh: "default", Name: "x", Spec: &resource.MeshExternalServiceSpec{
		Match: []resource.ExternalMatch{{Type: resource.MatchInternalVIP, Value: "x.ext.local", Port: 80, Protocol: "http"}}}})
	e.create(&resource.Object{Kind: resource.MeshMultiZoneService, Mesh: "default", Name: "m", Spec: &resource.MeshMultiZoneServiceSpec{
		Selector: resource.MultiZoneSelector{MeshService: &resource.LabelSelector{MatchLabels: map[string]string{"app": "a"}}}}})
	e.waitVIPs(key(resource.MeshService, "a"), "241.0.0.1 ", "fd00:241::1 ")
	e.waitVIPs(key(resource.MeshExternalService, "x"), "242.0.0.1 ", "fd00:242::1 ", "242.0.0.2 x.ext.local", "fd00:242::2 x.ext.local")
	e.waitVIPs(key(resource.MeshMultiZoneService, "m"), "243.0.0.1 ") // no IPv6 pool for this kind
}

func mes(name string, values ...string) *resource.Object {
	spec := &resource.MeshExternalServiceSpec{}
	for i, v := range values {
		spec.Match = append(spec.Match, resource.ExternalMatch{Type: resource.MatchInternalVIP, Value: v, Port: 8000 + i, Protocol: "tcp"})
	}
	return &resource.Object{Kind: resource.MeshExternalService, Mesh: "default", Name: name, Spec: spec}
}

// TestController_ExternalServiceVIPsQuarantinedLikeOtherKinds checks the
// InternalVIP VIPs of seed 003 follow the rules of every kind: a deleted
// external service's VIPs go into quarantine, a service waiting on the full
// pool carries the exhaustion condition, and gets an address only once the
// quarantine ends.
func TestController_ExternalServiceVIPsQuarantinedLikeOtherKinds(t *testing.T) {
	pools := defaultPools()
	pools[resource.MeshExternalService] = Prefixes{V4: netip.MustParsePrefix("10.9.0.0/29")} // 6 usable
	e := newEnv(t, pools)
	e.create(mes("w", "one.ext.local", "two.ext.local"))
	e.create(mes("x", "three.ext.local", "four.ext.local"))
	w, x := key(resource.MeshExternalService, "w"), key(resource.MeshExternalService, "x")
	e.waitVIPs(w, "10.9.0.1 ", "10.9.0.2 one.ext.local", "10.9.0.3 two.ext.local")
	e.waitVIPs(x, "10.9.0.4 ", "10.9.0.5 three.ext.local", "10.9.0.6 four.ext.local")

	e.delete(x)
	for _, ip := range []string{"10.9.0.4", "10.9.0.5", "10.9.0.6"} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			if l, ok := e.lease(ip); ok && l.ExpiresAt.Equal(e.clock.Now().Add(quarantine)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no quarantine lease for %s after its external service was deleted", ip)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	e.create(mes("y", "y.ext.local"))
	y := key(resource.MeshExternalService, "y")
	e.waitCondition(y, resource.ReasonPoolExhausted)
	if v := e.vips(y); len(v) != 0 {
		t.Fatalf("y got %v inside the quarantine", v)
	}
	e.advance(quarantine + time.Second)
	e.waitVIPs(y, "10.9.0.4 ", "10.9.0.5 y.ext.local")
	e.waitCondition(y, "")
}

// TestController_SameInternalVIPOnTwoPorts checks one VIP per value: the
// same name on two ports is one hostname (seed 003 correlates VIPs and
// matches by hostname).
func TestController_SameInternalVIPOnTwoPorts(t *testing.T) {
	e := newEnv(t, defaultPools())
	e.create(mes("db", "db.ext.local", "db.ext.local", "db-ro.ext.local"))
	// An external service has one more for its generated hostnames.
	e.waitVIPs(key(resource.MeshExternalService, "db"), "242.0.0.1 ", "242.0.0.2 db.ext.local", "242.0.0.3 db-ro.ext.local")
}

// setStatusVIPs writes k's status.vips as another writer would (which
// retries when the controller wrote in between).
func (e *env) setStatusVIPs(k resource.Key, ips ...string) {
	e.t.Helper()
	for {
		cur, err := e.st.Get(context.Background(), k)
		if err != nil {
			e.t.Fatal(err)
		}
		st := resource.ServiceStatusOrNew(cur)
		st.Service().VIPs = nil
		for _, ip := range ips {
			st.Service().VIPs = append(st.Service().VIPs, resource.VIP{IP: ip, Type: resource.VIPKuma})
		}
		cur.Status = st
		_, err = store.UpdateStatus(context.Background(), e.st, cur)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			e.t.Fatal(err)
		}
		return
	}
}

// TestController_StatusShowsAVIPOfAnother checks who keeps a pool address
// that a status shows but the service does not hold: not a service while
// another holds it (running, or found twice at rebuild), and the service
// when the address is in quarantine (a live service shows it).
func TestController_StatusShowsAVIPOfAnother(t *testing.T) {
	a, b, c := key(resource.MeshService, "a"), key(resource.MeshService, "b"), key(resource.MeshService, "c")
	leaseOwner := func(e *env, ip string) (owner string, quarantined bool) {
		t.Helper()
		l, ok := e.lease(ip)
		if !ok {
			t.Fatalf("no lease of %s", ip)
		}
		var v leaseValue
		if err := json.Unmarshal(l.Value, &v); err != nil {
			t.Fatal(err)
		}
		return v.Owner, !l.ExpiresAt.IsZero()
	}
	setup := func(t *testing.T) *env {
		e := newEnv(t, defaultPools())
		for _, name := range []string{"a", "b", "c"} {
			e.create(ms(name))
		}
		e.waitVIPs(a, "241.0.0.1 ")
		e.waitVIPs(b, "241.0.0.2 ")
		e.waitVIPs(c, "241.0.0.3 ")
		return e
	}
	t.Run("HeldByAnother", func(t *testing.T) {
		e := setup(t)
		e.setStatusVIPs(b, "241.0.0.1")
		e.waitVIPs(b, "241.0.0.2 ")
		e.waitVIPs(a, "241.0.0.1 ")
		if owner, q := leaseOwner(e, "241.0.0.1"); owner != ownerString(a) || q {
			t.Errorf("lease of 241.0.0.1: owner %q, quarantined %v; want %q, not quarantined", owner, q, ownerString(a))
		}
		// b did not take it, so deleting b leaves a's address alone.
		e.delete(b)
		e.waitLease(t, "241.0.0.2", true)
		if owner, q := leaseOwner(e, "241.0.0.1"); owner != ownerString(a) || q {
			t.Errorf("after deleting b, lease of 241.0.0.1: owner %q, quarantined %v; want %q, not quarantined", owner, q, ownerString(a))
		}
	})
	t.Run("InQuarantine", func(t *testing.T) {
		e := setup(t)
		e.delete(c)
		e.waitLease(t, "241.0.0.3", true)
		e.setStatusVIPs(b, "241.0.0.2", "241.0.0.3")
		e.waitLease(t, "241.0.0.3", false)
		e.waitVIPs(b, "241.0.0.2 ", "241.0.0.3 ")
		if owner, _ := leaseOwner(e, "241.0.0.3"); owner != ownerString(b) {
			t.Errorf("lease of 241.0.0.3: owner %q, want %q", owner, ownerString(b))
		}
		// Now b's: deleting b quarantines both.
		e.delete(b)
		e.waitLease(t, "241.0.0.2", true)
		e.waitLease(t, "241.0.0.3", true)
	})
	t.Run("TwiceAtRebuild", func(t *testing.T) {
		e := setup(t)
		e.halt()
		e.setStatusVIPs(b, "241.0.0.1")
		e.start()
		// a is listed first and keeps it; b gets a new address (its old
		// one is quarantined: its lease names b, whose status dropped it).
		e.waitVIPs(b, "241.0.0.4 ")
		e.waitVIPs(a, "241.0.0.1 ")
		e.waitLease(t, "241.0.0.2", true)
		if owner, q := leaseOwner(e, "241.0.0.1"); owner != ownerString(a) || q {
			t.Errorf("lease of 241.0.0.1: owner %q, quarantined %v; want %q, not quarantined", owner, q, ownerString(a))
		}
	})
}

// waitLease waits until the lease of ip exists and is a quarantine (or an
// allocation).
func (e *env) waitLease(t *testing.T, ip string, quarantined bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, ok := e.lease(ip)
		if ok && l.ExpiresAt.IsZero() != quarantined {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease of %s: %+v (exists %v), want quarantined %v", ip, l, ok, quarantined)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestVIPSize pins the size of what the controller keeps per VIP (one per
// service and family): a field added costs 100,000 times over.
func TestVIPSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are pinned for 64-bit platforms")
	}
	if got := unsafe.Sizeof(vip{}); got > 48 {
		t.Errorf("vip is %d bytes, more than 48", got)
	}
	v := newVIP(netip.MustParseAddr("241.0.0.1"), resource.VIPKubernetes, "a.ext.local")
	want := []resource.VIP{{IP: "241.0.0.1", Type: resource.VIPKubernetes, Hostname: "a.ext.local"}}
	if diff := cmp.Diff(want, toStatus([]vip{v})); diff != "" {
		t.Errorf("toStatus (-want +got):\n%s", diff)
	}
}

// TestController_NoRepeatedWriteBeforeTheEcho: another controller patches
// each new service's status right after it is created, so the VIP
// controller often sees an event whose copy predates the echo of its own
// write. It must not write the same VIPs again: each service ends at
// version 3 (created, patched by the other, its VIPs written once).
func TestController_NoRepeatedWriteBeforeTheEcho(t *testing.T) {
	e := newEnv(t, defaultPools())
	const n = 100
	ctx := context.Background()
	for i := range n {
		name := fmt.Sprintf("s%03d", i)
		e.create(ms(name))
		patch := ms(name)
		patch.Status = &resource.ServiceStatus{Addresses: []resource.Address{{Hostname: name + ".mesh.local", Status: resource.AddressAvailable}}}
		res, err := e.st.Apply(ctx, store.Op{Type: store.OpPatchStatus, Object: patch, Patch: &store.StatusPatch{Fields: []string{"addresses"}}, DiscardObject: true})
		if err != nil || res[0].Err != nil {
			t.Fatalf("patching %s: %v %v", name, err, res)
		}
	}
	for i := range n {
		e.waitVIPs(key(resource.MeshService, fmt.Sprintf("s%03d", i)), fmt.Sprintf("241.0.0.%d ", i+1))
	}
	e.rt.Settle()
	for i := range n {
		k := key(resource.MeshService, fmt.Sprintf("s%03d", i))
		o, err := e.st.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if o.Version != 3 {
			t.Errorf("%s is at version %d, want 3 (one VIP write)", k.Name, o.Version)
		}
	}
}

// A MeshService made from a Kubernetes Service gets the addresses the
// Kubernetes controller hands over (SetPlatformVIPs) as its VIPs, in its
// first status write, and none from the pool (seed 000: its ClusterIP is
// its VIP); when they change, its VIPs follow; after a restart, before the
// controller hands them over again, the status's are kept.
func TestCore_PlatformAddressedServices(t *testing.T) {
	e := newEnv(t, defaultPools())
	kube := ms("web-shop")
	kube.Labels = map[string]string{resource.LabelManagedBy: resource.ManagedByKubernetes}
	e.core.SetPlatformVIPs(kube.Key(), []resource.VIP{{IP: "10.96.0.10", Type: resource.VIPKubernetes}})
	e.create(kube)
	e.waitVIPs(kube.Key(), "10.96.0.10 ")
	o, err := e.st.Get(context.Background(), kube.Key())
	if err != nil {
		t.Fatal(err)
	}
	if o.Version != 2 {
		t.Errorf("version %d after the first status write, want 2: the VIPs came in a later write", o.Version)
	}
	e.create(ms("pooled"))
	e.waitVIPs(key(resource.MeshService, "pooled"), "241.0.0.1 ")
	// A copy of another zone's Kubernetes service keeps the label, not the
	// ClusterIP (seed 002): it gets a VIP of the pool.
	synced := ms("web-other-zone")
	synced.Labels = map[string]string{resource.LabelManagedBy: resource.ManagedByKubernetes, resource.LabelOrigin: resource.OriginGlobal}
	e.create(synced)
	e.waitVIPs(synced.Key(), "241.0.0.2 ")

	e.core.SetPlatformVIPs(kube.Key(), []resource.VIP{{IP: "10.244.0.9", Type: resource.VIPKubernetes}})
	e.rt.Runner.Kick()
	e.waitVIPs(kube.Key(), "10.244.0.9 ")
	// Once the status shows them, the core forgets them: the status is what
	// it writes again.
	e.rt.Settle()
	if n := e.core.pendingPlatform(); n != 0 {
		t.Errorf("%d services' platform VIPs kept after their status shows them, want none", n)
	}
	// Handed over, then forgotten before a pass (the Service went back to
	// what the status shows): the status's are written again.
	e.core.SetPlatformVIPs(kube.Key(), []resource.VIP{{IP: "10.96.7.7", Type: resource.VIPKubernetes}})
	e.core.SetPlatformVIPs(kube.Key(), nil)
	e.rt.Runner.Kick()
	e.rt.Settle()
	if d := cmp.Diff([]resource.VIP{{IP: "10.244.0.9", Type: resource.VIPKubernetes}}, e.vips(kube.Key())); d != "" {
		t.Errorf("VIPs after a hand-over was forgotten (-want +got):\n%s", d)
	}

	e.restart()
	e.rt.Settle()
	if d := cmp.Diff([]resource.VIP{{IP: "10.244.0.9", Type: resource.VIPKubernetes}}, e.vips(kube.Key())); d != "" {
		t.Errorf("VIPs after a restart (-want +got):\n%s", d)
	}
}

// The core keeps the platform's VIPs packed: they read back as they were
// handed over, every field and order kept, and a service handed no VIPs
// reads back none (not nil: it has VIPs, and they are none).
func TestPackVIPs_RoundTrips(t *testing.T) {
	for _, vips := range [][]resource.VIP{
		{},
		{{IP: "10.96.0.10", Type: resource.VIPKubernetes}},
		{{IP: "10.244.0.9", Type: resource.VIPKubernetes}, {IP: "fd00::9", Type: resource.VIPKubernetes, Hostname: "web-0.web.shop.svc.cluster.local"}, {IP: "10.244.0.8"}},
	} {
		got := unpackVIPs(packVIPs(vips))
		if got == nil || !slices.Equal(got, vips) {
			t.Errorf("packed and unpacked %v, got %#v", vips, got)
		}
	}
}

// pendingPlatform counts the services whose platform VIPs the core holds.
func (c *Core) pendingPlatform() int {
	c.platformMu.Lock()
	defer c.platformMu.Unlock()
	return len(c.platform)
}
