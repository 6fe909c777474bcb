package server

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/apiserver"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/dnsserver"
	"github.com/meshnames/meshnames/internal/gui"
	"github.com/meshnames/meshnames/internal/history"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/vips"
	"github.com/meshnames/meshnames/internal/xds"
)

// newGUI builds the web GUI over the same cache, API bodies and DNS table
// as the REST API.
func (s *Server) newGUI(st store.Store, c *cache.Cache, dnsSrv *dnsserver.Server, tableOpts dnsserver.TableOptions, apiOpts apiserver.Options, proxies *xdsParts, reg prometheus.Gatherer) (*gui.Server, error) {
	pools, err := vipPools(s.cfg.VIPs)
	if err != nil {
		return nil, err
	}
	var historyOf func(ctx context.Context, vip, hostname string) (api.HistoryReport, error)
	if rec, ok := st.(store.Recorder); ok {
		// Every mesh: the GUI is refused to tokens limited to meshes.
		historyOf = func(ctx context.Context, vip, hostname string) (api.HistoryReport, error) {
			return apiserver.HistoryReport(ctx, rec, history.Query{VIP: vip, Hostname: hostname, Limit: historyLimit}, func(string) bool { return true })
		}
	}
	var streams func(mesh, name string) []api.XDSStream
	if proxies != nil {
		streams = func(mesh, name string) []api.XDSStream {
			return proxies.server.Streams(xds.Proxy{Mesh: mesh, Name: name})
		}
	}
	usage := &poolsReader{st: st, gather: reg, pools: pools, leading: func() bool { return s.elector != nil && s.elector.Leading() }}
	return gui.New(gui.Options{
		Cache: c, Store: st, Mode: s.cfg.Mode, Zone: s.cfg.Zone, Version: s.version, Log: s.log.With("component", "gui"),
		Hostnames: func(k resource.Key) (api.HostnamesReport, error) {
			return apiserver.HostnamesReport(c, s.cfg.Mode, s.cfg.Zone, k)
		},
		// The GUI pages the names itself (DNSNames): only the names not
		// answered come from the _dns body.
		DNS: func(mesh string) (api.DNSListing, error) {
			return apiserver.DNSListing(c, func(mesh string) api.DNSListing { return dnsRejections(dnsSrv, c, tableOpts, mesh) }, mesh)
		},
		DNSNames: func(mesh, q string, offset, limit int) ([]api.DNSName, int) {
			return dnsPage(dnsSrv, mesh, q, offset, limit)
		},
		ServiceDNS: func(k resource.Key) api.DNSListing { return serviceDNS(dnsSrv, c, tableOpts, k) },
		Lookup:     func(name string) []gui.DNSMatch { return lookupDNS(dnsSrv, name) },
		LookupAddr: func(ip netip.Addr) []gui.DNSMatch { return lookupAddr(dnsSrv, ip) },
		MatchDNS:   func(word string, fn func(resource.Key)) { matchDNS(dnsSrv, word, fn) },
		Leader:     apiOpts.Leader,
		History:    historyOf,
		Pools:      usage.read,
		VIP: func(ctx context.Context, ip netip.Addr) (gui.VIPState, error) {
			return vipState(ctx, st, pools, ip, time.Now())
		},
		// The zones' insights are the API's (GET /zones/{name}/_insight).
		ZoneInsight: apiOpts.ZoneInsight,
		GlobalLink:  s.globalLink(),
		// A proxy's streams and config are the API's (GET .../_xds).
		XDS:        apiOpts.XDS,
		XDSStreams: streams,
	}), nil
}

// globalLink reports a zone control plane's stream to its global, for the
// GUI; nil in the other modes.
func (s *Server) globalLink() func() gui.GlobalLink {
	if s.sync == nil || s.sync.zone == nil {
		return nil
	}
	z := s.sync.zone
	return func() gui.GlobalLink {
		return gui.GlobalLink{Address: s.cfg.Sync.GlobalAddress, Leading: s.elector != nil && s.elector.Leading(), Insight: z.Insight()}
	}
}

// historyLimit bounds the events of one value the GUI reads.
const historyLimit = 100

