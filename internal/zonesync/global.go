package zonesync

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	pb "github.com/meshnames/meshnames/api/zonesync/v1"
	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// DefaultHeartbeat is how often each side of an idle stream shows it is
// there; a side silent for three heartbeats is given up.
const DefaultHeartbeat = 5 * time.Second

// helloTimeout bounds the wait for a zone's Hello and the global's Welcome.
const helloTimeout = 10 * time.Second

// GlobalOptions configures the global's sync server.
type GlobalOptions struct {
	Store store.Store
	Cache *cache.Cache
	Log   *slog.Logger
	// Registerer receives the metrics (nil: none).
	Registerer prometheus.Registerer
	// Addr is where the sync server listens (host:port).
	Addr string
	// TLS is the certificate the server presents; nil serves plain gRPC,
	// which zones accept only with --sync-insecure.
	TLS *GlobalTLS
	// Verify checks a zone token and returns the zone it is for.
	Verify func(raw string, now time.Time) (zone string, err error)
	// Instance names this global instance; Version is meshnames' version.
	Instance, Version string
	// ExportDefault is the export mode of a service that came without one.
	ExportDefault string
	// Heartbeat is how often an idle stream sends a heartbeat.
	Heartbeat time.Duration
	// Listening, when set, is called with the address once it listens.
	Listening func(addr string)
}

// Global serves zones' sync streams on a global control plane. Every
// instance of a global sharing PostgreSQL serves streams; a zone's stream
// is on one of them at a time.
type Global struct {
	o     GlobalOptions
	m     *metrics
	epoch string

	// feed is the global's feed as every zone's stream reads it, read
	// and encoded once for all of them.
	feed *sharedFeed
	// inventories is what zones should hold, for the streams' checks.
	inventories inventories

	mu    sync.Mutex
	zones map[string]*zoneState
	next  uint64 // numbers streams
}

// zoneState is this instance's view of a zone's stream.
type zoneState struct {
	stats  *stats
	cancel context.CancelFunc // the current stream's, nil when none
	stream uint64             // the current stream's number
	saved  api.ZoneInsight    // last insight written to the store
}

// NewGlobal returns the sync server; it does no I/O.
func NewGlobal(o GlobalOptions) *Global {
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	g := &Global{o: o, m: newMetrics(o.Registerer), zones: map[string]*zoneState{}}
	g.feed = newSharedFeed(o.Store, o.Cache.At, newGlobalSide("", o.Cache, o.ExportDefault, &g.inventories), sharedFeedBytes, sharedFeedKeep)
	return g
}

// Run listens on Addr and serves streams until ctx ends.
func (g *Global) Run(ctx context.Context) error {
	epoch, err := Epoch(ctx, g.o.Store)
	if err != nil {
		return err
	}
	g.epoch = epoch
	ln, err := net.Listen("tcp", g.o.Addr)
	if err != nil {
		return fmt.Errorf("sync.addr: cannot listen on %s: %w", g.o.Addr, err)
	}
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
	}
	if g.o.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{
			Certificates: []tls.Certificate{g.o.TLS.Cert}, MinVersion: tls.VersionTLS12,
		})))
	}
	srv := grpc.NewServer(opts...)
	pb.RegisterZoneSyncServer(srv, &syncService{g: g})
	scheme := "grpcs"
	if g.o.TLS == nil {
		scheme = "grpc"
	}
	g.o.Log.Info("serving zone sync", "addr", scheme+"://"+ln.Addr().String())
	if g.o.Listening != nil {
		g.o.Listening(ln.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	tick := time.NewTicker(g.o.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case err := <-errc:
			return fmt.Errorf("sync server: %w", err)
		case <-tick.C:
			g.saveInsights(ctx)
		case <-ctx.Done():
			srv.Stop() // streams end; zones reconnect to another instance
			g.saveInsights(context.WithoutCancel(ctx))
			return nil
		}
	}
}

// syncService adapts Global to the generated interface.
type syncService struct {
	pb.UnimplementedZoneSyncServer
	g *Global
}

func (s *syncService) Sync(stream grpc.BidiStreamingServer[pb.Envelope, pb.Envelope]) error {
	return s.g.serve(stream)
}

