package xds

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Options configures a Server.
type Options struct {
	// Addr is where ADS is served (host:port).
	Addr    string
	Builder *Builder
	Auth    *Authenticator
	// TLS, when set, serves ADS over TLS (required off loopback).
	TLS *tls.Config
	// Instance names this control plane instance in inspections.
	Instance string
	// MaxStreamsPerPeer bounds the streams one client address may hold
	// open (0: 1024).
	MaxStreamsPerPeer int
	Log               *slog.Logger
	Registerer        prometheus.Registerer
	// Listening, when set, is called with the address once it accepts
	// connections.
	Listening func(addr string)
}

// Server serves ADS from the Builder's tables.
type Server struct {
	o      Options
	nextID atomic.Uint64

	mu      sync.Mutex
	streams map[Proxy]map[*stream]struct{}
	perPeer map[string]int

	m metrics
}

type metrics struct {
	streams  *prometheus.GaugeVec
	pushes   *prometheus.CounterVec
	ackDelay *prometheus.HistogramVec
	nacks    *prometheus.CounterVec
	refused  *prometheus.CounterVec
	// the series of each type, looked up once: every push and ACK of
	// every proxy counts
	pushesOf   [numTypes]prometheus.Counter
	ackDelayOf [numTypes]prometheus.Observer
}

// New returns a server; it does no I/O.
func New(o Options) *Server {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.MaxStreamsPerPeer == 0 {
		o.MaxStreamsPerPeer = 1024
	}
	s := &Server{o: o, streams: map[Proxy]map[*stream]struct{}{}, perPeer: map[string]int{}}
	s.m = metrics{
		streams: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meshnames_xds_streams",
			Help: "ADS streams of connected proxies on this instance, by protocol (sotw, delta).",
		}, []string{"protocol"}),
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshnames_xds_pushes_total",
			Help: "xDS responses sent to proxies, by type (CDS, EDS, LDS, SDS).",
		}, []string{"type"}),
		ackDelay: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "meshnames_xds_push_ack_seconds",
			Help:    "Time from sending an xDS response to the proxy's ACK or NACK of it, by type.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"type"}),
		nacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshnames_xds_nacks_total",
			Help: "xDS responses a proxy rejected (NACK), by type.",
		}, []string{"type"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshnames_xds_refused_streams_total",
			Help: "ADS streams refused, by reason (missing, expired, revoked, unknown_dataplane, other_dataplane, ...).",
		}, []string{"reason"}),
	}
	for typ := range numTypes {
		s.m.pushesOf[typ] = s.m.pushes.WithLabelValues(typ.String())
		s.m.ackDelayOf[typ] = s.m.ackDelay.WithLabelValues(typ.String())
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(s.m.streams, s.m.pushes, s.m.ackDelay, s.m.nacks, s.m.refused)
	}
	return s
}

// Run serves ADS until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.o.Addr)
	if err != nil {
		return fmt.Errorf("xds.addr: cannot listen on %s: %w", s.o.Addr, err)
	}
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(4 << 20),
		// A static window: with gRPC's dynamic one the server pings the
		// client after every request it receives that starts a bandwidth
		// sample, which for a proxy is every ACK: a ping and its answer
		// more, per response, per proxy. Requests are small.
		grpc.StaticStreamWindowSize(1 << 20), grpc.StaticConnWindowSize(1 << 20),
		// responses are encoded in wire.go and written as they are
		grpc.ForceServerCodecV2(newCodec()),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
	if s.o.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.o.TLS)))
	}
	g := grpc.NewServer(opts...)
	discovery.RegisterAggregatedDiscoveryServiceServer(g, (*ads)(s))
	scheme := "grpc"
	if s.o.TLS != nil {
		scheme = "grpcs"
	}
	s.o.Log.Info("serving xDS (ADS)", "addr", scheme+"://"+ln.Addr().String())
	if s.o.Listening != nil {
		s.o.Listening(ln.Addr().String())
	}
	done := make(chan error, 1)
	go func() { done <- g.Serve(ln) }()
	select {
	case <-ctx.Done():
		stopped := make(chan struct{})
		go func() { g.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(2 * time.Second):
			g.Stop() // streams last forever: do not wait for them
		}
		return nil
	case err := <-done:
		return err
	}
}

