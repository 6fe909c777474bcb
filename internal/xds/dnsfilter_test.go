package xds

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	dnsv3 "github.com/envoyproxy/go-control-plane/envoy/data/dns/v3"
	dnsfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/dns_filter/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshnames/meshnames/internal/dnsserver"
	"github.com/meshnames/meshnames/internal/resource"
)

// dnsCase is the input section of a testdata/dnsfilter file.
type dnsCase struct {
	Addr  string `yaml:"addr"`
	TTL   uint32 `yaml:"ttl"`
	Names []struct {
		Name    string   `yaml:"name"`
		Service string   `yaml:"service"` // Kind/name
		Addrs   []string `yaml:"addrs"`
	} `yaml:"names"`
	// Labels of services, by Kind/name, and the proxy's
	// reachableBackends refs (none: it reaches every service).
	Labels            map[string]map[string]string `yaml:"labels"`
	ReachableBackends []resource.BackendRef        `yaml:"reachableBackends"`
}

func serviceKey(t *testing.T, s string) resource.Key {
	t.Helper()
	kind, name, ok := strings.Cut(s, "/")
	if !ok {
		t.Fatalf("service %q: want Kind/name", s)
	}
	return resource.Key{Kind: resource.Kind(kind), Mesh: "default", Name: name}
}

// TestDNSListener_Golden renders each testdata/dnsfilter/*.txtar's names
// into the DNS listener a proxy gets (with the names of the services its
// reachableBackends select) and compares it, validated, with the file.
func TestDNSListener_Golden(t *testing.T) {
	goldenRender(t, "testdata/dnsfilter", "names.yaml", func(t *testing.T, input []byte) []Resource {
		var c dnsCase
		decodeStrict(t, "names.yaml", input, &c)
		var names []Name
		for _, n := range c.Names {
			nm := Name{Name: n.Name, Service: serviceKey(t, n.Service)}
			for _, a := range n.Addrs {
				nm.Addrs = append(nm.Addrs, netip.MustParseAddr(a))
			}
			names = append(names, nm)
		}
		var sel *selector
		if c.ReachableBackends != nil {
			sel = &selector{refs: c.ReachableBackends}
		}
		labels := map[resource.Key]map[string]string{}
		for s, l := range c.Labels {
			labels[serviceKey(t, s)] = l
		}
		l := newDNSNames(nil, c.TTL, names, nil).listener(netip.MustParseAddrPort(c.Addr), sel, func(k resource.Key) map[string]string { return labels[k] })
		return []Resource{{Type: ListenerType, Name: DNSListenerName, Msg: l}}
	})
}

// fakeNames is a NameSource whose names a test sets.
type fakeNames struct {
	mu   sync.Mutex
	view *[]Name
	ttl  uint32
}

func (f *fakeNames) View(string) (any, uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.view, f.ttl
}

func (f *fakeNames) Names(view any) []Name { return slices.Clone(*view.(*[]Name)) }

// set replaces the names and tells b.
func (f *fakeNames) set(b *Builder, names ...Name) {
	f.mu.Lock()
	f.view = &names
	f.mu.Unlock()
	b.NamesChanged()
}

func msName(name, svc string, addrs ...string) Name {
	n := Name{Name: name, Service: resource.Key{Kind: resource.MeshService, Mesh: "default", Name: svc}}
	for _, a := range addrs {
		n.Addrs = append(n.Addrs, netip.MustParseAddr(a))
	}
	return n
}

// dnsEnv is an env whose builder takes its names from a fakeNames.
func dnsEnv(t *testing.T, all bool, names ...Name) (*env, *fakeNames) {
	t.Helper()
	f := &fakeNames{ttl: 10}
	f.view = &names
	e := newEnvWith(t, func(b *Builder) {
		b.Names = f
		b.DNS.All = all
	})
	return e, f
}

// dnsNode is a node that asks for the DNS listener on port ("" asks
// nothing).
func dnsNode(id string, port *structpb.Value) *corev3.Node {
	n := &corev3.Node{Id: id}
	if port != nil {
		n.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{DNSPortKey: port}}
	}
	return n
}