// serve authenticates a zone's stream and runs it.
func (g *Global) serve(stream grpc.BidiStreamingServer[pb.Envelope, pb.Envelope]) error {
	ctx := stream.Context()
	addr := ""
	if p, ok := peer.FromContext(ctx); ok {
		addr = p.Addr.String()
	}
	zone, raw, err := g.authenticate(ctx)
	if err != nil {
		g.o.Log.Warn("refused a zone's sync stream: bad zone token", "addr", addr, "err", err)
		return status.Errorf(codes.Unauthenticated, "zone token refused: %v", err)
	}
	log := g.o.Log.With("zone", zone)
	hctx, cancel := context.WithTimeout(ctx, helloTimeout)
	hello, err := recvWithin(hctx, stream.Recv)
	cancel()
	if err != nil {
		log.Warn("refused a zone's sync stream: no hello", "addr", addr, "err", err)
		return status.Errorf(codes.InvalidArgument, "expected a hello: %v", err)
	}
	h := hello.GetHello()
	switch {
	case h == nil:
		log.Warn("refused a zone's sync stream: the first message is not a hello", "addr", addr)
		return status.Error(codes.InvalidArgument, "the first message must be a hello")
	case h.GetZone() != zone:
		log.Warn("refused a zone's sync stream: the zone token is for another zone", "addr", addr, "token_zone", zone, "hello_zone", h.GetZone())
		return status.Errorf(codes.PermissionDenied, "the zone token is for zone %q, but this control plane says it is zone %q", zone, h.GetZone())
	}
	if err := g.ensureZone(ctx, zone); err != nil {
		log.Error("cannot record the zone", "err", err)
		return status.Errorf(codes.Unavailable, "the global cannot record the zone: %v", err)
	}
	pos, err := readPosition(ctx, g.o.Store, leaseFromZone+zone)
	if err != nil {
		return status.Errorf(codes.Unavailable, "the global cannot read the zone's position: %v", err)
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	st, id := g.attach(zone, stop)
	defer g.detach(zone, id)
	welcome := &pb.Welcome{Resume: pos.wire(), Epoch: g.epoch, Instance: g.o.Instance, HeartbeatMillis: g.o.Heartbeat.Milliseconds(), Inventories: true}
	if err := stream.Send(&pb.Envelope{Body: &pb.Envelope_Welcome{Welcome: welcome}}); err != nil {
		return err
	}
	st.connected(g.o.Instance, h.GetVersion())
	g.saveInsight(ctx, zone)
	log.Info("zone connected", "addr", addr, "zone_version", h.GetVersion(),
		"resume_sent", h.GetResume().GetRevision(), "resume_received", pos.Revision)
	l := &link{
		peer: zone, admit: admission.New(admission.Options{Mode: resource.ModeGlobal, Store: g.o.Store, Cache: g.o.Cache}), st: g.o.Store, cache: g.o.Cache, side: newGlobalSide(zone, g.o.Cache, g.o.ExportDefault, &g.inventories),
		feed:  g.feed.reader(),
		epoch: g.epoch, peerEpoch: h.GetEpoch(), ackLease: leaseFromZone + zone, heartbeat: g.o.Heartbeat,
		log: log, stats: st, send: stream.Send, recv: stream.Recv,
		inventories: h.GetInventories(),
	}
	refused := make(chan error, 1)
	go g.recheckToken(sctx, raw, stop, refused)
	err = l.run(sctx, positionOf(h.GetResume()))
	if ctx.Err() != nil && err == nil {
		err = errors.New("the zone closed the stream")
	}
	select {
	case rerr := <-refused:
		err = fmt.Errorf("%w: %w", errTokenRefused, rerr)
	default:
	}
	st.disconnected(err)
	g.saveInsight(context.WithoutCancel(ctx), zone)
	log.Info("zone disconnected", "err", err)
	if errors.Is(err, errTokenRefused) {
		return status.Error(codes.Unauthenticated, err.Error())
	}
	if err != nil {
		return status.Error(codes.Aborted, err.Error())
	}
	return nil
}

// authenticate reads and verifies the zone token of a stream, and returns
// the zone and the token.
func (g *Global) authenticate(ctx context.Context) (zone, raw string, err error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) != 1 {
		return "", "", errors.New(`no zone token: send "authorization: Bearer <token>"`)
	}
	raw, ok := strings.CutPrefix(vals[0], "Bearer ")
	if !ok {
		return "", "", errors.New(`the authorization metadata must be "Bearer <token>"`)
	}
	if g.o.Verify == nil {
		return "", "", errors.New("this global verifies no zone tokens")
	}
	raw = strings.TrimSpace(raw)
	zone, err = g.o.Verify(raw, time.Now())
	return zone, raw, err
}

// tokenRecheck is how often the global verifies the token of an open
// stream again, so that a token revoked (or expired) while its zone is
// connected ends the stream: the keys take a revocation made on another
// instance within their own refresh interval, a second.
var tokenRecheck = time.Second

// errTokenRefused marks a stream ended because its token stopped verifying.
var errTokenRefused = errors.New("zone token refused")