// ads implements the gRPC service.
type ads Server

func (a *ads) StreamAggregatedResources(gs grpc.BidiStreamingServer[discovery.DiscoveryRequest, discovery.DiscoveryResponse]) error {
	return (*Server)(a).serve(gs.Context(), false, sotwConn{gs})
}

func (a *ads) DeltaAggregatedResources(gs grpc.BidiStreamingServer[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse]) error {
	return (*Server)(a).serve(gs.Context(), true, deltaConn{gs})
}

// request is what the stream loop needs of either protocol's request.
type request struct {
	node    *corev3.Node
	typeURL string
	nonce   string
	errMsg  string
	sub     []string
	unsub   []string
	initial map[string]string
}

// conn hides the protocol of a stream from its loop.
type conn interface {
	recv() (*request, error)
	send(o *out) error
}

type sotwConn struct {
	gs grpc.BidiStreamingServer[discovery.DiscoveryRequest, discovery.DiscoveryResponse]
}

func (c sotwConn) recv() (*request, error) {
	r, err := c.gs.Recv()
	if err != nil {
		return nil, err
	}
	return &request{node: r.GetNode(), typeURL: r.GetTypeUrl(), nonce: r.GetResponseNonce(), errMsg: detail(r.GetErrorDetail()), sub: r.GetResourceNames()}, nil
}

func (c sotwConn) send(o *out) error {
	return c.gs.SendMsg(encode(o, false)) // a DiscoveryResponse (wire.go)
}

type deltaConn struct {
	gs grpc.BidiStreamingServer[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse]
}

func (c deltaConn) recv() (*request, error) {
	r, err := c.gs.Recv()
	if err != nil {
		return nil, err
	}
	return &request{node: r.GetNode(), typeURL: r.GetTypeUrl(), nonce: r.GetResponseNonce(), errMsg: detail(r.GetErrorDetail()),
		sub: r.GetResourceNamesSubscribe(), unsub: r.GetResourceNamesUnsubscribe(), initial: r.GetInitialResourceVersions()}, nil
}

func (c deltaConn) send(o *out) error {
	return c.gs.SendMsg(encode(o, true)) // a DeltaDiscoveryResponse (wire.go)
}

func detail(st *statuspb.Status) string {
	if st == nil {
		return ""
	}
	if st.GetMessage() == "" {
		return fmt.Sprintf("rejected (code %d, no message)", st.GetCode())
	}
	return st.GetMessage()
}

