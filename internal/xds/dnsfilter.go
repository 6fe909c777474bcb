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
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshnames/meshnames/internal/resource"
)

// Names on the proxy: a proxy that asks for it gets a UDP listener with
// Envoy's DNS filter whose inline table holds the names the DNS server
// answers in its mesh, with the same addresses (and the same TTL, or 30 s
// when that is longer: Envoy takes no shorter one), so that the proxy
// resolves them itself (as Kuma's data plane does). The names come from
// the DNS server's own table (a NameSource the server wiring hands the
// builder), so the two cannot disagree on a name: the listener is that
// table, rendered again when it changes.
//
// The listener is rendered once per mesh, on the address every proxy
// gets by default, and only while some proxy of the mesh connected here
// gets it: a mesh whose proxies do not ask for names costs nothing.
// Proxies whose reachableBackends select services, or which ask for
// another port, get a rendering of the same names made for them (one per
// address and selection, shared by the streams alike): only those of the
// services they may reach, on their own address.

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
	// Addrs are its A addresses, then its AAAA addresses.
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

// dnsNames is what a mesh's DNS listener is rendered from: the names in
// name order, and each one encoded as it stands in the listener's table
// (the table is the concatenation of the names it holds, so a change of
// one name encodes that name alone).
type dnsNames struct {
	view   any
	ttl    uint32
	names  []Name
	chunks [][]byte // chunks[i] encodes names[i]
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
	if cur != nil && cur.view == view && cur.ttl == ttl && t.dnsAddr == b.DNS.Addr {
		return
	}
	var names []Name
	if view != nil {
		names = b.Names.Names(view)
	}
	d := newDNSNames(view, ttl, names, cur)
	l := d.listener(b.DNS.Addr, nil, nil)
	t.mu.Lock()
	t.dns, t.dnsAddr = d, b.DNS.Addr
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
// address, with only the names of the services it may reach. Streams of
// the same address and selection share one rendering. Under s.mu and
// s.table.mu.RLock.
func (s *stream) dnsVariant(e *entry) sent {
	t := s.table
	key := s.dnsAddr.String() + " " + s.sel.key()
	t.dnsMu.Lock()
	defer t.dnsMu.Unlock()
	if t.dnsVariantsOf != (variantsOf{e.version, t.labelsGen}) {
		t.dnsVariantsOf, t.dnsVariants = variantsOf{e.version, t.labelsGen}, map[string]sent{}
	}
	if v, ok := t.dnsVariants[key]; ok {
		return v
	}
	a := mustAny(t.dns.listener(s.dnsAddr, s.sel, func(k resource.Key) map[string]string { return ownerLabelsOf(t, k) }))
	ver := version(a.Value)
	v := sent{e.name, ver, a, entrySum(e.name, ver)}
	t.dnsVariants[key] = v
	return v
}

// variantsOf is what the renderings of the DNS listener for streams
// that get their own are made from: the version of the table's listener
// and the services' labels (meshTable.labelsGen).
type variantsOf struct {
	base   string
	labels uint64
}

// ownDNS reports whether the stream gets a rendering of the DNS listener
// of its own rather than the table's. Under s.mu and s.table.mu.RLock.
func (s *stream) ownDNS() bool {
	return s.sel != nil || s.dnsAddr != s.table.dnsAddr
}

func ownerLabelsOf(t *meshTable, k resource.Key) map[string]string {
	if o := t.owners[k]; o != nil {
		return o.labels
	}
	return nil
}

// newDNSNames returns what a DNS listener is rendered from: names (in
// any order; the slice is the caller's no more) with the TTL of their
// answers, each encoded, or taken from prev where it did not change. A
// change of a few names in a large mesh costs a map of the names, not a
// sort of them nor their encoding.
func newDNSNames(view any, ttl uint32, names []Name, prev *dnsNames) *dnsNames {
	d := &dnsNames{view: view, ttl: ttl}
	if prev == nil || prev.ttl != ttl || len(prev.names) == 0 {
		slices.SortFunc(names, func(a, b Name) int { return strings.Compare(a.Name, b.Name) })
		d.names, d.chunks = names, make([][]byte, len(names))
		for i, n := range names {
			d.chunks[i] = virtualDomain(n, ttl)
		}
		return d
	}
	index := make(map[string]int, len(names))
	for i, n := range names {
		index[n.Name] = i
	}
	// the names that stay, in prev's order, and then those that came
	kept := make([]bool, len(names))
	d.names, d.chunks = make([]Name, 0, len(names)), make([][]byte, 0, len(names))
	for j, p := range prev.names {
		i, ok := index[p.Name]
		if !ok {
			continue
		}
		kept[i] = true
		n := names[i]
		c := prev.chunks[j]
		if !slices.Equal(p.Addrs, n.Addrs) {
			c = virtualDomain(n, ttl)
		}
		d.names, d.chunks = append(d.names, n), append(d.chunks, c)
	}
	var came []Name
	for i, n := range names {
		if !kept[i] {
			came = append(came, n)
		}
	}
	if len(came) == 0 {
		return d
	}
	slices.SortFunc(came, func(a, b Name) int { return strings.Compare(a.Name, b.Name) })
	merged, chunks := make([]Name, 0, len(names)), make([][]byte, 0, len(names))
	i := 0
	for _, n := range came {
		for i < len(d.names) && d.names[i].Name < n.Name {
			merged, chunks = append(merged, d.names[i]), append(chunks, d.chunks[i])
			i++
		}
		merged, chunks = append(merged, n), append(chunks, virtualDomain(n, ttl))
	}
	d.names, d.chunks = append(merged, d.names[i:]...), append(chunks, d.chunks[i:]...)
	return d
}

// MinAnswerTTL is the shortest TTL Envoy's DNS filter takes for its
// answers (answer_ttl, validated "gte: 30s"): a shorter dns.ttl is
// answered with this on the proxy.
const MinAnswerTTL = 30 * time.Second

// virtualDomain encodes the name n as an element of the table's
// virtual_domains: its A and AAAA addresses, answered with the TTL (at
// least MinAnswerTTL). A name without an address encodes to nothing.
func virtualDomain(n Name, ttl uint32) []byte {
	if len(n.Addrs) == 0 {
		return nil
	}
	list := &dnsv3.DnsTable_AddressList{Address: make([]string, 0, len(n.Addrs))}
	for _, a := range n.Addrs {
		list.Address = append(list.Address, a.Unmap().String())
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(&dnsv3.DnsTable_DnsVirtualDomain{
		Name:      strings.TrimSuffix(n.Name, "."),
		Endpoint:  &dnsv3.DnsTable_DnsEndpoint{EndpointConfig: &dnsv3.DnsTable_DnsEndpoint_AddressList{AddressList: list}},
		AnswerTtl: durationpb.New(max(time.Duration(ttl)*time.Second, MinAnswerTTL)),
	})
	if err != nil {
		panic("xds: marshal a DNS virtual domain: " + err.Error())
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, virtualDomainsField, protowire.BytesType), b)
}

// Field numbers of the messages the DNS filter's config is assembled
// from (dnsFilterConfig); TestDNSFilterConfig_AsProtoEncodesIt checks
// them against the generated code.
const (
	virtualDomainsField  = 2 // DnsTable.virtual_domains
	inlineDNSTableField  = 1 // DnsFilterConfig.ServerContextConfig.inline_dns_table
	statPrefixField      = 1 // DnsFilterConfig.stat_prefix
	serverConfigField    = 2 // DnsFilterConfig.server_config
	caseInsensitiveField = 5 // DnsFilterConfig.case_insensitive
)

// dnsStatPrefix names the DNS filter's statistics in Envoy.
const dnsStatPrefix = "meshnames_dns"

// listener is a UDP listener on addr whose DNS filter answers the names
// of the services sel may reach (labels gives a service's labels; a nil
// sel reaches every service) from its inline table, matched without
// regard to case as the DNS server matches them. A name not in the table
// is left to Envoy's own resolver (the filter's behaviour without
// client_config).
func (d *dnsNames) listener(addr netip.AddrPort, sel *selector, labels func(resource.Key) map[string]string) *listenerv3.Listener {
	chunks := d.chunks
	if sel != nil {
		chunks = make([][]byte, 0, len(d.chunks))
		for i, n := range d.names {
			if sel.reaches(n.Service, labels(n.Service)) {
				chunks = append(chunks, d.chunks[i])
			}
		}
	}
	sa := socketAddress(addr.Addr(), addr.Port())
	sa.GetSocketAddress().Protocol = corev3.SocketAddress_UDP
	return &listenerv3.Listener{
		Name:    DNSListenerName,
		Address: sa,
		ListenerFilters: []*listenerv3.ListenerFilter{{
			Name: "envoy.filters.udp.dns_filter",
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: &anypb.Any{
				TypeUrl: "type.googleapis.com/envoy.extensions.filters.udp.dns_filter.v3.DnsFilterConfig",
				Value:   dnsFilterConfig(chunks),
			}},
		}},
	}
}