// tableView returns the DNS table's view of mesh, nil while there is none.
func tableView(srv *dnsserver.Server, mesh string) *dnsserver.View {
	if srv == nil {
		return nil
	}
	if t := srv.Table(); t != nil {
		return t.Views[mesh]
	}
	return nil // still loading
}

// dnsRejections is the DNS table's part of the _dns listing of mesh
// without its names: the names it does not answer, and why. A global's
// table holds no services (dnsserver.GlobalAnswersNoNames): every name of
// every service of the mesh is one it does not answer, listed from the
// cache when asked for rather than kept.
func dnsRejections(srv *dnsserver.Server, c *cache.Cache, o dnsserver.TableOptions, mesh string) api.DNSListing {
	var l api.DNSListing
	if o.Global {
		for _, k := range dnsserver.ServiceKinds {
			c.Scan(cache.Query{Kind: k, Mesh: mesh, Unordered: true}, func(obj *resource.Object) {
				for _, r := range dnsserver.Extract(obj, o).Refused {
					l.NotAnswered = append(l.NotAnswered, notAnswer(r))
				}
			})
		}
		return l
	}
	if v := tableView(srv, mesh); v != nil {
		for _, r := range v.Rejections() {
			l.NotAnswered = append(l.NotAnswered, notAnswer(r))
		}
	}
	return l
}

func notAnswer(r dnsserver.Rejection) api.DNSNotAnswer {
	return api.DNSNotAnswer{Name: r.Name, Kind: r.Service.Kind, Service: r.Service.Name, Source: r.Source, Reason: r.Reason}
}

// dnsPage returns the names [offset, offset+limit) of the _dns listing of
// mesh, in its order (by name), among those whose name, service or
// addresses contain q; and how many there are. Only the page is converted.
func dnsPage(srv *dnsserver.Server, mesh, q string, offset, limit int) ([]api.DNSName, int) {
	v := tableView(srv, mesh)
	if v == nil {
		return nil, 0
	}
	var names []string
	var buf []byte
	w := []byte(q)
	for e := range v.Entries() {
		ok := q == "" || strings.Contains(e.Name, q) || strings.Contains(e.Service.Name, q)
		for _, ips := range [][]netip.Addr{e.A, e.AAAA} {
			for _, ip := range ips {
				if !ok {
					buf = ip.AppendTo(buf[:0])
					ok = bytes.Contains(buf, w)
				}
			}
		}
		if ok {
			names = append(names, e.Name)
		}
	}
	slices.Sort(names)
	var out []api.DNSName
	for _, name := range names[min(offset, len(names)):min(offset+limit, len(names))] {
		if e, ok := v.Lookup(name); ok {
			out = append(out, dnsName(&e))
		}
	}
	return out, len(names)
}

// dnsName converts a table entry for the API and the GUI.
func dnsName(e *dnsserver.Entry) api.DNSName {
	n := api.DNSName{Name: e.Name, Kind: e.Service.Kind, Service: e.Service.Name, Source: e.Source}
	for _, ip := range e.A {
		n.A = append(n.A, ip.String())
	}
	for _, ip := range e.AAAA {
		n.AAAA = append(n.AAAA, ip.String())
	}
	for _, r := range e.SRV {
		n.SRV = append(n.SRV, fmt.Sprintf("%d %s", r.Port, r.Target))
	}
	switch {
	case len(n.SRV) > 0:
		n.Types = []string{"SRV"}
	default:
		if len(n.A) > 0 {
			n.Types = append(n.Types, "A")
		}
		if len(n.AAAA) > 0 {
			n.Types = append(n.Types, "AAAA")
		}
	}
	return n
}

