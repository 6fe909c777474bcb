package vips

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// leaseReadEvery bounds how often Usage reads the VIP leases when this
// instance does not lead.
const leaseReadEvery = 10 * time.Second

// Usage tells readers (the GUI) how the VIP pools are used, on every
// instance: while this instance leads, the figures its Core last computed
// (Options.Usage); otherwise, or before the Core has computed them, what
// the VIP leases in the store say, read at most every leaseReadEvery
// (100,000 leases take a while to read). It is safe for concurrent use.
type Usage struct {
	st      store.Store
	pools   map[resource.Kind]Prefixes
	leading func() bool
	// live is what the leading Core published, nil before it did.
	live atomic.Pointer[[]api.VIPPool]

	mu      sync.Mutex
	readAt  time.Time
	last    []api.VIPPool
	lastErr error
}

// NewUsage returns the usage of pools, whose leases are in st; leading
// reports whether this instance leads (and so runs the Core). It does no
// I/O.
func NewUsage(st store.Store, pools map[resource.Kind]Prefixes, leading func() bool) *Usage {
	return &Usage{st: st, pools: pools, leading: leading}
}

// Pools returns the usage of every pool: MeshService, MeshExternalService,
// then MeshMultiZoneService, IPv4 before IPv6.
func (u *Usage) Pools(ctx context.Context) ([]api.VIPPool, error) {
	if p := u.live.Load(); p != nil && u.leading() {
		return slices.Clone(*p), nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.last == nil || time.Since(u.readAt) >= leaseReadEvery {
		u.last, u.lastErr = leaseUsage(ctx, u.st, u.pools, time.Now())
		u.readAt = time.Now()
	}
	return slices.Clone(u.last), u.lastErr
}

// publish records the figures of the leading Core.
func (u *Usage) publish(p []api.VIPPool) { u.live.Store(&p) }

// State tells what the VIP leases say of ip now.
func (u *Usage) State(ctx context.Context, ip netip.Addr) (api.VIPState, error) {
	return addressState(ctx, u.st, u.pools, ip, time.Now())
}

// emptyPools lists pools with no address counted, in the order Pools
// lists them.
func emptyPools(pools map[resource.Kind]Prefixes) []api.VIPPool {
	var out []api.VIPPool
	for _, k := range serviceKinds {
		p := pools[k]
		for _, prefix := range []netip.Prefix{p.V4, p.V6} {
			if prefix.IsValid() {
				out = append(out, api.VIPPool{Kind: k, Prefix: prefix, Size: poolSize(prefix)})
			}
		}
	}
	return out
}

// leaseUsage counts the addresses of each VIP pool from the VIP leases the
// Core keeps in the store (LeasePrefix): a lease without an expiry is an
// address in use, one that expires later is in quarantine. Every instance
// reads the same leases, leader or not.
func leaseUsage(ctx context.Context, st store.Store, pools map[resource.Kind]Prefixes, now time.Time) ([]api.VIPPool, error) {
	out := emptyPools(pools)
	leases, err := st.Leases(ctx, LeasePrefix)
	if err != nil {
		return out, err
	}
	for _, l := range leases {
		ip, err := netip.ParseAddr(strings.TrimPrefix(l.Name, LeasePrefix))
		if err != nil {
			continue
		}
		i := slices.IndexFunc(out, func(p api.VIPPool) bool { return p.Prefix.Contains(ip) })
		switch {
		case i < 0:
		case l.ExpiresAt.IsZero():
			out[i].Used++
		case l.ExpiresAt.After(now):
			out[i].Quarantined++
		}
	}
	return out, nil
}

// poolSize is the number of addresses a pool hands out: all but the first
// and the last of the prefix (as ipam does), at most 2^64-2.
func poolSize(p netip.Prefix) uint64 {
	host := p.Addr().BitLen() - p.Bits()
	if host >= 64 {
		return 1<<64 - 2
	}
	if host < 2 {
		return 0
	}
	return 1<<host - 2
}

// addressState tells what the VIP leases say of ip at now.
func addressState(ctx context.Context, st store.Store, pools map[resource.Kind]Prefixes, ip netip.Addr, now time.Time) (api.VIPState, error) {
	var s api.VIPState
	for _, k := range serviceKinds {
		for _, prefix := range []netip.Prefix{pools[k].V4, pools[k].V6} {
			if prefix.IsValid() && prefix.Contains(ip) {
				s.Pool, s.Prefix = k, prefix
			}
		}
	}
	if s.Pool == "" {
		return s, nil
	}
	name := LeasePrefix + ip.String()
	leases, err := st.Leases(ctx, name)
	if err != nil {
		return s, err
	}
	for _, l := range leases {
		if l.Name != name {
			continue
		}
		switch {
		case l.ExpiresAt.IsZero():
			s.Allocated = true
		case l.ExpiresAt.After(now):
			s.QuarantinedUntil = l.ExpiresAt
		}
	}
	return s, nil
}
