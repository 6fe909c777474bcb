package e2e

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	dnsfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/dns_filter/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshnames/meshnames/internal/xds"
)

// namesInput has a name of every kind: generated hostnames of a
// MeshService (dual stack: the server gets an IPv6 pool), its
// service-tag name and aliases, those of a MeshService synthesised from
// a Dataplane's kuma.io/service tag, a MeshExternalService's InternalVIP
// value and generated name, and a MeshMultiZoneService's name.
const namesInput = `type: MeshService
name: redis
mesh: default
labels:
  app: redis
spec:
  identities:
  - type: ServiceTag
    value: redis_default_svc_6379
  ports:
  - name: redis
    port: 6379
    appProtocol: tcp
---
type: Dataplane
mesh: default
name: backend-1
networking:
  address: 127.0.0.1
  inbound:
  - port: 9001
    tags:
      kuma.io/service: backend_default_svc_8080
---
type: Dataplane
mesh: default
name: caller
networking:
  address: 127.0.0.1
---
type: MeshExternalService
name: httpbin
mesh: default
spec:
  match:
  - type: InternalVIP
    value: httpbin.ext.local
    port: 80
    protocol: http
  - type: HostnameGenerator
    port: 443
    protocol: tls
  destination:
    type: Regular
    endpoints:
    - address: 192.0.2.10
      port: 443
---
type: MeshMultiZoneService
name: cache
mesh: default
spec:
  selector:
    meshService:
      matchLabels:
        app: redis
`

// TestDNSFilter_SameNamesAsTheDNSServer: a proxy that asks for names
// (node metadata dataplane.dns.port) gets a DNS listener whose table is,
// name for name and address for address, what the control plane's DNS
// server answers over UDP for every name it lists; a new service and a
// deletion reach a delta and a state-of-the-world stream as a new table.
func TestDNSFilter_SameNamesAsTheDNSServer(t *testing.T) {
	p := start(t, "server", "--vip-cidr-v6-mesh-service", "fd00:241::/64")
	p.waitReady(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, stderr, err := run(t, ctx, []byte(namesInput), "apply", "-f", "-", "--server", p.api); err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	wantNames := []string{
		"redis.svc.mesh.local.", "redis_default_svc_6379.mesh.", "redis-default-svc-6379.mesh.", "redis.default.svc.6379.mesh.",
		"backend_default_svc_8080.mesh.", "httpbin.ext.local.", "httpbin.extsvc.mesh.local.", "cache.mzsvc.mesh.local.",
	}
	eventually(t, "every kind of name answered", 30*time.Second, func() bool {
		have := map[string]bool{}
		for _, n := range listing(t, p.api).Names {
			have[n.Name] = true
		}
		for _, n := range wantNames {
			if !have[n] {
				return false
			}
		}
		return true
	})

	node := &corev3.Node{Id: "default.caller", Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
		xds.DNSPortKey: structpb.NewStringValue("15053"),
	}}}
	delta := openDNSStream(t, ctx, p.xds, node, true)
	sotw := openDNSStream(t, ctx, p.xds, node, false)
	check := func(step string) {
		t.Helper()
		// Settle: the proxy's table and the DNS server's listing hold the
		// same names (both follow the same table, a moment apart).
		var table, answers map[string][]string
		eventually(t, step+": the proxy's table and the DNS server agree", 30*time.Second, func() bool {
			names := map[string]bool{}
			for _, n := range listing(t, p.api).Names {
				if len(n.A)+len(n.AAAA) > 0 {
					names[n.Name] = true
				}
			}
			table = delta.latest(t)
			if !cmp.Equal(table, sotw.latest(t)) {
				return false
			}
			for n := range table {
				names[n+"."] = true
			}
			answers = map[string][]string{}
			for n := range names {
				if addrs := resolve(t, p.dns, n); len(addrs) > 0 {
					answers[n[:len(n)-1]] = addrs
				}
			}
			return cmp.Equal(table, answers)
		})
		if d := cmp.Diff(answers, table); d != "" {
			t.Fatalf("%s: the proxy's DNS table differs from the DNS server's answers (-dns +proxy):\n%s", step, d)
		}
	}
	check("initial")
	table := delta.latest(t)
	for _, n := range wantNames {
		if len(table[n[:len(n)-1]]) == 0 {
			t.Errorf("the proxy's table lacks %s: %v", n, table)
		}
	}
	if addrs := table["redis.svc.mesh.local"]; len(addrs) != 2 {
		t.Errorf("redis.svc.mesh.local has %v: want an IPv4 and an IPv6 VIP", addrs)
	}
	if ttl := delta.ttl(t); ttl != 30*time.Second {
		t.Errorf("the proxy answers with a TTL of %s; want 30s, Envoy's least (dns.ttl is 10s)", ttl)
	}

	// A new service, then its deletion, reach both streams.
	if code, err := putService(ctx, p.api, "late", 8080); err != nil || code >= 300 {
		t.Fatalf("PUT late = %d, %v", code, err)
	}
	eventually(t, "the new service's name on the proxy", 30*time.Second, func() bool {
		return len(delta.latest(t)["late.svc.mesh.local"]) > 0 && len(sotw.latest(t)["late.svc.mesh.local"]) > 0
	})
	check("a service created")
	if code, err := deleteService(ctx, p.api, "late"); err != nil || code != http.StatusOK {
		t.Fatalf("DELETE late = %d, %v", code, err)
	}
	eventually(t, "the deleted service's name gone from the proxy", 30*time.Second, func() bool {
		_, d := delta.latest(t)["late.svc.mesh.local"]
		_, s := sotw.latest(t)["late.svc.mesh.local"]
		return !d && !s
	})
	check("a service deleted")
}