// serviceDNS lists what the DNS table answers for the service k: the names
// the service wants (dnsserver.Extract), each looked up in its mesh's view
// with its SRV names, and those answered for another service or rejected.
func serviceDNS(srv *dnsserver.Server, c *cache.Cache, o dnsserver.TableOptions, k resource.Key) api.DNSListing {
	l := api.DNSListing{Mesh: k.Mesh}
	t := srv.Table()
	obj, ok := c.Peek(k) // read only
	if t == nil || !ok {
		return l
	}
	names := dnsserver.Extract(obj, o)
	if o.Global {
		for _, r := range names.Refused {
			l.NotAnswered = append(l.NotAnswered, notAnswer(r))
		}
		return l
	}
	v := t.Views[k.Mesh]
	if v == nil {
		return l
	}
	for _, n := range names.Names {
		e, ok := v.Lookup(n.Name)
		switch {
		case !ok:
			continue // a rejection, listed below
		case e.Service != k:
			l.NotAnswered = append(l.NotAnswered, api.DNSNotAnswer{Name: n.Name, Kind: k.Kind, Service: k.Name, Source: n.Source,
				Reason: fmt.Sprintf("the name is answered for %s (%s)", e.Service, e.Source)})
			continue
		}
		l.Names = append(l.Names, dnsName(&e))
		var seen []string
		for _, p := range n.Ports {
			if slices.Contains(seen, p.Name) {
				continue
			}
			seen = append(seen, p.Name)
			if e, ok := v.Lookup("_" + p.Name + "._tcp." + n.Name); ok && e.Service == k {
				l.Names = append(l.Names, dnsName(&e))
			}
		}
	}
	for _, r := range v.Rejections() {
		if r.Service == k && !slices.ContainsFunc(l.NotAnswered, func(n api.DNSNotAnswer) bool { return n.Name == r.Name }) {
			l.NotAnswered = append(l.NotAnswered, api.DNSNotAnswer{Name: r.Name, Kind: k.Kind, Service: k.Name, Source: r.Source, Reason: r.Reason})
		}
	}
	return l
}

// lookupDNS returns the records of a fully qualified name in every mesh's
// view, ordered by mesh.
func lookupDNS(srv *dnsserver.Server, name string) []gui.DNSMatch {
	t := srv.Table()
	if t == nil {
		return nil
	}
	name = strings.ToLower(name)
	var out []gui.DNSMatch
	for mesh, v := range t.Views {
		if e, ok := v.Lookup(name); ok {
			out = append(out, gui.DNSMatch{Mesh: mesh, Name: dnsName(&e)})
		}
	}
	slices.SortFunc(out, func(a, b gui.DNSMatch) int { return strings.Compare(a.Mesh, b.Mesh) })
	return out
}

// lookupAddr returns, in each mesh, the records of the name the reverse
// name of ip points to (the service holding the VIP).
func lookupAddr(srv *dnsserver.Server, ip netip.Addr) []gui.DNSMatch {
	t := srv.Table()
	rev, err := dns.ReverseAddr(ip.String())
	if t == nil || err != nil {
		return nil
	}
	var out []gui.DNSMatch
	for mesh, v := range t.Views {
		if name, ok := v.PTR(rev); ok {
			if e, ok := v.Lookup(name); ok {
				out = append(out, gui.DNSMatch{Mesh: mesh, Name: dnsName(&e)})
			}
		}
	}
	slices.SortFunc(out, func(a, b gui.DNSMatch) int { return strings.Compare(a.Mesh, b.Mesh) })
	return out
}

// matchDNS calls fn with the service of every name of the DNS table that
// contains word, in its name or its addresses. SRV names are skipped: the
// name they point to is in the table too, for the same service.
func matchDNS(srv *dnsserver.Server, word string, fn func(resource.Key)) {
	t := srv.Table()
	if t == nil {
		return
	}
	var buf []byte
	w := []byte(word)
	// Only a word of hexadecimal digits, dots and colons can be part of an
	// address: spare the others formatting every address.
	addrs := strings.Trim(word, "0123456789abcdef.:") == ""
	for _, v := range t.Views {
		for e := range v.Entries() {
			if strings.HasPrefix(e.Name, "_") {
				continue
			}
			if strings.Contains(e.Name, word) {
				fn(e.Service)
				continue
			}
			if !addrs {
				continue
			}
			for _, ips := range [][]netip.Addr{e.A, e.AAAA} {
				for _, ip := range ips {
					if buf = ip.AppendTo(buf[:0]); bytes.Contains(buf, w) {
						fn(e.Service)
					}
				}
			}
		}
	}
}

// leaseReadEvery bounds how often the GUI of an instance that does not lead
// reads the VIP leases for the pools' usage.
const leaseReadEvery = 10 * time.Second

