package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/config"
	"github.com/meshnames/meshnames/internal/dnsserver"
	"github.com/meshnames/meshnames/internal/kubexds"
	"github.com/meshnames/meshnames/internal/leader"
	"github.com/meshnames/meshnames/internal/store"
	kubestore "github.com/meshnames/meshnames/internal/store/kube"
	"github.com/meshnames/meshnames/internal/token"
	"github.com/meshnames/meshnames/internal/xds"
)

// xdsParts are the xDS control plane: the builder of the per-mesh
// resources and the ADS server. Every zone and standalone instance runs
// them, leader or not; a global runs none.
type xdsParts struct {
	builder *xds.Builder
	server  *xds.Server
	// slices follows the EndpointSlices in env kubernetes (nil otherwise).
	slices *kubexds.Slices
}

// run runs the parts until ctx ends.
func (x *xdsParts) run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	if x.slices != nil {
		g.Go(func() error { return x.slices.Run(gctx) })
	}
	g.Go(func() error { return x.builder.Run(gctx) })
	g.Go(func() error { return x.server.Run(gctx) })
	return g.Wait()
}

// newXDS builds the xDS parts, or nil when none are served.
func (s *Server) newXDS(st store.Store, c *cache.Cache, keys *token.Keys, apiTLS *tls.Config, reg prometheus.Registerer, names *dnsserver.Server) *xdsParts {
	xc := s.cfg.XDS
	if s.cfg.Mode == config.ModeGlobal || xc.Addr == "" {
		return nil
	}
	b := xds.NewBuilder(c, s.cfg.Zone)
	b.ExportDefault = s.cfg.Services.ExportDefault
	// Proxies' DNS listeners hold the names the DNS server answers, from
	// its own table (Validate checked the address).
	b.Names = dnsNames{names}
	b.DNS = xds.DNSFilter{All: xc.DNSFilter.Enabled, Addr: netip.MustParseAddrPort(xc.DNSFilter.Addr)}
	loopback := s.cfg.API.Auth.LoopbackAdmin && config.LoopbackAddr(xc.Addr)
	if loopback {
		s.log.Info("xDS listens on loopback: streams from this host without a dataplane token are accepted (api.auth.loopbackAdmin)")
	}
	// The REST server's net/http adds its ALPN protocols to the config it
	// is given when it starts serving; the xDS server gets a copy made
	// now, before either starts, so the two never share one config.
	var xdsTLS *tls.Config
	if apiTLS != nil {
		xdsTLS = apiTLS.Clone()
	}
	auth := &xds.Authenticator{Keys: keys, LoopbackTokenless: loopback, Exists: b.Knows, MeshExists: b.MeshExists}
	var endpoints *kubexds.Slices
	if ks, ok := st.(*kubestore.Store); ok {
		// The MeshServices of Services take their endpoints from the
		// EndpointSlices, and a Pod's proxy connects as the Pod.
		endpoints = kubexds.NewSlices(ks.Client(), s.log.With("component", "xds"))
		b.Slices = endpoints
		auth.Pods = kubexds.NewPods(ks.Client())
	}
	srv := xds.New(xds.Options{
		Addr: xc.Addr, Builder: b, TLS: xdsTLS, MaxStreamsPerPeer: xc.MaxStreamsPerClient, Auth: auth,
		Instance: leader.NewHolderID(xc.Addr), Log: s.log.With("component", "xds"), Registerer: reg,
		Listening: s.XDSListening,
	})
	return &xdsParts{builder: b, server: srv, slices: endpoints}
}

// dnsNames hands the xDS builder the names the DNS server answers: each
// mesh's view of its table, which the server swaps for a new one when a
// name changes.
type dnsNames struct{ srv *dnsserver.Server }

func (d dnsNames) View(mesh string) (any, uint32) {
	t := d.srv.Table()
	if t == nil {
		return nil, 0
	}
	if v := t.Views[mesh]; v != nil {
		return v, t.TTL
	}
	return nil, t.TTL
}

func (dnsNames) Names(view any) []xds.Name {
	v, _ := view.(*dnsserver.View)
	if v == nil {
		return nil
	}
	out := make([]xds.Name, 0, v.Len())
	for n := range v.Addresses() {
		out = append(out, xds.Name(n))
	}
	return out
}

// inspect is the API's view of a proxy: a Dataplane of mesh, or with mesh
// "" a ZoneIngress.
func (x *xdsParts) inspect(mesh, name string) (api.XDSInspection, error) {
	in, err := x.server.Inspect(xds.Proxy{Mesh: mesh, Name: name})
	if errors.Is(err, xds.ErrNoDataplane) {
		return in, fmt.Errorf("%w: %w", store.ErrNotFound, err)
	}
	return in, err
}
