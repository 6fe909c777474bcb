package zonesync

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/meshnames/meshnames/api/zonesync/v1"
	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// ZoneOptions configures a zone's connection to its global.
type ZoneOptions struct {
	Store store.Store
	Cache *cache.Cache
	Log   *slog.Logger
	// Registerer receives the metrics (nil: none).
	Registerer prometheus.Registerer
	// Zone is this control plane's zone.
	Zone string
	// Address is the global's sync address: grpcs://host:port, or
	// grpc://host:port with Insecure.
	Address string
	// TokenFile holds the zone token; it is read at every connection, so a
	// new token takes effect at the next reconnect.
	TokenFile string
	// CAFile, when set, verifies the global's certificate chain instead of
	// the pin in the token.
	CAFile string
	// Insecure allows grpc:// (no TLS).
	Insecure bool
	// Env is the zone's kuma.io/env; ExportDefault the export mode of its
	// services that set none.
	Env, ExportDefault string
	// Version is meshnames' version, sent to the global for its insights.
	Version string
	// Heartbeat is used until the global says its own.
	Heartbeat time.Duration
	// MinBackoff and MaxBackoff bound the wait before a reconnection; it
	// doubles from MinBackoff after each failed attempt, with jitter.
	MinBackoff, MaxBackoff time.Duration
}

// Zone keeps a zone's stream to its global up.
type Zone struct {
	o     ZoneOptions
	m     *metrics
	stats *stats
	state atomic.Pointer[linkState]
}

// NewZone returns a zone's sync client; it does no I/O.
func NewZone(o ZoneOptions) *Zone {
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 200 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	m := newMetrics(o.Registerer)
	return &Zone{o: o, m: m, stats: newStats(o.Zone, m)}
}

// Insight returns the zone's view of its stream to the global: Sent is
// what the zone sent and the global acknowledged, Received what it stored
// of the global's feed, Instance the global instance, Refused the
// global's resources it refused. It reads; the stream keeps it current.
func (z *Zone) Insight() api.ZoneInsight { return z.stats.insight() }

// ParseAddress checks a global address: grpcs://host:port, or grpc:// when
// insecure is allowed. It returns the dial target and whether to use TLS.
func ParseAddress(addr string, insecureOK bool) (target string, useTLS bool, err error) {
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return "", false, fmt.Errorf("must be grpcs://HOST:PORT, got %q", addr)
	}
	if _, port, err := net.SplitHostPort(u.Host); err != nil || port == "" {
		return "", false, fmt.Errorf("must name a port: grpcs://HOST:PORT, got %q", addr)
	}
	switch u.Scheme {
	case "grpcs":
		return u.Host, true, nil
	case "grpc":
		if !insecureOK {
			return "", false, fmt.Errorf("grpc:// sends the zone token and all synced resources in the clear; use grpcs://, or allow it with --sync-insecure")
		}
		return u.Host, false, nil
	}
	return "", false, fmt.Errorf("must start with grpcs:// (or grpc:// with --sync-insecure), got %q", addr)
}

