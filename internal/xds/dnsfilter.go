package xds

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	dnsv3 "github.com/envoyproxy/go-control-plane/envoy/data/dns/v3"
	dnsfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/dns_filter/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshnames/meshnames/internal/resource"
)

// Names on the proxy: a proxy that asks for it gets a UDP listener with
// Envoy's DNS filter whose inline table holds the names the DNS server
// answers in its mesh, with the same addresses and TTL, so that the
// proxy resolves them itself (as Kuma's data plane does). The names come
// from the DNS server's own table (a NameSource the server wiring hands
// the builder), so the two cannot disagree on a name: the listener is
// that table, re-rendered when it changes.
//
// The listener is rendered once per mesh, on the address every proxy
// gets by default, and only while some proxy of the mesh connected here
// gets it: a mesh whose proxies do not ask for names costs nothing. A
// proxy whose reachableBackends select services, or which asks for
// another port, gets its own rendering of the same names: only those of
// the services it may reach, on its own address.

// DNSListenerName is the name of the DNS listener a proxy gets.
const DNSListenerName = "meshnames:dns"

// DNSPortKey is the node metadata key by which a proxy asks for the DNS
// listener on a port of its own, as Kuma's data plane does (kuma-dp sends
// it in its Envoy bootstrap): a port number, as a string or a number.
const DNSPortKey = "dataplane.dns.port"

// DNSFilter says which proxies get the DNS listener, and where.
type DNSFilter struct {
	// All gives every Envoy proxy the listener (xds.dnsFilter.enabled);
	// without it, a proxy gets one when its node metadata has DNSPortKey.
	All bool
	// Addr is where the listener listens on the proxy's host; DNSPortKey
	// replaces its port.
	Addr netip.AddrPort
}

// Name is one name the DNS server answers in a mesh.
type Name struct {
	// Name is lower case and fully qualified (with the final dot).
	Name    string
	Service resource.Key
	// Addrs are its A and AAAA addresses.
	Addrs []netip.Addr
}

// NameSource gives the names the DNS server answers.
type NameSource interface {
	// View returns the names of mesh the DNS server answers now, as a
	// value that stays the same (==) while they do (nil: none), and the
	// TTL of its answers.
	View(mesh string) (view any, ttl uint32)
	// Names lists the names with addresses of a view View returned.
	Names(view any) []Name
}

// dnsNames is what a mesh's DNS listener is rendered from.
type dnsNames struct {
	view  any
	ttl   uint32
	names []Name // in name order
	// addr is the address of the listener in the table: the default one.
	addr netip.AddrPort
}

// dnsOwner is the owner, in a mesh's table, of its DNS listener: a name
// no resource can have.
func dnsOwner(mesh string) resource.Key {
	return resource.Key{Kind: resource.Mesh, Mesh: mesh, Name: ":dns"}
}

// isDNS reports whether k owns a DNS listener.
func isDNS(k resource.Key) bool { return k.Kind == resource.Mesh && k.Name == ":dns" }

// NamesChanged tells the builder that the names of the NameSource
// changed. It never blocks.
func (b *Builder) NamesChanged() {
	select {
	case b.namesCh <- struct{}{}:
	default:
	}
}

// renderDNS renders the DNS listener of mesh again when its names
// changed and a proxy uses it (builder goroutine). A listener no proxy
// uses is left as it is, to be rendered again before a proxy gets it
// (useDNS).
func (b *Builder) renderDNS(mesh string) {
	st := b.states[mesh]
	if st == nil || mesh == ingressMesh || b.Names == nil {
		return
	}
	t := st.t
	t.mu.RLock()
	users, cur := t.dnsUsers, t.dns
	t.mu.RUnlock()
	if users == 0 {
		return
	}
	view, ttl := b.Names.View(mesh)
	if cur != nil && cur.view == view && cur.ttl == ttl && cur.addr == b.DNS.Addr {
		return
	}
	d := &dnsNames{view: view, ttl: ttl, addr: b.DNS.Addr}
	if view != nil {
		d.names = b.Names.Names(view)
	}
	slices.SortFunc(d.names, func(a, b Name) int { return strings.Compare(a.Name, b.Name) })
	l := dnsListener(d.addr, d.ttl, d.names)
	t.mu.Lock()
	t.dns = d
	changed := t.put(dnsOwner(mesh), nil, []Resource{{Type: ListenerType, Name: DNSListenerName, Msg: l}})
	t.mu.Unlock()
	if changed {
		b.wake(mesh)
	}
}

