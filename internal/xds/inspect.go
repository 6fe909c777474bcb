package xds

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshnames/meshnames/internal/api"
)

// ErrNoDataplane is returned by Inspect for a Dataplane that does not
// exist, or a ZoneIngress that is not one of this zone.
var ErrNoDataplane = errors.New("no such dataplane")

// Inspect returns what the proxy p gets (every resource of its view:
// outbound and API listeners, clusters, endpoints, secrets with their
// private keys redacted; for a ZoneIngress its listener and the clusters
// of every mesh's exported services) and its streams on this instance.
func (s *Server) Inspect(p Proxy) (api.XDSInspection, error) {
	dp, ok := s.o.Builder.cache.Peek(p.Key())
	if !ok || !s.o.Builder.Knows(p) {
		return api.XDSInspection{}, fmt.Errorf("%w: %s", ErrNoDataplane, p)
	}
	out := api.XDSInspection{Mesh: p.Mesh, Dataplane: p.Name, Instance: s.o.Instance, Streams: s.Streams(p)}
	if p.Ingress() {
		out.Dataplane, out.ZoneIngress = "", p.Name
	}

	sel := selectorOf(dp)
	view := [numTypes][]*entry{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t, err := s.o.Builder.acquire(ctx, p.Mesh)
	if err != nil {
		return out, fmt.Errorf("the xDS table of mesh %s: %w", p.Mesh, err)
	}
	defer s.o.Builder.release(t)
	dns := s.dnsAddrOf(p)
	if dns.IsValid() {
		done, err := s.o.Builder.useDNS(ctx, t, p.Mesh)
		if err != nil {
			return out, fmt.Errorf("the DNS listener of mesh %s: %w", p.Mesh, err)
		}
		defer done()
	}
	{
		t.mu.RLock()
		for typ := range numTypes {
			for _, e := range t.res[typ] {
				if isDNS(e.owner) {
					if dns.IsValid() {
						// as a stream of the proxy gets it
						v := (&stream{table: t, sel: sel, dnsAddr: dns}).pick(e)
						view[typ] = append(view[typ], &entry{name: v.name, version: v.version, any: v.any})
					}
					continue
				}
				if o := t.owners[e.owner]; o != nil && sel.selects(e, o.labels) {
					view[typ] = append(view[typ], e)
					if e.note != "" {
						out.Notes = append(out.Notes, e.note)
					}
				}
			}
			slices.SortFunc(view[typ], func(a, b *entry) int { return compareStrings(a.name, b.name) })
		}
		for k, o := range t.owners {
			for _, n := range o.notes {
				if sel.selects(&entry{owner: k, port: n.port}, o.labels) {
					out.Notes = append(out.Notes, n.text)
				}
			}
		}
		t.mu.RUnlock()
	}
	slices.Sort(out.Notes)
	dump := &adminv3.ConfigDump{}
	clusters := &adminv3.ClustersConfigDump{}
	for _, e := range view[ClusterType] {
		clusters.DynamicActiveClusters = append(clusters.DynamicActiveClusters, &adminv3.ClustersConfigDump_DynamicCluster{VersionInfo: e.version, Cluster: e.any})
	}
	endpoints := &adminv3.EndpointsConfigDump{}
	for _, e := range view[EndpointType] {
		endpoints.DynamicEndpointConfigs = append(endpoints.DynamicEndpointConfigs, &adminv3.EndpointsConfigDump_DynamicEndpointConfig{VersionInfo: e.version, EndpointConfig: e.any})
	}
	listeners := &adminv3.ListenersConfigDump{}
	for _, e := range view[ListenerType] {
		listeners.DynamicListeners = append(listeners.DynamicListeners, &adminv3.ListenersConfigDump_DynamicListener{
			Name: e.name, ActiveState: &adminv3.ListenersConfigDump_DynamicListenerState{VersionInfo: e.version, Listener: e.any},
		})
	}
	secrets := &adminv3.SecretsConfigDump{}
	for _, e := range view[SecretType] {
		secrets.DynamicActiveSecrets = append(secrets.DynamicActiveSecrets, &adminv3.SecretsConfigDump_DynamicSecret{
			Name: e.name, VersionInfo: e.version, Secret: redacted(e.any),
		})
	}
	for _, m := range []proto.Message{clusters, endpoints, listeners, secrets} {
		a, err := anypb.New(m)
		if err != nil {
			return out, err
		}
		dump.Configs = append(dump.Configs, a)
	}
	b, err := protojson.MarshalOptions{Multiline: false}.Marshal(dump)
	if err != nil {
		return out, err
	}
	out.Config = b
	return out, nil
}

// dnsAddrOf is where the proxy p gets the DNS listener: where a stream
// of it connected here gets it, else where every Envoy gets it
// (xds.dnsFilter.enabled); the zero address for none.
func (s *Server) dnsAddrOf(p Proxy) netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	connected := false
	for st := range s.streams[p] {
		if st.dnsAddr.IsValid() {
			return st.dnsAddr
		}
		connected = connected || !st.proxyless
	}
	b := s.o.Builder
	if b.Names == nil || !b.DNS.All || p.Ingress() || (len(s.streams[p]) > 0 && !connected) {
		return netip.AddrPort{}
	}
	return b.DNS.Addr
}

// state is the inspection of a stream.
func (s *stream) state() api.XDSStream {
	proto := "sotw"
	if s.delta {
		proto = "delta"
	}
	out := api.XDSStream{Protocol: proto, Peer: s.peer, ConnectedAt: s.since, Types: []api.XDSTypeState{}}
	s.mu.Lock()
	defer s.mu.Unlock()
	for typ, st := range s.types {
		if st == nil {
			continue
		}
		ts := api.XDSTypeState{
			Type: Type(typ).String(), Wildcard: st.wildcard, SentVersion: st.version, SentAt: st.sentAt,
			Responses: st.sentCount, Pending: st.pending, AckedVersion: st.acked, AckedAt: st.ackedAt,
		}
		if st.nonce > 0 {
			ts.SentNonce = strconv.Itoa(st.nonce)
		}
		for n := range st.names {
			ts.Names = append(ts.Names, n)
		}
		slices.Sort(ts.Names)
		if n := st.nack; n != nil {
			ts.Nack = &api.XDSNack{Version: n.Version, Nonce: n.Nonce, Message: n.Message, At: n.At}
		}
		out.Types = append(out.Types, ts)
	}
	return out
}

// redacted returns a Secret with its private key replaced by
// "[redacted]", as Envoy's own config dump shows it: an inspection is
// read by operators and tools, and a key must not leave the proxy's
// configuration.
func redacted(a *anypb.Any) *anypb.Any {
	var sec tlsv3.Secret
	if err := a.UnmarshalTo(&sec); err != nil {
		return nil
	}
	if c := sec.GetTlsCertificate(); c != nil && c.PrivateKey != nil {
		c.PrivateKey = &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "[redacted]"}}
	}
	return mustAny(&sec)
}