// tableOf reads the DNS listener l: its address and name -> addresses.
func tableOf(t *testing.T, l *listenerv3.Listener) (string, map[string][]string) {
	t.Helper()
	if l == nil {
		t.Fatal("no DNS listener")
	}
	validateDeep(t, l.GetName(), l)
	sa := l.GetAddress().GetSocketAddress()
	if sa.GetProtocol() != corev3.SocketAddress_UDP {
		t.Errorf("the DNS listener's protocol is %s, want UDP", sa.GetProtocol())
	}
	var cfg dnsfilterv3.DnsFilterConfig
	if err := l.GetListenerFilters()[0].GetTypedConfig().UnmarshalTo(&cfg); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, d := range cfg.GetServerConfig().GetInlineDnsTable().GetVirtualDomains() {
		out[d.GetName()] = d.GetEndpoint().GetAddressList().GetAddress()
	}
	return netip.AddrPortFrom(netip.MustParseAddr(sa.GetAddress()), uint16(sa.GetPortValue())).String(), out
}

// waitDNS applies c's responses until its DNS listener holds want, and
// returns the listener's address.
func waitDNS(t *testing.T, c *deltaClient, want map[string][]string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if l := c.listeners[DNSListenerName]; l != nil {
			if _, ok := c.state[ListenerURL][DNSListenerName]; ok {
				addr, got := tableOf(t, l)
				if cmp.Equal(got, want) {
					return addr
				}
				if time.Now().After(deadline) {
					t.Fatalf("the DNS listener holds (-want +got):\n%s", cmp.Diff(want, got))
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no DNS listener within 10s; listeners %v", c.state[ListenerURL])
		}
		c.next(100 * time.Millisecond)
	}
}

// TestDNSListener_OffByDefault: an Envoy that does not ask gets no DNS
// listener, nor hears of it when the names change.
func TestDNSListener_OffByDefault(t *testing.T) {
	e, f := dnsEnv(t, false, msName("web.svc.mesh.local.", "web", "241.0.0.1"))
	e.dataplane("client", "client", 9999)
	e.dataplane("other", "other", 9998)
	off := newDeltaClient(t, e, "default.client", nil)
	off.settle()
	if _, ok := off.state[ListenerURL][DNSListenerName]; ok {
		t.Fatal("a proxy that did not ask got the DNS listener")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	on := newDeltaClientNode(t, ctx, e, dnsNode("default.other", structpb.NewStringValue("15053")), nil)
	waitDNS(t, on, map[string][]string{"web.svc.mesh.local": {"241.0.0.1"}})

	// The names change (the proxy that asks gets them), then a service
	// comes: the next response the other proxy gets is that service's,
	// with nothing about the DNS listener before it.
	f.set(e.b, msName("api.svc.mesh.local.", "api", "241.0.0.2"))
	waitDNS(t, on, map[string][]string{"api.svc.mesh.local": {"241.0.0.2"}})
	e.service("api", "241.0.0.2", nil, grpcPort("grpc"))
	for {
		r := off.next(10 * time.Second)
		if r == nil {
			t.Fatal("no response for the new service")
		}
		if slices.Contains(r.GetRemovedResources(), DNSListenerName) {
			t.Fatal("a proxy without the DNS listener was told it was removed")
		}
		for _, res := range r.GetResources() {
			if res.GetName() == DNSListenerName {
				t.Fatal("a proxy without the DNS listener got it")
			}
		}
		if _, ok := off.state[ClusterURL]["api_msvc_8080"]; ok {
			break
		}
	}
}

// TestDNSListener_NodeMetadata: dataplane.dns.port, as a string or a
// number, gives the proxy the listener on that port; a value that is no
// port refuses the stream with a message naming the key.
func TestDNSListener_NodeMetadata(t *testing.T) {
	e, _ := dnsEnv(t, false, msName("web.svc.mesh.local.", "web", "241.0.0.1", "fd00::1"))
	e.dataplane("client", "client", 9999)
	for _, tc := range []struct {
		port *structpb.Value
		addr string
	}{
		{structpb.NewStringValue("15053"), "127.0.0.1:15053"},
		{structpb.NewNumberValue(15099), "127.0.0.1:15099"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		c := newDeltaClientNode(t, ctx, e, dnsNode("default.client", tc.port), nil)
		if addr := waitDNS(t, c, map[string][]string{"web.svc.mesh.local": {"241.0.0.1", "fd00::1"}}); addr != tc.addr {
			t.Errorf("dataplane.dns.port %v: the listener is on %s, want %s", tc.port, addr, tc.addr)
		}
		cancel()
	}
	for _, bad := range []*structpb.Value{
		structpb.NewStringValue("dns"), structpb.NewStringValue("0"), structpb.NewStringValue("70000"),
		structpb.NewNumberValue(15053.5), structpb.NewBoolValue(true),
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := dialADS(t, e.addr).StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(&discovery.DiscoveryRequest{Node: dnsNode("default.client", bad), TypeUrl: ListenerURL}); err != nil {
			t.Fatal(err)
		}
		_, err = s.Recv()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `node.metadata["dataplane.dns.port"]`) {
			t.Errorf("dataplane.dns.port %v: the stream ended with %v; want InvalidArgument naming the key", bad, err)
		}
		cancel()
	}
}

// TestDNSListener_EnabledForEveryEnvoy: with xds.dnsFilter.enabled every
// Envoy gets the listener on the configured address, one that asks for
// a port of its own gets that, and a proxyless gRPC client gets none.
func TestDNSListener_EnabledForEveryEnvoy(t *testing.T) {
	e, _ := dnsEnv(t, true, msName("web.svc.mesh.local.", "web", "241.0.0.1"))
	e.dataplane("client", "client", 9999)
	e.dataplane("other", "other", 9998)
	c := newDeltaClient(t, e, "default.client", nil)
	if addr := waitDNS(t, c, map[string][]string{"web.svc.mesh.local": {"241.0.0.1"}}); addr != DefaultDNSAddr {
		t.Errorf("the listener is on %s, want %s", addr, DefaultDNSAddr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	own := newDeltaClientNode(t, ctx, e, dnsNode("default.other", structpb.NewStringValue("5353")), nil)
	if addr := waitDNS(t, own, map[string][]string{"web.svc.mesh.local": {"241.0.0.1"}}); addr != "127.0.0.1:5353" {
		t.Errorf("the listener of a proxy asking for port 5353 is on %s", addr)
	}
	grpcNode := &corev3.Node{Id: "default.client", UserAgentName: "gRPC Go"}
	pl := newDeltaClientNode(t, ctx, e, grpcNode, nil)
	pl.settle()
	if _, ok := pl.state[ListenerURL][DNSListenerName]; ok {
		t.Error("a proxyless gRPC client got the DNS listener")
	}
	// Inspection shows the listener the proxy gets.
	in, err := e.srv.Inspect(Proxy{Mesh: "default", Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(in.Config), `"name":"meshnames:dns"`) || !strings.Contains(string(in.Config), `"portValue":5353`) {
		t.Errorf("the inspection of the proxy does not show its DNS listener on 5353:\n%s", in.Config)
	}
}

// TestDNSListener_ReachableBackends: a proxy that names the services it
// calls gets only their names; a label ref follows the services' labels.
func TestDNSListener_ReachableBackends(t *testing.T) {
	e, _ := dnsEnv(t, false,
		msName("web.svc.mesh.local.", "web", "241.0.0.1"), msName("web.mesh.", "web", "241.0.0.1"),
		msName("redis.svc.mesh.local.", "redis", "241.0.0.2"))
	e.service("web", "241.0.0.1", nil, grpcPort("grpc"))
	e.service("redis", "241.0.0.2", nil, grpcPort("grpc"))
	e.create(&resource.Object{Kind: resource.Dataplane, Mesh: "default", Name: "client", Spec: &resource.DataplaneSpec{Networking: resource.DataplaneNetworking{
		Address: "127.0.0.1",
		TransparentProxying: &resource.TransparentProxying{ReachableBackends: &resource.ReachableBackends{Refs: []resource.BackendRef{
			{Kind: resource.MeshService, Name: "web", Port: 8080},
			{Kind: resource.MeshService, Labels: map[string]string{"team": "storage"}},
		}}},
	}}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newDeltaClientNode(t, ctx, e, dnsNode("default.client", structpb.NewStringValue("15053")), nil)
	waitDNS(t, c, map[string][]string{"web.svc.mesh.local": {"241.0.0.1"}, "web.mesh": {"241.0.0.1"}})
	// A second stream of the same selection shares the rendering.
	c2 := newDeltaClientNode(t, ctx, e, dnsNode("default.client", structpb.NewStringValue("15053")), nil)
	waitDNS(t, c2, map[string][]string{"web.svc.mesh.local": {"241.0.0.1"}, "web.mesh": {"241.0.0.1"}})
	e.b.mu.Lock()
	tbl := e.b.meshes["default"]
	e.b.mu.Unlock()
	tbl.dnsMu.Lock()
	if n := len(tbl.dnsVariants); n != 1 {
		t.Errorf("two streams of one selection made %d renderings of the DNS listener, want 1", n)
	}
	tbl.dnsMu.Unlock()

	e.update(resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "redis"}, func(o *resource.Object) {
		o.Labels = map[string]string{"team": "storage"}
	})
	waitDNS(t, c, map[string][]string{"web.svc.mesh.local": {"241.0.0.1"}, "web.mesh": {"241.0.0.1"}, "redis.svc.mesh.local": {"241.0.0.2"}})
}

// TestDNSListener_PushedOnChange: a change of the names reaches a delta
// and a state-of-the-world client at once, a name that goes included.
func TestDNSListener_PushedOnChange(t *testing.T) {
	e, f := dnsEnv(t, false, msName("web.svc.mesh.local.", "web", "241.0.0.1"))
	e.dataplane("client", "client", 9999)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node := dnsNode("default.client", structpb.NewStringValue("15053"))
	delta := newDeltaClientNode(t, ctx, e, node, nil)
	sotw := newSotwListeners(t, ctx, e, node)
	want := map[string][]string{"web.svc.mesh.local": {"241.0.0.1"}}
	waitDNS(t, delta, want)
	sotw.wait(t, want)

	f.set(e.b, msName("web.svc.mesh.local.", "web", "241.0.0.1"), msName("api.svc.mesh.local.", "api", "241.0.0.2", "fd00::2"))
	want = map[string][]string{"web.svc.mesh.local": {"241.0.0.1"}, "api.svc.mesh.local": {"241.0.0.2", "fd00::2"}}
	waitDNS(t, delta, want)
	sotw.wait(t, want)

	f.set(e.b, msName("api.svc.mesh.local.", "api", "241.0.0.2", "fd00::2"))
	want = map[string][]string{"api.svc.mesh.local": {"241.0.0.2", "fd00::2"}}
	waitDNS(t, delta, want)
	sotw.wait(t, want)
}

// sotwListeners is a state-of-the-world LDS client that ACKs what it
// gets.
type sotwListeners struct {
	s   discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	got chan *discovery.DiscoveryResponse
}

func newSotwListeners(t *testing.T, ctx context.Context, e *env, node *corev3.Node) *sotwListeners {
	t.Helper()
	s, err := dialADS(t, e.addr).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: ListenerURL}); err != nil {
		t.Fatal(err)
	}
	c := &sotwListeners{s: s, got: make(chan *discovery.DiscoveryResponse, 16)}
	go func() {
		defer close(c.got)
		for {
			r, err := s.Recv()
			if err != nil {
				return
			}
			if s.Send(&discovery.DiscoveryRequest{TypeUrl: ListenerURL, VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce()}) != nil {
				return
			}
			c.got <- r
		}
	}()
	return c
}

// wait reads responses until one holds a DNS listener whose table is want.
func (c *sotwListeners) wait(t *testing.T, want map[string][]string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	var last map[string][]string
	for {
		select {
		case r, ok := <-c.got:
			if !ok {
				t.Fatal("the state-of-the-world stream ended")
			}
			for _, a := range r.GetResources() {
				var l listenerv3.Listener
				if err := a.UnmarshalTo(&l); err != nil {
					t.Fatal(err)
				}
				if l.GetName() == DNSListenerName {
					if _, last = tableOf(t, &l); cmp.Equal(last, want) {
						return
					}
				}
			}
		case <-timeout:
			t.Fatalf("the state-of-the-world client's DNS listener holds (-want +got):\n%s", cmp.Diff(want, last))
		}
	}
}

// TestDNSFilterConfig_AsProtoEncodesIt: the filter config assembled
// from encoded names is, byte for byte, proto's deterministic encoding
// of the same message (so versions are content hashes like any other
// resource's), whether each name was encoded now or kept from a table
// before.
func TestDNSFilterConfig_AsProtoEncodesIt(t *testing.T) {
	names := []Name{
		msName("web.svc.mesh.local.", "web", "241.0.0.1", "fd00::1"),
		msName("api.svc.mesh.local.", "api", "241.0.0.2"),
		msName("db.mesh.", "db", "241.0.0.3"),
	}
	for _, tc := range []struct {
		name string
		d    *dnsNames
		want []string // the names, in order
	}{
		{"none", newDNSNames(nil, 10, nil, nil), nil},
		{"fresh", newDNSNames(nil, 60, slices.Clone(names), nil), []string{"api.svc.mesh.local.", "db.mesh.", "web.svc.mesh.local."}},
		// api changes address, db goes, cache and zz come; web is kept
		{"from-before", newDNSNames(nil, 60, []Name{names[0], msName("zz.mesh.", "zz", "241.0.0.5"), msName("api.svc.mesh.local.", "api", "241.0.0.9"), msName("cache.mesh.", "cache", "241.0.0.4")},
			newDNSNames(nil, 60, slices.Clone(names), nil)), []string{"api.svc.mesh.local.", "cache.mesh.", "web.svc.mesh.local.", "zz.mesh."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, n := range tc.d.names {
				got = append(got, n.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("names %v, want %v", got, tc.want)
			}
			want := &dnsv3.DnsTable{}
			for _, n := range tc.d.names {
				var addrs []string
				for _, a := range n.Addrs {
					addrs = append(addrs, a.String())
				}
				want.VirtualDomains = append(want.VirtualDomains, &dnsv3.DnsTable_DnsVirtualDomain{
					Name:      strings.TrimSuffix(n.Name, "."),
					Endpoint:  &dnsv3.DnsTable_DnsEndpoint{EndpointConfig: &dnsv3.DnsTable_DnsEndpoint_AddressList{AddressList: &dnsv3.DnsTable_AddressList{Address: addrs}}},
					AnswerTtl: durationpb.New(max(time.Duration(tc.d.ttl)*time.Second, MinAnswerTTL)),
				})
			}
			cfg := &dnsfilterv3.DnsFilterConfig{
				StatPrefix:      dnsStatPrefix,
				ServerConfig:    &dnsfilterv3.DnsFilterConfig_ServerContextConfig{ConfigSource: &dnsfilterv3.DnsFilterConfig_ServerContextConfig_InlineDnsTable{InlineDnsTable: want}},
				CaseInsensitive: true,
			}
			wantBytes, err := proto.MarshalOptions{Deterministic: true}.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := dnsFilterConfig(tc.d.chunks); !bytes.Equal(got, wantBytes) {
				t.Errorf("assembled config:\n%x\nproto encodes:\n%x", got, wantBytes)
			}
		})
	}
}

// BenchmarkDNSListener renders and marshals the DNS listener of a mesh
// of 10,000 services with a hostname and three service-tag names each:
// in full (a mesh's first proxy), after one name changed (what each
// change costs the builder), and for a proxy whose reachableBackends
// select one service in ten by label.
func BenchmarkDNSListener(b *testing.B) {
	var names []Name
	labels := map[resource.Key]map[string]string{}
	for i := range 10000 {
		k := resource.Key{Kind: resource.MeshService, Mesh: "default", Name: fmt.Sprintf("svc-%05d", i)}
		labels[k] = map[string]string{"team": strconv.Itoa(i % 10)}
		vip := []netip.Addr{netip.AddrFrom4([4]byte{241, 0, byte(i >> 8), byte(i)})}
		for _, n := range []string{k.Name + ".svc.mesh.local.", "svc_%05d_default_svc_80.mesh.", "svc-%05d-default-svc-80.mesh.", "svc.%05d.default.svc.80.mesh."} {
			if strings.Contains(n, "%") {
				n = fmt.Sprintf(n, i)
			}
			names = append(names, Name{Name: n, Service: k, Addrs: vip})
		}
	}
	addr := netip.MustParseAddrPort(DefaultDNSAddr)
	report := func(b *testing.B, l *listenerv3.Listener) {
		a := mustAny(l)
		_ = version(a.Value)
		b.ReportMetric(float64(len(a.Value)), "bytes")
	}
	b.Run("full", func(b *testing.B) {
		defer cpuPerOp(b)()
		for b.Loop() {
			report(b, newDNSNames(nil, 10, slices.Clone(names), nil).listener(addr, nil, nil))
		}
	})
	b.Run("one-changed", func(b *testing.B) {
		prev := newDNSNames(nil, 10, slices.Clone(names), nil)
		next := slices.Clone(names)
		next[len(next)/2].Addrs = []netip.Addr{netip.MustParseAddr("241.1.0.1")}
		defer cpuPerOp(b)()
		for b.Loop() {
			report(b, newDNSNames(nil, 10, slices.Clone(next), prev).listener(addr, nil, nil))
		}
	})
	b.Run("from-dns-view", func(b *testing.B) {
		// The same names in a DNS server's view: what the builder does
		// when a name changed, from reading the view to the encoded
		// listener and its version.
		var objs []*resource.Object
		for i := range 10000 {
			st := &resource.ServiceStatus{VIPs: []resource.VIP{{IP: netip.AddrFrom4([4]byte{241, 0, byte(i >> 8), byte(i)}).String(), Type: resource.VIPKuma}}}
			for j, n := range []string{"svc-%05d.svc.mesh.local", "svc_%05d_default_svc_80.mesh", "svc-%05d-default-svc-80.mesh", "svc.%05d.default.svc.80.mesh"} {
				origin := []string{resource.OriginHostnameGenerator, resource.OriginServiceTag, resource.OriginServiceTagAlias, resource.OriginServiceTagAlias}[j]
				st.Addresses = append(st.Addresses, resource.Address{Hostname: fmt.Sprintf(n, i), Status: resource.AddressAvailable, Origin: resource.AddressOrigin{Kind: origin}})
			}
			objs = append(objs, &resource.Object{Kind: resource.MeshService, Mesh: "default", Name: fmt.Sprintf("svc-%05d", i), Spec: &resource.MeshServiceSpec{}, Status: st})
		}
		v := dnsserver.Build(objs, dnsserver.TableOptions{TTL: 10, Domains: []string{"mesh.local", "mesh"}}).Views["default"]
		read := func() []Name {
			out := make([]Name, 0, v.Len())
			for n := range v.Addresses() {
				out = append(out, Name(n))
			}
			return out
		}
		if got := len(read()); got != len(names) {
			b.Fatalf("the view answers %d names, want %d", got, len(names))
		}
		prev := newDNSNames(nil, 10, read(), nil)
		defer cpuPerOp(b)()
		for b.Loop() {
			report(b, newDNSNames(nil, 10, read(), prev).listener(addr, nil, nil))
		}
	})
	b.Run("selected", func(b *testing.B) {
		d := newDNSNames(nil, 10, slices.Clone(names), nil)
		sel := &selector{refs: []resource.BackendRef{{Kind: resource.MeshService, Labels: map[string]string{"team": "3"}}}}
		defer cpuPerOp(b)()
		for b.Loop() {
			report(b, d.listener(addr, sel, func(k resource.Key) map[string]string { return labels[k] }))
		}
	})
}

// FuzzParseDNSPort: any value of dataplane.dns.port is a port from 1 to
// 65535 that reads back as the value, or an error that names the key.
func FuzzParseDNSPort(f *testing.F) {
	for _, s := range []string{"15053", "0", "65535", "65536", "-1", " 53 ", "53.0", "dns", "", "0x35", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parseDNSPort(structpb.NewStringValue(s))
		if err != nil {
			if !strings.Contains(err.Error(), `node.metadata["dataplane.dns.port"]`) || p != 0 {
				t.Fatalf("%q: port %d, error %v", s, p, err)
			}
			return
		}
		if n, err := strconv.Atoi(strings.TrimSpace(s)); err != nil || n != int(p) || p == 0 {
			t.Fatalf("%q read as port %d", s, p)
		}
	})
}