// Run keeps the stream up until ctx ends, reconnecting with backoff and
// jitter. The zone keeps serving what it stored meanwhile. creator, when
// not nil, stores the new services the global sends with the status the
// zone's controllers decide for them (its reconcile.Runner).
//
// It logs once per change of state (connected, the stream ended, the
// global unreachable for a reason, the zone refused for a reason), not
// once per attempt: a zone retrying a refused token every 30 seconds for
// a day logs one line.
func (z *Zone) Run(ctx context.Context, creator admission.Creator) error {
	defer z.setState(linkState{})
	epoch, err := Epoch(ctx, z.o.Store)
	if err != nil {
		return err
	}
	backoff := z.o.MinBackoff
	for ctx.Err() == nil {
		started := time.Now()
		err := z.connect(ctx, epoch, creator)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(started) > z.o.MaxBackoff {
			backoff = z.o.MinBackoff // it ran well for a while: start over
		}
		// Jitter spreads the reconnections of many zones after a global
		// restart: a wait between half and all of the backoff.
		wait := backoff/2 + rand.N(backoff/2+1)
		next := linkState{kind: stateUnreachable, reason: err.Error()}
		var r *denied
		if errors.As(err, &r) {
			next = linkState{kind: stateRefused, reason: r.Error()}
		}
		z.m.connectFailures.WithLabelValues(z.o.Zone, next.kind.String()).Inc()
		switch prev := z.setState(next); {
		case prev.kind == stateConnected:
			z.o.Log.Warn("the sync stream to the global ended; reconnecting", "err", err, "in", wait.Round(time.Millisecond))
		case prev == next:
			// the same failure again: counted, not logged
		case next.kind == stateRefused:
			z.o.Log.Error("the global refuses this zone; it keeps serving what it last knew and retries with backoff, logging again when this changes",
				"err", err, "retry_in", wait.Round(time.Millisecond))
		default:
			z.o.Log.Warn("cannot sync with the global; retrying with backoff, logging again when this changes",
				"err", err, "retry_in", wait.Round(time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		backoff = min(2*backoff, z.o.MaxBackoff)
	}
	return nil
}

// Ready says why this zone is not ready, or nil: it is not while the global
// refuses its credentials (a revoked token, one signed by another global,
// a global that is not the one its token pins), which retrying does not
// cure. A global that is merely unreachable leaves it ready: it serves
// what it last knew.
func (z *Zone) Ready() error {
	if s := z.state.Load(); s != nil && s.kind == stateRefused {
		return fmt.Errorf("the global refuses this zone: %s", s.reason)
	}
	return nil
}

// setState records the state of the link to the global and returns the
// one before.
func (z *Zone) setState(s linkState) linkState {
	prev := z.state.Swap(&s)
	refused := 0.0
	if s.kind == stateRefused {
		refused = 1
	}
	z.m.zoneRefused.WithLabelValues(z.o.Zone).Set(refused)
	if prev == nil {
		return linkState{}
	}
	return *prev
}

// linkState is where a zone's link to its global stands.
type linkState struct {
	kind stateKind
	// reason is the error of the last attempt (unreachable, refused).
	reason string
}

type stateKind int

const (
	stateIdle stateKind = iota
	stateConnected
	stateUnreachable
	stateRefused
)

func (k stateKind) String() string {
	return [...]string{"idle", "connected", "unreachable", "refused"}[k]
}

// denied is a failure that retrying at once will not cure: the zone's own
// token file is unusable, the global refused the token, or the global's
// certificate is not the one the zone trusts.
type denied struct{ err error }

func (r *denied) Error() string { return r.err.Error() }
func (r *denied) Unwrap() error { return r.err }

// connect runs one stream.
func (z *Zone) connect(ctx context.Context, epoch string, creator admission.Creator) error {
	token, claims, err := loadToken(z.o.TokenFile, z.o.Zone, z.o.CAFile, time.Now())
	if err != nil {
		return &denied{err}
	}
	target, useTLS, err := ParseAddress(z.o.Address, z.o.Insecure)
	if err != nil {
		return err
	}
	creds := insecure.NewCredentials()
	var untrusted atomic.Pointer[error]
	// refused says whether err is the global refusing the zone: its
	// certificate is not the one trusted, or it refused the token.
	refused := func(err error) error {
		if e := untrusted.Load(); e != nil {
			return &denied{fmt.Errorf("the global at %s is not the one this zone trusts: %w", target, *e)}
		}
		if s, ok := status.FromError(err); ok && (s.Code() == codes.Unauthenticated || s.Code() == codes.PermissionDenied) {
			return &denied{streamErr(err)}
		}
		return streamErr(err)
	}
	if useTLS {
		host, _, _ := net.SplitHostPort(target)
		cfg, err := zoneTLS(claims.SyncPin, z.o.CAFile, host)
		if err != nil {
			return &denied{err}
		}
		// A global whose certificate the zone does not trust fails the
		// handshake, which gRPC reports as unavailable like any dial
		// failure: the verifier's own error tells the two apart.
		verify := cfg.VerifyConnection
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			err := verify(cs)
			if err != nil {
				untrusted.Store(&err)
			}
			return err
		}
		creds = credentials.NewTLS(cfg)
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}))
	if err != nil {
		return fmt.Errorf("dial %s: %w", target, err)
	}
	defer conn.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sctx = metadata.AppendToOutgoingContext(sctx, "authorization", "Bearer "+token)
	stream, err := pb.NewZoneSyncClient(conn).Sync(sctx, grpc.WaitForReady(false))
	if err != nil {
		return refused(err)
	}
	pos, err := readPosition(ctx, z.o.Store, leaseFromGlobal)
	if err != nil {
		return err
	}
	hello := &pb.Hello{Zone: z.o.Zone, Version: z.o.Version, Resume: pos.wire(), Epoch: epoch, Inventories: true}
	if err := stream.Send(&pb.Envelope{Body: &pb.Envelope_Hello{Hello: hello}}); err != nil {
		_, err = stream.Recv() // the server's reason, if it closed the stream
		return refused(err)
	}
	hctx, hcancel := context.WithTimeout(ctx, helloTimeout)
	env, err := recvWithin(hctx, stream.Recv)
	hcancel()
	if err != nil {
		return refused(err)
	}
	w := env.GetWelcome()
	if w == nil {
		return errors.New("the global's first message is not a welcome")
	}
	heartbeat := z.o.Heartbeat
	if w.GetHeartbeatMillis() > 0 {
		heartbeat = time.Duration(w.GetHeartbeatMillis()) * time.Millisecond
	}
	z.stats.connected(w.GetInstance(), z.o.Version)
	z.setState(linkState{kind: stateConnected})
	z.o.Log.Info("connected to the global", "instance", w.GetInstance(),
		"resume_sent", w.GetResume().GetRevision(), "resume_received", pos.Revision)
	zs := &zoneSide{zone: z.o.Zone, cache: z.o.Cache, out: zoneOut{env: z.o.Env, exportDefault: z.o.ExportDefault}}
	l := &link{
		peer: "global", admit: admission.New(admission.Options{Mode: resource.ModeZone, Zone: z.o.Zone, Store: z.o.Store, Cache: z.o.Cache}), st: z.o.Store, cache: z.o.Cache,
		side: zs, feed: directFeed{st: z.o.Store, side: zs, known: zs.known},
		epoch: epoch, peerEpoch: w.GetEpoch(), ackLease: leaseFromGlobal, heartbeat: heartbeat,
		log: z.o.Log, stats: z.stats, send: stream.Send, recv: stream.Recv,
		inventories: w.GetInventories(), creator: creator,
	}
	err = l.run(sctx, positionOf(w.GetResume()))
	if err == nil && ctx.Err() == nil {
		err = errors.New("the stream ended")
	}
	z.stats.disconnected(err)
	return streamErr(err)
}

// streamErr turns a gRPC status into an error that says what the global said.
func streamErr(err error) error {
	if err == nil {
		return nil
	}
	if s, ok := status.FromError(err); ok {
		return fmt.Errorf("the global refused or ended the stream: %s: %s", s.Code(), s.Message())
	}
	return err
}
