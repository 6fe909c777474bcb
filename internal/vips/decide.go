package vips

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/meshnames/meshnames/internal/ipam"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// slot is one VIP a service should have.
type slot struct {
	hostname string
	v6       bool
}

// slots lists the VIPs obj should have: one per family for every service,
// which its generated hostnames answer with, and for a MeshExternalService
// one more per family and InternalVIP match (seed 003).
func (st *state) slots(obj *resource.Object) []slot {
	hosts := []string{""}
	if obj.Kind == resource.MeshExternalService {
		for _, m := range obj.Spec.(*resource.MeshExternalServiceSpec).Match {
			if m.Type == resource.MatchInternalVIP && !slices.Contains(hosts, m.Value) {
				hosts = append(hosts, m.Value)
			}
		}
	}
	var out []slot
	for _, h := range hosts {
		for _, f := range st.families[obj.Kind] {
			out = append(out, slot{hostname: h, v6: f.v6})
		}
	}
	return out
}

// Decide implements reconcile.Core: it computes the VIPs of service obj,
// allocating what is missing and releasing what no longer fills a slot,
// sets them and the exhaustion condition in st, and returns the leases of
// what it took and released.
func (c *Core) Decide(obj *resource.Object, status resource.Status) []store.Op {
	st := c.st
	k := obj.Key()
	if platformAddressed(obj) {
		// seed 000: a MeshService made from a Kubernetes Service has its
		// VIPs already (the ClusterIP, or its Pod's IPs): write those the
		// Kubernetes controller gave, and allocate nothing.
		status.(resource.ServiceStatusOf).Service().VIPs = c.platformVIPs(obj)
		return nil
	}
	now := st.now()
	var ops []store.Op
	have := st.owned[k]
	// Addresses the status shows that we did not know (someone else wrote
	// them, such as a Kubernetes ClusterIP): keep them.
	for _, v := range statusVIPs(obj) {
		ip, err := netip.ParseAddr(v.IP)
		if err != nil || slices.ContainsFunc(have, func(h vip) bool { return h.ip == ip }) {
			continue
		}
		f := st.findFamily(ip)
		if f != nil {
			// Not in have, so not held by k: free, in quarantine, or held by
			// another service, which Reserve refuses (not ours to keep).
			if err := f.pool.Reserve(ip); err != nil {
				continue
			}
			ops = append(ops, putLease(ip, leaseValue{Owner: ownerString(k), Hostname: v.Hostname}, time.Time{}))
		}
		have = append(have, newVIP(ip, v.Type, v.Hostname))
	}
	// Keep what fills a slot; release managed VIPs that no longer do
	// (a MeshExternalService InternalVIP match that was removed).
	free := st.slots(obj)
	var buf [4]vip
	want := buf[:0]
	for _, v := range have {
		i := slices.IndexFunc(free, func(s slot) bool { return s.hostname == v.hostname && s.v6 == v.ip.Is6() })
		switch {
		case i >= 0:
			want = append(want, v)
			free = slices.Delete(free, i, i+1)
		case v.hostname == "":
			// A second address of a family (such as a ClusterIP next to a
			// Kuma VIP) is kept: a VIP never changes while its service exists.
			want = append(want, v)
		default:
			if op, ok := c.releaseOp(k, v, now); ok {
				ops = append(ops, op)
			}
		}
	}
	exhausted := ""
	for _, s := range free {
		f := st.familyOf(obj.Kind, s.v6)
		ip, err := f.pool.Allocate(now)
		if err != nil {
			c.failures.WithLabelValues(f.name).Inc()
			exhausted = exhaustedMessage(obj.Kind, f.name, err)
			continue
		}
		c.allocations.WithLabelValues(f.name).Inc()
		v := newVIP(ip, resource.VIPKuma, s.hostname)
		want = append(want, v)
		ops = append(ops, putLease(ip, leaseValue{Owner: ownerString(k), Hostname: s.hostname}, time.Time{}))
	}
	if old, ok := st.owned[k]; !ok || !slices.Equal(want, old) {
		st.owned[k] = exact(want)
	}
	if exhausted != "" {
		st.waiting[k] = struct{}{}
	} else {
		delete(st.waiting, k)
	}
	svc := status.(resource.ServiceStatusOf).Service()
	svc.VIPs = toStatus(want)
	if exhausted != "" {
		svc.Conditions = append(svc.Conditions, resource.Condition{Type: resource.ConditionVIPsAllocated, Status: resource.ConditionFalse, Reason: resource.ReasonPoolExhausted, Message: exhausted})
	}
	return ops
}

// platformAddressed reports whether obj's VIPs come from the platform: a
// MeshService made from a Kubernetes Service of this zone (kuma.io/managed-by:
// k8s-controller), whose ClusterIP or Pod IPs that controller writes. A
// copy synced from another zone keeps the label, but ClusterIPs do not
// travel (seed 002): it gets VIPs from the pool like any synced service.
func platformAddressed(obj *resource.Object) bool {
	return obj.Kind == resource.MeshService && obj.Labels[resource.LabelManagedBy] == resource.ManagedByKubernetes &&
		obj.Labels[resource.LabelOrigin] != resource.OriginGlobal
}

// exact returns a copy of vs of exactly its length, or nil when vs is
// empty: owned keeps a service's VIPs for as long as the service lives.
func exact(vs []vip) []vip {
	if len(vs) == 0 {
		return nil
	}
	out := make([]vip, len(vs))
	copy(out, vs)
	return out
}

// exhaustedMessage says which pool is full and when it may have room.
func exhaustedMessage(k resource.Kind, pool string, err error) string {
	var ex *ipam.ExhaustedError
	if !errors.As(err, &ex) {
		return fmt.Sprintf("cannot allocate from the %s pool %s: %v", k, pool, err)
	}
	if ex.Quarantined == 0 {
		return fmt.Sprintf("the %s pool %s is exhausted: all %d addresses are in use", k, pool, ex.Size)
	}
	return fmt.Sprintf("the %s pool %s is exhausted: %d of its %d addresses are in quarantine, the first until %s",
		k, pool, ex.Quarantined, ex.Size, ex.NextExpiry.UTC().Format(time.RFC3339))
}

func (st *state) familyOf(k resource.Kind, v6 bool) *family {
	for _, f := range st.families[k] {
		if f.v6 == v6 {
			return f
		}
	}
	return nil
}

// releaseOp frees a managed VIP of service k into quarantine and returns
// the write of its lease; false for an address outside every pool, which
// is kept, not managed. A managed VIP in owned is one k took: see state.
func (c *Core) releaseOp(k resource.Key, v vip, now time.Time) (store.Op, bool) {
	f := c.st.findFamily(v.ip)
	if f == nil {
		return store.Op{}, false
	}
	until := now.Add(c.st.q)
	if err := f.pool.Release(v.ip, until); err != nil {
		c.o.Log.Warn("releasing a VIP", "ip", v.ip, "err", err)
	}
	return putLease(v.ip, leaseValue{Owner: ownerString(k), Hostname: v.hostname, Released: true}, until), true
}

func toStatus(vs []vip) []resource.VIP {
	if len(vs) == 0 {
		return nil
	}
	out := make([]resource.VIP, len(vs))
	for i, v := range vs {
		out[i] = resource.VIP{IP: v.ip.String(), Type: v.typ.Value(), Hostname: v.hostname}
	}
	return out
}