// resolve asks the DNS server at addr for the A and AAAA records of name
// over UDP, and returns the addresses, IPv4 first.
func resolve(t *testing.T, addr, name string) []string {
	t.Helper()
	var out []string
	for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
		for _, rr := range query(t, addr, name, qt).Answer {
			switch r := rr.(type) {
			case *dns.A:
				out = append(out, r.A.String())
			case *dns.AAAA:
				out = append(out, r.AAAA.String())
			}
		}
	}
	return out
}

// dnsStream is an LDS stream (delta or state of the world) of a proxy
// that asks for the DNS listener; it ACKs every response and keeps the
// last DNS listener it got.
type dnsStream struct {
	got chan *listenerv3.Listener
	l   *listenerv3.Listener
}

func openDNSStream(t *testing.T, ctx context.Context, addr string, node *corev3.Node, delta bool) *dnsStream {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ads := discovery.NewAggregatedDiscoveryServiceClient(cc)
	s := &dnsStream{got: make(chan *listenerv3.Listener, 64)}
	keep := func(rs []*anypb.Any) {
		for _, a := range rs {
			var l listenerv3.Listener
			if err := a.UnmarshalTo(&l); err == nil && l.GetName() == xds.DNSListenerName {
				s.got <- &l
			}
		}
	}
	if delta {
		ds, err := ads.DeltaAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := ds.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: xds.ListenerURL}); err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				r, err := ds.Recv()
				if err != nil {
					return
				}
				var rs []*anypb.Any
				for _, res := range r.GetResources() {
					rs = append(rs, res.GetResource())
				}
				keep(rs)
				if ds.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()}) != nil {
					return
				}
			}
		}()
		return s
	}
	ss, err := ads.StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ss.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: xds.ListenerURL}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			r, err := ss.Recv()
			if err != nil {
				return
			}
			keep(r.GetResources())
			if ss.Send(&discovery.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce()}) != nil {
				return
			}
		}
	}()
	return s
}

// config is the DNS filter of the last listener received.
func (s *dnsStream) config(t *testing.T) *dnsfilterv3.DnsFilterConfig {
	t.Helper()
	for {
		select {
		case l := <-s.got:
			s.l = l
			continue
		default:
		}
		break
	}
	if s.l == nil {
		return nil
	}
	if err := s.l.ValidateAll(); err != nil {
		t.Fatalf("the DNS listener does not validate: %v", err)
	}
	if sa := s.l.GetAddress().GetSocketAddress(); sa.GetProtocol() != corev3.SocketAddress_UDP || sa.GetAddress() != "127.0.0.1" || sa.GetPortValue() != 15053 {
		t.Fatalf("the DNS listener is on %v; want UDP 127.0.0.1:15053", sa)
	}
	var cfg dnsfilterv3.DnsFilterConfig
	if err := s.l.GetListenerFilters()[0].GetTypedConfig().UnmarshalTo(&cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.ValidateAll(); err != nil {
		t.Fatalf("the DNS filter's config does not validate: %v", err)
	}
	return &cfg
}

// latest is the table of the last DNS listener received: name (without
// the final dot) -> addresses.
func (s *dnsStream) latest(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, d := range s.config(t).GetServerConfig().GetInlineDnsTable().GetVirtualDomains() {
		out[d.GetName()] = slices.Clone(d.GetEndpoint().GetAddressList().GetAddress())
	}
	return out
}

// ttl is the answer TTL of the last table's names (all the same).
func (s *dnsStream) ttl(t *testing.T) time.Duration {
	t.Helper()
	var ttl time.Duration
	for i, d := range s.config(t).GetServerConfig().GetInlineDnsTable().GetVirtualDomains() {
		if got := d.GetAnswerTtl().AsDuration(); i > 0 && got != ttl {
			t.Fatalf("names with TTLs %s and %s", ttl, got)
		} else {
			ttl = got
		}
	}
	return ttl
}
