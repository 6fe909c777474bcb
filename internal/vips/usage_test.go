package vips

import (
	"context"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlite"
)

var cmpPrefix = cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })

func TestUsage_CountsTheVIPLeases(t *testing.T) {
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	lease := func(ip string, expires time.Time) store.Op {
		return store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: LeasePrefix + ip, Value: []byte(`{}`), ExpiresAt: expires}}
	}
	if _, err := st.Apply(context.Background(),
		lease("241.0.0.1", time.Time{}), lease("241.0.0.2", time.Time{}), // in use
		lease("241.0.0.3", now.Add(time.Minute)),  // in quarantine
		lease("241.0.0.4", now.Add(-time.Minute)), // quarantine over
		lease("242.0.0.1", time.Time{}),           // in use, another pool
		lease("fd00::1", now.Add(time.Minute)),    // quarantined, IPv6 pool
		lease("10.0.0.1", time.Time{}),            // in no pool
		store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: LeasePrefix + "garbage"}},
	); err != nil {
		t.Fatal(err)
	}
	pools := map[resource.Kind]Prefixes{
		resource.MeshService:          {V4: netip.MustParsePrefix("241.0.0.0/24"), V6: netip.MustParsePrefix("fd00::/64")},
		resource.MeshExternalService:  {V4: netip.MustParsePrefix("242.0.0.0/8")},
		resource.MeshMultiZoneService: {V4: netip.MustParsePrefix("243.0.0.0/30")},
	}
	got, err := leaseUsage(context.Background(), st, pools, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []api.VIPPool{
		{Kind: resource.MeshService, Prefix: netip.MustParsePrefix("241.0.0.0/24"), Size: 254, Used: 2, Quarantined: 1},
		{Kind: resource.MeshService, Prefix: netip.MustParsePrefix("fd00::/64"), Size: 1<<64 - 2, Quarantined: 1},
		{Kind: resource.MeshExternalService, Prefix: netip.MustParsePrefix("242.0.0.0/8"), Size: 1<<24 - 2, Used: 1},
		{Kind: resource.MeshMultiZoneService, Prefix: netip.MustParsePrefix("243.0.0.0/30"), Size: 2},
	}
	if diff := cmp.Diff(want, got, cmpPrefix); diff != "" {
		t.Errorf("leaseUsage (-want +got):\n%s", diff)
	}
	tests := []struct {
		ip   string
		want api.VIPState
	}{
		{"241.0.0.1", api.VIPState{Pool: resource.MeshService, Prefix: netip.MustParsePrefix("241.0.0.0/24"), Allocated: true}},
		{"241.0.0.3", api.VIPState{Pool: resource.MeshService, Prefix: netip.MustParsePrefix("241.0.0.0/24"), QuarantinedUntil: now.Add(time.Minute)}},
		{"241.0.0.4", api.VIPState{Pool: resource.MeshService, Prefix: netip.MustParsePrefix("241.0.0.0/24")}},
		{"241.0.0.10", api.VIPState{Pool: resource.MeshService, Prefix: netip.MustParsePrefix("241.0.0.0/24")}}, // no lease: free; not 241.0.0.1's
		{"10.0.0.1", api.VIPState{}},
	}
	for _, tt := range tests {
		got, err := addressState(context.Background(), st, pools, netip.MustParseAddr(tt.ip), now)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, got, cmpPrefix); diff != "" {
			t.Errorf("addressState(%s) (-want +got):\n%s", tt.ip, diff)
		}
	}
}

func TestPoolSize(t *testing.T) {
	for p, want := range map[string]uint64{"241.0.0.0/8": 1<<24 - 2, "10.0.0.0/30": 2, "10.0.0.0/31": 0, "10.0.0.1/32": 0, "fd00::/64": 1<<64 - 2, "fd00::/16": 1<<64 - 2, "fd00::/120": 254} {
		if got := poolSize(netip.MustParsePrefix(p)); got != want {
			t.Errorf("poolSize(%s) = %d, want %d", p, got, want)
		}
	}
}

// TestUsage_TheCoresFiguresWhileLeading checks where the pools' usage
// comes from: the running Core's own figures while this instance leads,
// else the leases, read at most every leaseReadEvery.
func TestUsage_TheCoresFiguresWhileLeading(t *testing.T) {
	e := newEnv(t, defaultPools())
	var leading atomic.Bool
	e.usage = NewUsage(e.st, e.pools, leading.Load)
	used := func() []uint64 {
		t.Helper()
		p, err := e.usage.Pools(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for _, x := range p {
			out = append(out, x.Used)
		}
		return out
	}
	if got := used(); !slices.Equal(got, []uint64{0, 0, 0}) {
		t.Errorf("before any service: %v, want none used", got)
	}
	e.restart() // a core that reports to e.usage
	e.create(ms("a"))
	e.create(ms("b"))
	e.waitVIPs(key(resource.MeshService, "a"), "241.0.0.1 ")
	e.waitVIPs(key(resource.MeshService, "b"), "241.0.0.2 ")
	if got := used(); !slices.Equal(got, []uint64{0, 0, 0}) {
		t.Errorf("not leading: %v, want the leases read before, within leaseReadEvery", got)
	}
	leading.Store(true)
	if got := used(); !slices.Equal(got, []uint64{2, 0, 0}) {
		t.Errorf("leading: %v, want the core's 2 used", got)
	}
}