// serve runs one stream: authenticate its first request, then answer
// requests and push changes until the client goes or ctx ends.
func (s *Server) serve(ctx context.Context, delta bool, c conn) error {
	select {
	case <-s.o.Builder.Ready():
	case <-ctx.Done():
		return status.Error(codes.Unavailable, "the control plane is stopping")
	}
	peerAddr := "unknown"
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		peerAddr = p.Addr.String()
	}
	host, _, _ := net.SplitHostPort(peerAddr)
	if !s.admitPeer(host) {
		s.m.refused.WithLabelValues("too_many_streams").Inc()
		return status.Errorf(codes.ResourceExhausted, "%s holds %d ADS streams, the limit per client address (xds.maxStreamsPerClient)", host, s.o.MaxStreamsPerPeer)
	}
	defer s.releasePeer(host)

	first, err := c.recv()
	if err != nil {
		return nil
	}
	proxy, ref := s.o.Auth.Check(ctx, first.node)
	if ref != nil {
		s.m.refused.WithLabelValues(ref.Reason).Inc()
		s.o.Log.Warn("refused an ADS stream", "reason", ref.Reason, "detail", ref.Msg, "source", peerAddr, "node", first.node.GetId())
		return ref.GRPC()
	}
	proxyless := isProxyless(first.node)
	dnsAddr, err := s.o.Builder.dnsAddrOf(first.node, proxy, proxyless)
	if err != nil {
		s.m.refused.WithLabelValues("bad_dns_port").Inc()
		s.o.Log.Warn("refused an ADS stream", "reason", "bad_dns_port", "detail", err.Error(), "source", peerAddr, "node", first.node.GetId())
		return status.Error(codes.InvalidArgument, err.Error())
	}
	table, err := s.o.Builder.acquire(ctx, proxy.Mesh)
	if err != nil {
		return status.Error(codes.Unavailable, "the control plane is stopping")
	}
	defer s.o.Builder.release(table)
	st := &stream{
		id: s.nextID.Add(1), proxy: proxy, delta: delta, proxyless: proxyless, peer: peerAddr, since: time.Now(),
		table: table, wakeCh: make(chan struct{}, 1), dnsAddr: dnsAddr,
	}
	s.attach(st)
	defer s.detach(st)
	// read the Dataplane once attached, so that a change of it from now
	// on wakes the stream
	if err := s.refresh(st); err != nil {
		return err
	}
	if dnsAddr.IsValid() {
		done, err := s.o.Builder.useDNS(ctx, table, proxy.Mesh)
		if err != nil {
			return status.Error(codes.Unavailable, "the control plane is stopping")
		}
		defer done()
	}
	proto := "sotw"
	if delta {
		proto = "delta"
	}
	s.m.streams.WithLabelValues(proto).Inc()
	defer s.m.streams.WithLabelValues(proto).Dec()
	s.o.Log.Debug("proxy connected", "mesh", proxy.Mesh, "name", proxy.Name, "protocol", proto, "source", peerAddr)

	if _, err := s.handle(st, first); err != nil {
		return err
	}
	// The receiving goroutine applies each request itself and wakes the
	// sending loop only for a new subscription: an ACK (every response
	// gets one, from every proxy) changes nothing to send.
	recvErr := make(chan error, 1)
	go func() {
		for {
			r, err := c.recv()
			if err != nil {
				recvErr <- nil // the client went, or the stream ended
				return
			}
			subscribed, err := s.handle(st, r)
			if err != nil {
				recvErr <- err
				return
			}
			if subscribed {
				st.poke()
			}
		}
	}()
	for {
		if err := s.push(st, c); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-recvErr:
			return err
		case <-st.wakeCh:
			if err := s.refresh(st); err != nil {
				return err
			}
		}
	}
}

// isProxyless reports whether node is a gRPC library rather than Envoy:
// grpc-go names itself "gRPC Go" in user_agent_name (other gRPC
// languages "gRPC C++", "gRPC Java").
func isProxyless(node *corev3.Node) bool {
	return strings.HasPrefix(node.GetUserAgentName(), "gRPC")
}