// dnsFilterConfig encodes the DnsFilterConfig whose inline table holds
// the encoded virtual domains chunks, as proto's deterministic marshaling
// of the same message would (fields in number order), without encoding
// a table of tens of thousands of names again for every change.
func dnsFilterConfig(chunks [][]byte) []byte {
	table := 0
	for _, c := range chunks {
		table += len(c)
	}
	server := protowire.SizeTag(inlineDNSTableField) + protowire.SizeBytes(table)
	size := protowire.SizeTag(statPrefixField) + protowire.SizeBytes(len(dnsStatPrefix)) +
		protowire.SizeTag(serverConfigField) + protowire.SizeBytes(server) +
		protowire.SizeTag(caseInsensitiveField) + protowire.SizeVarint(1)
	b := make([]byte, 0, size)
	b = protowire.AppendTag(b, statPrefixField, protowire.BytesType)
	b = protowire.AppendString(b, dnsStatPrefix)
	b = protowire.AppendTag(b, serverConfigField, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(server))
	b = protowire.AppendTag(b, inlineDNSTableField, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(table))
	for _, c := range chunks {
		b = append(b, c...)
	}
	b = protowire.AppendTag(b, caseInsensitiveField, protowire.VarintType)
	return protowire.AppendVarint(b, 1)
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