// useDNS counts a use of the DNS listener of t (a stream that gets it, an
// inspection) and returns once the listener is current. Call the
// returned func when the use ends.
func (b *Builder) useDNS(ctx context.Context, t *meshTable, mesh string) (func(), error) {
	t.mu.Lock()
	t.dnsUsers++
	t.mu.Unlock()
	done := func() {
		t.mu.Lock()
		t.dnsUsers--
		t.mu.Unlock()
	}
	a := activation{mesh: mesh, done: make(chan struct{})}
	select {
	case b.dnsWanted <- a:
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
	select {
	case <-a.done:
		return done, nil
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
}

// dnsAddrOf returns where the proxy of node gets the DNS listener, or
// the zero address when it gets none; an error when its node metadata
// asks for a port that is none.
func (b *Builder) dnsAddrOf(node *corev3.Node, p Proxy, proxyless bool) (netip.AddrPort, error) {
	if p.Ingress() || proxyless || b.Names == nil {
		return netip.AddrPort{}, nil // a gRPC library has no DNS filter
	}
	v, ok := node.GetMetadata().GetFields()[DNSPortKey]
	if !ok {
		if b.DNS.All {
			return b.DNS.Addr, nil
		}
		return netip.AddrPort{}, nil
	}
	port, err := parseDNSPort(v)
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.AddrPortFrom(b.DNS.Addr.Addr(), port), nil
}

// parseDNSPort reads the value of DNSPortKey: a port, 1 to 65535, as a
// string (as kuma-dp writes it) or a number.
func parseDNSPort(v *structpb.Value) (uint16, error) {
	var s string
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		s = k.StringValue
	case *structpb.Value_NumberValue:
		s = strconv.FormatFloat(k.NumberValue, 'f', -1, 64)
	default:
		return 0, fmt.Errorf("node.metadata[%q] must be a port number (1 to 65535), as a string or a number; got %s", DNSPortKey, describeValue(v))
	}
	p, err := strconv.ParseUint(strings.TrimSpace(s), 10, 16)
	if err != nil || p == 0 {
		return 0, fmt.Errorf("node.metadata[%q] must be a port number (1 to 65535); got %q", DNSPortKey, s)
	}
	return uint16(p), nil
}

func describeValue(v *structpb.Value) string {
	switch v.GetKind().(type) {
	case *structpb.Value_BoolValue:
		return "a boolean"
	case *structpb.Value_StructValue:
		return "an object"
	case *structpb.Value_ListValue:
		return "a list"
	}
	return "null"
}

// dnsVariant is the DNS listener e as the stream gets it: on its own
// address, with only the names of the services it may reach. Under s.mu
// and s.table.mu.RLock.
func (s *stream) dnsVariant(e *entry) sent {
	t := s.table
	v := s.dnsVar
	if v != nil && v.base == e.version && v.sel == s.sel && v.labels == t.labelsGen {
		return v.out
	}
	names := selectNames(s.sel, t.dns.names, func(k resource.Key) map[string]string { return ownerLabelsOf(t, k) })
	a := mustAny(dnsListener(s.dnsAddr, t.dns.ttl, names))
	ver := version(a.Value)
	s.dnsVar = &dnsVariant{base: e.version, sel: s.sel, labels: t.labelsGen, out: sent{e.name, ver, a, entrySum(e.name, ver)}}
	return s.dnsVar.out
}

// selectNames returns the names of the services sel may reach (all of
// them for a nil sel); labels gives a service's labels.
func selectNames(sel *selector, names []Name, labels func(resource.Key) map[string]string) []Name {
	if sel == nil {
		return names
	}
	out := make([]Name, 0, len(names))
	for _, n := range names {
		if sel.reaches(n.Service, labels(n.Service)) {
			out = append(out, n)
		}
	}
	return out
}

// dnsVariant is a stream's rendering of its mesh's DNS listener, kept
// while the listener, the stream's selection and the services' labels
// are the same.
type dnsVariant struct {
	base   string // the version of the table's listener
	sel    *selector
	labels uint64 // meshTable.labelsGen
	out    sent
}

// ownDNS reports whether the stream gets a rendering of the DNS listener
// of its own rather than the table's. Under s.mu and s.table.mu.RLock.
func (s *stream) ownDNS() bool {
	return s.sel != nil || s.table.dns == nil || s.dnsAddr != s.table.dns.addr
}

func ownerLabelsOf(t *meshTable, k resource.Key) map[string]string {
	if o := t.owners[k]; o != nil {
		return o.labels
	}
	return nil
}

// dnsStatPrefix names the DNS filter's statistics in Envoy.
const dnsStatPrefix = "meshnames_dns"

// MinAnswerTTL is the shortest TTL Envoy's DNS filter takes for its
// answers (answer_ttl, validated "gte: 30s"): a shorter dns.ttl is
// answered with this on the proxy.
const MinAnswerTTL = 30 * time.Second

// dnsListener is a UDP listener on addr whose DNS filter answers names
// from its inline table: A and AAAA records with the given TTL (at least
// MinAnswerTTL), matched
// without regard to case as the DNS server matches them. A name not in
// the table is left to Envoy's own resolver (the filter's behaviour
// without client_config).
func dnsListener(addr netip.AddrPort, ttl uint32, names []Name) *listenerv3.Listener {
	table := &dnsv3.DnsTable{VirtualDomains: make([]*dnsv3.DnsTable_DnsVirtualDomain, 0, len(names))}
	answerTTL := durationpb.New(max(time.Duration(ttl)*time.Second, MinAnswerTTL))
	for _, n := range names {
		if len(n.Addrs) == 0 {
			continue // a name without an address is not answered
		}
		list := &dnsv3.DnsTable_AddressList{Address: make([]string, 0, len(n.Addrs))}
		for _, a := range n.Addrs {
			list.Address = append(list.Address, a.Unmap().String())
		}
		table.VirtualDomains = append(table.VirtualDomains, &dnsv3.DnsTable_DnsVirtualDomain{
			Name:      strings.TrimSuffix(n.Name, "."),
			Endpoint:  &dnsv3.DnsTable_DnsEndpoint{EndpointConfig: &dnsv3.DnsTable_DnsEndpoint_AddressList{AddressList: list}},
			AnswerTtl: answerTTL,
		})
	}
	sa := socketAddress(addr.Addr(), addr.Port())
	sa.GetSocketAddress().Protocol = corev3.SocketAddress_UDP
	return &listenerv3.Listener{
		Name:    DNSListenerName,
		Address: sa,
		ListenerFilters: []*listenerv3.ListenerFilter{{
			Name: "envoy.filters.udp.dns_filter",
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAny(&dnsfilterv3.DnsFilterConfig{
				StatPrefix:      dnsStatPrefix,
				ServerConfig:    &dnsfilterv3.DnsFilterConfig_ServerContextConfig{ConfigSource: &dnsfilterv3.DnsFilterConfig_ServerContextConfig_InlineDnsTable{InlineDnsTable: table}},
				CaseInsensitive: true,
			})},
		}},
	}
}

// DefaultDNSAddr is where a proxy's DNS listener listens by default:
// the port Kuma's transparent proxy sends a workload's DNS queries to.
const DefaultDNSAddr = "127.0.0.1:15053"

// countSelected keeps the table's count of streams that get the DNS
// listener with a selection (dnsSelected) when the stream's selection
// goes from before to after. Under s.mu.
func (s *stream) countSelected(before, after *selector) {
	if !s.dnsAddr.IsValid() || (before == nil) == (after == nil) {
		return
	}
	t := s.table
	t.mu.Lock()
	if after != nil {
		t.dnsSelected++
	} else {
		t.dnsSelected--
	}
	t.mu.Unlock()
}