// recheckToken verifies raw every tokenRecheck until ctx ends; when it
// fails it sends the reason on refused and calls stop.
func (g *Global) recheckToken(ctx context.Context, raw string, stop func(), refused chan<- error) {
	t := time.NewTicker(tokenRecheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if _, err := g.o.Verify(raw, now); err != nil {
				refused <- err
				stop()
				return
			}
		}
	}
}

// recvWithin receives one message, giving up when ctx ends.
func recvWithin(ctx context.Context, recv func() (*pb.Envelope, error)) (*pb.Envelope, error) {
	type result struct {
		env *pb.Envelope
		err error
	}
	ch := make(chan result, 1)
	go func() {
		env, err := recv()
		ch <- result{env, err}
	}()
	select {
	case r := <-ch:
		return r.env, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ensureZone creates the Zone resource of a zone connecting for the first
// time, enabled.
func (g *Global) ensureZone(ctx context.Context, zone string) error {
	k := resource.Key{Kind: resource.Zone, Name: zone}
	if _, ok := g.o.Cache.Peek(k); ok {
		return nil
	}
	// Created only when absent: an update would undo an operator's
	// spec.enabled: false.
	obj := &resource.Object{Kind: resource.Zone, Name: zone, Spec: &resource.ZoneSpec{}}
	adm := admission.New(admission.Options{Mode: resource.ModeGlobal, Store: g.o.Store, Cache: g.o.Cache})
	if errs := adm.Admit(obj, admission.Writer{Source: admission.System, Subject: "zone sync"}); len(errs) > 0 {
		return errs
	}
	_, err := store.Create(ctx, g.o.Store, obj)
	if err == nil {
		g.o.Log.Info("a new zone connected; created its Zone resource", "zone", zone)
	}
	if errors.Is(err, store.ErrAlreadyExists) {
		err = nil
	}
	return err
}

// attach makes stop the zone's current stream on this instance, ending the
// one before (a zone that reconnects before its old stream timed out).
func (g *Global) attach(zone string, stop context.CancelFunc) (*stats, uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	zs := g.zones[zone]
	if zs == nil {
		zs = &zoneState{stats: newStats(zone, g.m)}
		g.zones[zone] = zs
	}
	if zs.cancel != nil {
		zs.cancel()
	}
	g.next++
	zs.cancel, zs.stream = stop, g.next
	return zs.stats, g.next
}

func (g *Global) detach(zone string, id uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if zs := g.zones[zone]; zs != nil && zs.stream == id {
		zs.cancel = nil
	}
}

// saveInsights writes the insight of every zone this instance serves, so
// that every instance answers for it.
func (g *Global) saveInsights(ctx context.Context) {
	g.mu.Lock()
	var zones []string
	for z, zs := range g.zones {
		if zs.cancel != nil || zs.stats.insight().Online != zs.saved.Online {
			zones = append(zones, z)
		}
	}
	g.mu.Unlock()
	for _, z := range zones {
		g.saveInsight(ctx, z)
	}
}

func (g *Global) saveInsight(ctx context.Context, zone string) {
	g.mu.Lock()
	zs := g.zones[zone]
	g.mu.Unlock()
	if zs == nil {
		return
	}
	in := zs.stats.insight()
	v, _ := json.Marshal(in)
	if len(v) > store.MaxLeaseValueBytes {
		in.LastError = in.LastError[:min(len(in.LastError), 512)]
		v, _ = json.Marshal(in)
	}
	rs, err := g.o.Store.Apply(ctx, store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: leaseInsight + zone, Value: v}})
	if err == nil {
		err = rs[0].Err
	}
	if err != nil {
		if ctx.Err() == nil {
			g.o.Log.Warn("cannot record a zone's insight", "zone", zone, "err", err)
		}
		return
	}
	g.mu.Lock()
	zs.saved = in
	g.mu.Unlock()
}

// Insight returns what the global knows of a zone's stream: live when this
// instance serves it, otherwise as the serving instance last recorded it
// (offline when that record is older than three heartbeats).
func (g *Global) Insight(ctx context.Context, zone string) (api.ZoneInsight, error) {
	g.mu.Lock()
	zs := g.zones[zone]
	live := zs != nil && zs.cancel != nil // detach clears cancel under g.mu
	g.mu.Unlock()
	if live {
		return zs.stats.insight(), nil
	}
	l, err := readLease(ctx, g.o.Store, leaseInsight+zone)
	if err != nil {
		return api.ZoneInsight{}, err
	}
	in := api.ZoneInsight{Zone: zone}
	if l != nil {
		if err := json.Unmarshal(l.Value, &in); err != nil {
			return api.ZoneInsight{}, fmt.Errorf("the insight of zone %s: %w", zone, err)
		}
	}
	if in.Online && time.Since(in.LastSeen) > silentBeats*g.o.Heartbeat+g.o.Heartbeat {
		in.Online = false
	}
	return in, nil
}