// handle applies one request: its ACK or NACK, and its subscription. It
// reports whether the request may have subscribed to something (a
// response may be due).
func (s *Server) handle(st *stream, r *request) (bool, error) {
	typ, ok := typeOf(r.typeURL)
	if !ok {
		if r.typeURL == "" {
			return false, status.Error(codes.InvalidArgument, "type_url is required on an ADS stream")
		}
		return false, nil // a type this control plane does not serve: no answer
	}
	now := time.Now()
	st.mu.Lock()
	ts := st.types[typ]
	if r.nonce != "" && ts != nil {
		st.mu.Unlock()
		d, current, nacked := st.ack(typ, r.nonce, r.errMsg, now)
		if !current {
			return false, nil // an answer to an older response: the client will ask again
		}
		if d > 0 {
			s.m.ackDelayOf[typ].Observe(d.Seconds())
		}
		if nacked {
			s.m.nacks.WithLabelValues(typ.String()).Inc()
			s.o.Log.Warn("a proxy rejected its configuration", "mesh", st.proxy.Mesh, "name", st.proxy.Name, "type", typ.String(), "err", r.errMsg)
		}
		st.mu.Lock()
	}
	first := ts == nil
	if first {
		ts = &typeState{names: set[string]{}, initial: r.initial}
		st.types[typ] = ts
	}
	subscribed := first || (st.delta && (len(r.sub) > 0 || len(r.unsub) > 0)) || (!st.delta && !sameNames(ts, r.sub))
	if subscribed {
		ts.subscribe(st.delta, first, r.sub, r.unsub, fullState(typ))
	}
	st.mu.Unlock()
	return subscribed, nil
}

// sameNames reports whether a SotW request names what ts subscribes.
func sameNames(ts *typeState, names []string) bool {
	n := 0
	for _, x := range names {
		if x == "*" {
			if !ts.wildcard {
				return false
			}
			continue
		}
		if !has(ts.names, x) {
			return false
		}
		n++
	}
	return n == len(ts.names) && (ts.wildcard == (len(names) == 0 || contains(names, "*")))
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// refresh re-reads the proxy's Dataplane: a new selection means a full
// diff; a deleted Dataplane ends the stream.
func (s *Server) refresh(st *stream) error {
	if st.proxy.Pod {
		return nil // a Pod has no Dataplane: it gets every service of its mesh
	}
	// by revision first: every change of the mesh wakes every stream,
	// and reading a Dataplane the cache holds frozen decodes it
	rev, ok := s.o.Builder.cache.RevisionOf(st.proxy.Key())
	if ok && rev == st.dpRev {
		return nil
	}
	dp, ok := s.o.Builder.cache.Peek(st.proxy.Key())
	if !ok {
		return status.Errorf(codes.NotFound, "dataplane %s was deleted", st.proxy)
	}
	sel := selectorOf(dp)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.dpRev = dp.Revision
	if !sel.equal(st.sel) {
		for _, ts := range st.types {
			if ts != nil {
				ts.full, ts.hadSel, ts.prevSel = true, true, st.sel
			}
		}
		st.countSelected(st.sel, sel)
		st.sel = sel
	}
	return nil
}

// push sends every type's due response, clusters first.
func (s *Server) push(st *stream, c conn) error {
	for typ := range numTypes {
		o := st.compute(typ)
		if o == nil {
			continue
		}
		if err := c.send(o); err != nil {
			if errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled {
				return nil
			}
			return err
		}
		s.m.pushesOf[typ].Inc()
	}
	return nil
}

func (s *Server) admitPeer(host string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perPeer[host] >= s.o.MaxStreamsPerPeer {
		return false
	}
	s.perPeer[host]++
	return true
}

func (s *Server) releasePeer(host string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perPeer[host]--; s.perPeer[host] <= 0 {
		delete(s.perPeer, host)
	}
}

func (s *Server) attach(st *stream) {
	s.mu.Lock()
	if s.streams[st.proxy] == nil {
		s.streams[st.proxy] = map[*stream]struct{}{}
	}
	s.streams[st.proxy][st] = struct{}{}
	s.mu.Unlock()
	st.table.mu.Lock()
	st.table.streams[st] = struct{}{}
	st.table.mu.Unlock()
}

func (s *Server) detach(st *stream) {
	st.mu.Lock()
	st.countSelected(st.sel, nil)
	st.mu.Unlock()
	st.table.mu.Lock()
	delete(st.table.streams, st)
	st.table.mu.Unlock()
	s.mu.Lock()
	delete(s.streams[st.proxy], st)
	if len(s.streams[st.proxy]) == 0 {
		delete(s.streams, st.proxy)
	}
	s.mu.Unlock()
}
