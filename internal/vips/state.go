package vips

import (
	"net/netip"
	"time"
	"unique"

	"github.com/meshnames/meshnames/internal/ipam"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// family is one pool of one kind.
type family struct {
	name string // the pool's prefix, for metrics and messages
	v6   bool
	pool *ipam.Pool
	// cursor is the cursor last persisted; next-fit must continue where it
	// was after a restart, or addresses freed just before it would be the
	// first handed out again once their quarantine ends.
	cursor netip.Addr
}

// vip is one address held by a service. There is one per service and
// family, so it is kept to 48 bytes: the type is one of a few strings,
// interned, and the pool of a managed address is found from the address
// (pools do not overlap, and do not change within a term).
type vip struct {
	ip       netip.Addr
	hostname string
	typ      unique.Handle[string]
}

func newVIP(ip netip.Addr, typ, hostname string) vip {
	return vip{ip: ip, hostname: hostname, typ: unique.Make(typ)}
}

// state is what one leadership term knows.
//
// It holds one entry per service, so it keeps no more than it must: who
// holds a managed address is not recorded apart. A managed address in use
// (taken in its pool and not in quarantine) is always in the owned VIPs of
// exactly one service, which took it with Allocate or Reserve; Reserve
// refuses an address in use, so a service can only take one that is free
// or in quarantine. The pools thus answer "is it held by another service"
// and owned answers "is it held by this one".
type state struct {
	now      func() time.Time
	q        time.Duration
	families map[resource.Kind][]*family
	// owned are the VIPs of each service: what its status shows, or what
	// a status write that has not landed yet will show. Each slice has
	// exactly its length.
	owned map[resource.Key][]vip
	// waiting are services that lack a VIP because a pool is exhausted.
	waiting map[resource.Key]struct{}
}

// leaseValue is what a VIP lease records.
type leaseValue struct {
	Owner    string `json:"owner"` // Kind/mesh/name
	Hostname string `json:"hostname,omitempty"`
	Released bool   `json:"released,omitempty"`
}

func ownerString(k resource.Key) string { return string(k.Kind) + "/" + k.Mesh + "/" + k.Name }

func leaseName(ip netip.Addr) string { return LeasePrefix + ip.String() }

// findFamily returns the managed pool holding ip, if any.
func (st *state) findFamily(ip netip.Addr) *family {
	for _, fams := range st.families {
		for _, f := range fams {
			if f.pool.Contains(ip) {
				return f
			}
		}
	}
	return nil
}

// appendJSON appends v as JSON: exactly what json.Marshal writes for it
// (TestLeaseValue_IsWhatJSONMarshalWrites), without its reflection (every
// new VIP writes one).
func (v leaseValue) appendJSON(b []byte) []byte {
	b = resource.AppendJSONString(append(b, `{"owner":`...), v.Owner)
	if v.Hostname != "" {
		b = resource.AppendJSONString(append(b, `,"hostname":`...), v.Hostname)
	}
	if v.Released {
		b = append(b, `,"released":true`...)
	}
	return append(b, '}')
}

func putLease(ip netip.Addr, v leaseValue, until time.Time) store.Op {
	b := v.appendJSON(make([]byte, 0, 32+len(v.Owner)+len(v.Hostname)))
	return store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: leaseName(ip), Value: b, ExpiresAt: until}}
}

func statusVIPs(obj *resource.Object) []resource.VIP {
	if st, ok := obj.Status.(resource.ServiceStatusOf); ok && st != nil {
		return st.Service().VIPs
	}
	return nil
}
