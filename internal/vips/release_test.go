package vips

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// Addresses go into quarantine when their service is deleted and when the
// InternalVIP match they served is removed; a value added back gets a new
// address.
func TestCore_ReleasesIntoQuarantine(t *testing.T) {
	p := newPlanner(t, defaultPools(), nil)
	p.pass()
	p.put(mes("x", "one.ext.local", "two.ext.local"))
	p.pass()
	k := key(resource.MeshExternalService, "x")
	owner := "MeshExternalService/default/x"

	p.advance(time.Second)
	p.put(mes("x", "two.ext.local"))
	p.pass()
	if diff := cmp.Diff([]string{"242.0.0.1", "242.0.0.3 two.ext.local"}, p.vips(k)); diff != "" {
		t.Errorf("VIPs after one.ext.local was removed (-want +got):\n%s", diff)
	}
	want := map[string]lease{
		"242.0.0.1": {Owner: owner},
		"242.0.0.2": {Owner: owner, Hostname: "one.ext.local", Released: true, Until: t0.Add(time.Second + quarantine)},
		"242.0.0.3": {Owner: owner, Hostname: "two.ext.local"},
	}
	if diff := cmp.Diff(want, p.leaseTable()); diff != "" {
		t.Errorf("leases after one.ext.local was removed (-want +got):\n%s", diff)
	}

	p.put(mes("x", "two.ext.local", "one.ext.local"))
	p.pass()
	if diff := cmp.Diff([]string{"242.0.0.1", "242.0.0.3 two.ext.local", "242.0.0.4 one.ext.local"}, p.vips(k)); diff != "" {
		t.Errorf("VIPs after one.ext.local came back (-want +got):\n%s", diff)
	}

	p.advance(time.Second)
	p.del(k)
	p.pass()
	until := t0.Add(2*time.Second + quarantine)
	want = map[string]lease{
		"242.0.0.1": {Owner: owner, Released: true, Until: until},
		"242.0.0.2": {Owner: owner, Hostname: "one.ext.local", Released: true, Until: t0.Add(time.Second + quarantine)},
		"242.0.0.3": {Owner: owner, Hostname: "two.ext.local", Released: true, Until: until},
		"242.0.0.4": {Owner: owner, Hostname: "one.ext.local", Released: true, Until: until},
	}
	if diff := cmp.Diff(want, p.leaseTable()); diff != "" {
		t.Errorf("leases after x was deleted (-want +got):\n%s", diff)
	}
	if got := p.core.Wake(); !got.Equal(t0.Add(time.Second + quarantine)) {
		t.Errorf("Wake = %s, want the end of the first quarantine", got)
	}
}

// A pool without a free address leaves the service without VIP and with a
// condition saying why; the service gets one when a quarantine ends (Ops
// after Wake marks it dirty), and no sooner.
func TestCore_Exhaustion(t *testing.T) {
	for _, tc := range []struct {
		name     string
		before   func(p *planner) // with a and b holding 10.0.0.1 and .2
		obj      *resource.Object
		want     []string
		message  string
		retryAt  time.Time // zero: no quarantine ends
		retryGet []string
	}{{
		name:    "every address in use",
		obj:     ms("c"),
		message: "the MeshService pool 10.0.0.0/30 is exhausted: all 2 addresses are in use",
	}, {
		name: "an address in quarantine",
		before: func(p *planner) {
			p.del(msKey("a"))
			p.pass()
		},
		obj:      ms("c"),
		message:  "the MeshService pool 10.0.0.0/30 is exhausted: 1 of its 2 addresses are in quarantine, the first until 2026-01-01T00:01:00Z",
		retryAt:  t0.Add(quarantine),
		retryGet: []string{"10.0.0.1"},
	}, {
		name:    "an external service gets what there is",
		obj:     mes("x", "one.ext.local", "two.ext.local"),
		want:    []string{"10.0.1.1", "10.0.1.2 one.ext.local"},
		message: "the MeshExternalService pool 10.0.1.0/30 is exhausted: all 2 addresses are in use",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			pools := pool4("10.0.0.0/30") // 10.0.0.1-2
			pools[resource.MeshExternalService] = Prefixes{V4: netip.MustParsePrefix("10.0.1.0/30")}
			p := newPlanner(t, pools, nil)
			p.pass()
			p.put(ms("a"), ms("b"))
			p.pass()
			if tc.before != nil {
				tc.before(p)
			}
			k := tc.obj.Key()
			p.put(tc.obj)
			p.pass()
			if diff := cmp.Diff(tc.want, p.vips(k)); diff != "" {
				t.Errorf("VIPs (-want +got):\n%s", diff)
			}
			want := resource.Condition{Type: resource.ConditionVIPsAllocated, Status: resource.ConditionFalse, Reason: resource.ReasonPoolExhausted, Message: tc.message}
			if got, _ := p.condition(k); got != want {
				t.Errorf("condition = %+v\nwant        %+v", got, want)
			}
			if got := p.core.Wake(); !got.Equal(tc.retryAt) {
				t.Fatalf("Wake = %s, want %s", got, tc.retryAt)
			}
			// Nothing to do before then: the service is not retried.
			if decided, _ := p.pass(); len(decided) != 0 {
				t.Errorf("a pass before any quarantine ended decided %v", decided)
			}
			if tc.retryAt.IsZero() {
				return
			}
			p.advance(tc.retryAt.Sub(p.clock.Now()))
			decided, _ := p.pass()
			if !slices.Equal(decided, []resource.Key{k}) {
				t.Errorf("the pass at the end of the quarantine decided %v, want %v", decided, k)
			}
			if diff := cmp.Diff(tc.retryGet, p.vips(k)); diff != "" {
				t.Errorf("VIPs after the quarantine (-want +got):\n%s", diff)
			}
			if c, ok := p.condition(k); ok {
				t.Errorf("condition after the quarantine = %+v, want none", c)
			}
		})
	}

	t.Run("a waiting service deleted is not retried", func(t *testing.T) {
		p := newPlanner(t, pool4("10.0.0.0/30"), nil)
		p.pass()
		p.put(ms("a"), ms("b"))
		p.pass()
		p.del(msKey("a"))
		p.put(ms("c"))
		p.pass()
		p.del(msKey("c"))
		p.pass()
		p.advance(quarantine)
		if decided, _ := p.pass(); len(decided) != 0 {
			t.Errorf("the pass at the end of the quarantine decided %v, want nothing", decided)
		}
	})
}