// poolsReader gives the GUI the usage of the VIP pools: while this instance
// leads, the VIP controller's own figures (its meshnames_vips_pool_addresses
// gauges, read from the registry); otherwise, or before the controller
// has set them, what the VIP leases in the store say, read at most every
// leaseReadEvery (100,000 leases take a while to read).
type poolsReader struct {
	st      store.Store
	gather  prometheus.Gatherer
	pools   map[resource.Kind]vips.Prefixes
	leading func() bool

	mu      sync.Mutex
	readAt  time.Time
	last    []gui.Pool
	lastErr error
}

func (r *poolsReader) read(ctx context.Context) ([]gui.Pool, error) {
	if r.leading() {
		if p, ok := poolsFromGauges(r.gather, r.pools); ok {
			return p, nil
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil || time.Since(r.readAt) >= leaseReadEvery {
		r.last, r.lastErr = poolUsage(ctx, r.st, r.pools, time.Now())
		r.readAt = time.Now()
	}
	return slices.Clone(r.last), r.lastErr
}

// poolsFromGauges reads the VIP controller's gauges; false when it has not
// set one of the pools' yet.
func poolsFromGauges(g prometheus.Gatherer, pools map[resource.Kind]vips.Prefixes) ([]gui.Pool, bool) {
	if g == nil {
		return nil, false
	}
	mfs, err := g.Gather()
	if err != nil {
		return nil, false
	}
	values := map[string]map[string]float64{} // pool -> state -> value
	for _, mf := range mfs {
		if mf.GetName() != "meshnames_vips_pool_addresses" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var pool, state string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "pool":
					pool = l.GetValue()
				case "state":
					state = l.GetValue()
				}
			}
			if values[pool] == nil {
				values[pool] = map[string]float64{}
			}
			values[pool][state] = m.GetGauge().GetValue()
		}
	}
	out := poolsOf(pools)
	for i := range out {
		v, ok := values[out[i].Prefix.String()]
		if !ok || v["size"] == 0 {
			return nil, false
		}
		out[i].Used, out[i].Quarantined = uint64(v["used"]), uint64(v["quarantined"])
	}
	return out, true
}

// poolsOf lists the pools of every service kind, empty.
func poolsOf(pools map[resource.Kind]vips.Prefixes) []gui.Pool {
	var out []gui.Pool
	for _, k := range []resource.Kind{resource.MeshService, resource.MeshExternalService, resource.MeshMultiZoneService} {
		p := pools[k]
		for _, prefix := range []netip.Prefix{p.V4, p.V6} {
			if prefix.IsValid() {
				out = append(out, gui.Pool{Kind: k, Prefix: prefix, Size: poolSize(prefix)})
			}
		}
	}
	return out
}

// poolUsage counts the addresses of each VIP pool from the VIP leases the
// controller keeps in the store (vips.LeasePrefix): a lease without an
// expiry is an address in use, one that expires later is in quarantine.
// Every instance reads the same leases, leader or not.
func poolUsage(ctx context.Context, st store.Store, pools map[resource.Kind]vips.Prefixes, now time.Time) ([]gui.Pool, error) {
	out := poolsOf(pools)
	leases, err := st.Leases(ctx, vips.LeasePrefix)
	if err != nil {
		return out, err
	}
	for _, l := range leases {
		ip, err := netip.ParseAddr(strings.TrimPrefix(l.Name, vips.LeasePrefix))
		if err != nil {
			continue
		}
		i := slices.IndexFunc(out, func(p gui.Pool) bool { return p.Prefix.Contains(ip) })
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

// vipState tells what the VIP leases say of ip.
func vipState(ctx context.Context, st store.Store, pools map[resource.Kind]vips.Prefixes, ip netip.Addr, now time.Time) (gui.VIPState, error) {
	var s gui.VIPState
	for _, k := range []resource.Kind{resource.MeshService, resource.MeshExternalService, resource.MeshMultiZoneService} {
		for _, prefix := range []netip.Prefix{pools[k].V4, pools[k].V6} {
			if prefix.IsValid() && prefix.Contains(ip) {
				s.Pool, s.Prefix = k, prefix
			}
		}
	}
	if s.Pool == "" {
		return s, nil
	}
	name := vips.LeasePrefix + ip.String()
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