// At Start the core reads the leases and reconciles them with the statuses
// of its first view: an allocation whose service is gone becomes a
// quarantine from now; quarantines that have not ended keep addresses out;
// ended ones and leases of no managed address are deleted.
func TestCore_LoadsLeasesAtStart(t *testing.T) {
	leases := []store.Lease{
		allocLease("10.0.0.1", "MeshService/default/gone"),
		quarantineLease("10.0.0.2", "MeshService/default/old", t0.Add(30*time.Second)),
		quarantineLease("10.0.0.3", "MeshService/default/older", t0.Add(-time.Second)),
		allocLease("10.0.0.4", "MeshService/default/a"),
		{Name: LeasePrefix + "not-an-ip", Value: []byte(`{}`)},
		quarantineLease("10.200.0.9", "MeshService/default/elsewhere", t0.Add(time.Hour)),
		cursorLease("10.0.0.0/24", "10.0.0.1"),
	}
	p := newPlanner(t, pool4("10.0.0.0/24"), leases, withVIPs(ms("a"), "10.0.0.4"))
	decided, _ := p.pass()
	if !slices.Equal(decided, []resource.Key{msKey("a")}) {
		t.Errorf("the first pass decided %v, want a", decided)
	}
	want := map[string]lease{
		"10.0.0.1": {Owner: "MeshService/default/gone", Released: true, Until: t0.Add(quarantine)},
		"10.0.0.2": {Owner: "MeshService/default/old", Released: true, Until: t0.Add(30 * time.Second)},
		"10.0.0.4": {Owner: "MeshService/default/a"},
	}
	if diff := cmp.Diff(want, p.leaseTable()); diff != "" {
		t.Errorf("leases after the first pass (-want +got):\n%s", diff)
	}
	if got := p.vips(msKey("a")); !slices.Equal(got, []string{"10.0.0.4"}) {
		t.Errorf("a has %v, want its 10.0.0.4", got)
	}
	if got := p.core.Wake(); !got.Equal(t0.Add(30 * time.Second)) {
		t.Errorf("Wake = %s, want the end of 10.0.0.2's quarantine", got)
	}
	// From the cursor (10.0.0.1): .1 and .2 are in quarantine, .3's ended,
	// .4 is a's.
	p.put(ms("b"), ms("c"))
	p.pass()
	for name, want := range map[string]string{"b": "10.0.0.3", "c": "10.0.0.5"} {
		if got := p.vips(msKey(name)); !slices.Equal(got, []string{want}) {
			t.Errorf("%s has %v, want %s", name, got, want)
		}
	}
	// The lease of a service deleted while no core ran keeps its address
	// out for a whole quarantine from Start.
	p.advance(30 * time.Second)
	p.pass()
	if _, ok := p.leaseTable()["10.0.0.2"]; ok {
		t.Error("the lease of 10.0.0.2 outlived its quarantine")
	}
	if got := p.core.Wake(); !got.Equal(t0.Add(quarantine)) {
		t.Errorf("Wake = %s, want the end of 10.0.0.1's quarantine %s", got, t0.Add(quarantine))
	}
}

func TestLeaseValue_IsWhatJSONMarshalWrites(t *testing.T) {
	for _, v := range []leaseValue{
		{},
		{Owner: "MeshService/default/redis"},
		{Owner: "MeshService/default/redis", Hostname: "redis.svc.mesh.local"},
		{Owner: "MeshExternalService/m/x", Hostname: "a<b>&\"c\\\u2028\x01\xff", Released: true},
		{Owner: "MeshService/default/é", Released: true},
	} {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := v.appendJSON(nil); !bytes.Equal(got, want) {
			t.Errorf("appendJSON(%+v) = %s, want %s", v, got, want)
		}
		var back leaseValue
		if err := json.Unmarshal(v.appendJSON(nil), &back); err != nil || back.Owner != v.Owner || back.Released != v.Released {
			t.Errorf("appendJSON(%+v) reads back as %+v, %v", v, back, err)
		}
	}
}
