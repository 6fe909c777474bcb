// Package server wires a control plane together from its configuration:
// it opens the store, fills the cache, serves the REST API and the web
// GUI, creates the default resources, and on shutdown stops them in
// reverse order - stop accepting requests (finishing those in flight), stop
// the cache, close the store.
//
// It is the only package that imports every part; nothing imports it but cli.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/apiserver"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/config"
	"github.com/meshnames/meshnames/internal/dnsserver"
	"github.com/meshnames/meshnames/internal/extsvc"
	"github.com/meshnames/meshnames/internal/gui"
	"github.com/meshnames/meshnames/internal/history"
	"github.com/meshnames/meshnames/internal/hostnames"
	"github.com/meshnames/meshnames/internal/kuma"
	"github.com/meshnames/meshnames/internal/leader"
	"github.com/meshnames/meshnames/internal/meshservices"
	"github.com/meshnames/meshnames/internal/mzservice"
	"github.com/meshnames/meshnames/internal/reconcile"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/vips"
)

// Server is a running control plane.
type Server struct {
	cfg     config.Config
	log     *slog.Logger
	version string
	// Listening, when set, is called with the API address once it accepts
	// connections (tests use it with port 0).
	Listening func(apiAddr string)
	// Clock, when set, replaces time.Now for the store (tests).
	Clock func() time.Time
	// NoControllers keeps the controllers from running, so that tests of
	// the API and the command line see no asynchronous status writes.
	NoControllers bool
	// SyncListening, when set, is called with a global's sync address once
	// it accepts connections.
	SyncListening func(syncAddr string)
	// XDSListening, when set, is called with the xDS address once it
	// accepts connections.
	XDSListening func(xdsAddr string)

	elector leader.Elector // set by Run
	sync    *syncParts     // set by Run
}

// New returns a server for cfg; cfg must be valid. It does no I/O.
func New(cfg config.Config, log *slog.Logger, version string) *Server {
	return &Server{cfg: cfg, log: log, version: version}
}

// Run serves until ctx ends, then shuts down in order and returns. It
// returns an error when a part cannot start (the store cannot be opened,
// the API address is taken) or fails.
func (s *Server) Run(ctx context.Context) error {
	if err := s.checkZoneToken(); err != nil {
		return err
	}
	st, err := openStore(ctx, s.cfg, s.Clock, s.log)
	if err != nil {
		return err
	}
	defer func() {
		if err := st.Close(); err != nil {
			s.log.Error("closing the store", "err", err)
		}
	}()

	if err := s.createDefaults(ctx, st); err != nil {
		return err
	}
	if !s.cfg.Defaults.SkipHostnameGenerators {
		if err := hostnames.EnsureDefaultsFor(ctx, st, s.cfg.Mode, s.cfg.Zone, s.cfg.Env, s.log); err != nil {
			return err
		}
	}

	keys, err := s.loadKeys(ctx, st)
	if err != nil {
		return err
	}
	apiTLS, err := apiTLS(s.cfg.API.TLS)
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.elector = s.newElector(reg, st)
	c := cache.New(st, s.log.With("component", "cache"), reg)
	if s.cfg.Env == config.EnvKubernetes {
		c.SetMaxDecoded(cache.KubeMaxDecoded)
	}
	if s.sync, err = s.newSync(ctx, st, c, keys, reg); err != nil {
		return err
	}
	// Every instance answers DNS from its own table, leader or not.
	dnsSrv := dnsserver.New(dnsserver.Options{
		Addr: s.cfg.DNS.Addr, DefaultMesh: s.cfg.DNS.DefaultMesh, Upstreams: s.cfg.DNS.Upstreams,
		UpstreamTimeout: s.cfg.DNS.UpstreamTimeout.D(), Log: s.log.With("component", "dns"), Registerer: reg,
	})
	tableOpts := dnsserver.TableOptions{
		TTL: uint32(s.cfg.DNS.TTL.D() / time.Second), Domains: s.cfg.DNS.Domains,
		Global: s.cfg.Mode == config.ModeGlobal,
	}
	builder := dnsserver.NewBuilder(c, dnsSrv, tableOpts)
	names := dnsserver.NewInspector(dnsSrv, c, tableOpts)
	usage, err := s.vipUsage(st)
	if err != nil {
		return err
	}
	gc := newLoadGC(s.cfg.Mode != config.ModeStandalone)
	ctl, err := s.newControllers(st, c, reg, gc, usage)
	if err != nil {
		return err
	}
	apiOpts := apiserver.Options{
		// The API's writes carry their audit entries into the store; what
		// it creates for the controllers they store with its status.
		Cache: c, Admission: admission.New(admission.Options{Store: apiserver.AuditingStore(st), Cache: c, Mode: s.cfg.Mode, Zone: s.cfg.Zone,
			DisplayName: displayName(st), Creator: ctl.creator()}),
		Store: st, NoBackup: noBackup(s.cfg), Limits: apiLimits(s.cfg.API.Limits),
		Log: s.log.With("component", "api"), Registry: reg, Version: s.version,
		Ready: func() error {
			if err := ready(c); err != nil {
				return err
			}
			if dnsSrv.Table() == nil {
				return errors.New("the DNS table is not built yet")
			}
			return s.sync.ready()
		},
		DNS:    names.Listing,
		Leader: func(ctx context.Context) (api.LeaderStatus, error) { return s.leaderStatus(ctx, st) },
		Preview: func(ctx context.Context, objs []*resource.Object) ([]api.NameChange, error) {
			return s.preview(ctx, st, c, objs)
		},
	}
	if s.sync.global != nil {
		apiOpts.ZoneInsight = s.sync.global.Insight
		pin := s.sync.pin
		apiOpts.SyncPin = func() (string, error) { return pin, nil }
	}
	if s.cfg.Mode != config.ModeGlobal {
		apiOpts.ServiceTags = meshservices.Reporter(c, s.serviceOptions())
	}
	proxies := s.newXDS(st, c, keys, apiTLS, reg, dnsSrv)
	if proxies != nil {
		apiOpts.XDS = proxies.inspect
		// every new DNS table may change the names of proxies' DNS listeners
		builder.Built = func(*dnsserver.Table) { proxies.builder.NamesChanged() }
	}
	webGUI := s.newGUI(st, c, names, apiOpts, proxies, usage)
	apiOpts.GUI, apiOpts.GUIPrompt = webGUI.Handler(), gui.TokenPrompt
	ln, err := net.Listen("tcp", s.cfg.API.Addr)
	if err != nil {
		return fmt.Errorf("api.addr: cannot listen on %s: %w", s.cfg.API.Addr, err)
	}
	apiOpts.Auth, apiOpts.Keys = s.newGuard(keys, ln.Addr().String(), reg), keys
	api := apiserver.New(apiOpts)
	httpSrv := &http.Server{
		TLSConfig:         apiTLS,
		Handler:           kuma.Mount(api.Handler(), apiOpts.Limits.MaxBodyBytes), // Kuma 3.x shapes at /kuma, translated to the native API
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}

	// The cache outlives the HTTP server so that requests in flight at
	// shutdown can finish.
	cacheCtx, stopCache := context.WithCancel(context.WithoutCancel(ctx))
	defer stopCache()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return c.Run(cacheCtx) })
	g.Go(func() error {
		scheme, serve := "http://", httpSrv.Serve
		if apiTLS != nil {
			scheme, serve = "https://", func(ln net.Listener) error { return httpSrv.ServeTLS(ln, "", "") }
		}
		s.log.Info("serving the REST API", "addr", scheme+ln.Addr().String())
		if s.Listening != nil {
			s.Listening(ln.Addr().String())
		}
		if err := serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("api server: %w", err)
		}
		return nil
	})
	g.Go(func() error { return compactLoop(gctx, st, s.cfg.Store.TombstoneRetention.D(), s.log) })
	g.Go(func() error { return compactRecordsLoop(gctx, st, s.cfg, s.log) })
	g.Go(func() error { return keys.Run(gctx, s.log.With("component", "tokens")) })
	gc.watchGC(gctx)
	g.Go(func() error { return s.runControllers(gctx, st, c, ctl) })
	g.Go(func() error { return s.sync.run(gctx) })
	g.Go(func() error { return dnsSrv.Run(gctx) })
	g.Go(func() error { return builder.Run(gctx) })
	if proxies != nil {
		g.Go(func() error { return proxies.run(gctx) })
	}
	g.Go(func() error { return webGUI.Run(gctx) })
	g.Go(func() error {
		var flush func() error
		if f, ok := st.(store.MemoryFlusher); ok {
			flush = f.FlushMemory
		}
		returns := prometheus.NewCounter(prometheus.CounterOpts{
			Name: "meshnames_memory_returns_total",
			Help: "Times the process returned its idle heap to the operating system after a burst of work.",
		})
		pending := prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshnames_memory_return_pending",
			Help: "1 from a burst of work until the process returned its idle heap after it (at the first quiet second once the pacing interval since the last return passed), else 0.",
		})
		reg.MustRegister(returns, pending)
		returnMemoryWhenQuiet(gctx, s.log, gc, c.Frozen, func() (bool, int) {
			synced, _ := c.Status()
			return synced, c.Len()
		}, flush, returns.Inc, func(p bool) {
			if p {
				pending.Set(1)
			} else {
				pending.Set(0)
			}
		})
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		s.log.Info("shutting down: finishing requests in flight")
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.API.ShutdownTimeout.D())
		defer cancel()
		err := httpSrv.Shutdown(sctx)
		stopCache()
		if err != nil {
			return fmt.Errorf("api server shutdown: %w", err)
		}
		return nil
	})
	err = g.Wait()
	s.log.Info("stopped")
	return err
}

func ready(c *cache.Cache) error {
	synced, err := c.Status()
	switch {
	case !synced:
		return errors.New("the cache has not loaded the store yet")
	case err != nil:
		return fmt.Errorf("cannot read the store: %w", err)
	}
	return nil
}

// controllers are the controllers' runner and the Kubernetes controllers
// that feed it; nil on a control plane that runs none.
type controllers struct {
	runner *reconcile.Runner
	kube   []func(context.Context) error
	// creates says the runner stores new services with their status: the
	// store records the creation time the controllers decided with, which
	// the Kubernetes API does not.
	creates bool
}

// creator is what stores new services with their status: the runner, or
// nil.
func (ctl *controllers) creator() admission.Creator {
	if ctl == nil || !ctl.creates {
		return nil
	}
	return ctl.runner
}

// newControllers builds the controllers. A global control plane runs none:
// zones compute hostnames for what they hold (seed 002), and global keeps
// the status zones report.
func (s *Server) newControllers(st store.Store, c *cache.Cache, reg prometheus.Registerer, gc *loadGC, usage *vips.Usage) (*controllers, error) {
	if s.cfg.Mode == config.ModeGlobal || s.NoControllers {
		return nil, nil
	}
	cores, err := s.cores(reg, s.log, usage)
	if err != nil {
		return nil, err
	}
	runner := reconcile.NewRunner(reconcile.Options{
		Cache: c, Store: st, Log: s.log.With("component", "controllers"), Registerer: reg, Now: s.Clock,
		Record: s.recordHistory, FirstPass: gc.firstPass,
	}, cores...)
	return &controllers{runner: runner, kube: s.kubeControllers(st, c, cores, runner.Kick, reg, gc), creates: !s.cfg.KubernetesEnv()}, nil
}

// runControllers runs the controllers while this instance leads.
func (s *Server) runControllers(ctx context.Context, st store.Store, c *cache.Cache, ctl *controllers) error {
	if ctl == nil {
		return nil
	}
	runner, kube := ctl.runner, ctl.kube
	return s.elector.Run(ctx, func(ctx context.Context) {
		if err := catchUp(ctx, st, c); err != nil {
			s.log.Warn("leading: the cache cannot catch up with the store; stepping down", "err", err)
			return
		}
		s.log.Info("leading: starting controllers")
		g, gctx := errgroup.WithContext(ctx)
		g.Go(func() error { return runner.Run(gctx) })
		for _, run := range kube {
			g.Go(func() error { return run(gctx) })
		}
		if z := s.sync.zone; z != nil {
			// One stream per zone: only the leading instance syncs. It
			// connects once the controllers have named what is stored,
			// so that the global receives each service once, named (a
			// restored or upgraded zone's services are stored without
			// status; the global would store each bare, then again).
			g.Go(func() error {
				select {
				case <-runner.Named():
				case <-gctx.Done():
					return nil
				}
				return z.Run(gctx, ctl.creator())
			})
		}
		if err := g.Wait(); err != nil {
			s.log.Error("the controllers stopped", "err", err)
		}
	})
}

// recordHistory returns the history events of a status write that
// replaces the parts patch names of old's status with next.
func (s *Server) recordHistory(old *resource.Object, next resource.Status, patch store.StatusPatch) []store.Op {
	op, ok, err := history.Ops(history.Diff(s.cfg.Zone, old.Key(), old.Status, next, patch))
	if err != nil {
		s.log.Warn("cannot record a history event", "err", err)
	}
	if !ok {
		return nil
	}
	return []store.Op{op}
}

// cores returns new cores of the controllers, reporting metrics to reg
// and the VIP pools' usage to usage (none when nil).
func (s *Server) cores(reg prometheus.Registerer, log *slog.Logger, usage *vips.Usage) ([]reconcile.Core, error) {
	pools, err := vipPools(s.cfg.VIPs)
	if err != nil {
		return nil, err
	}
	return []reconcile.Core{
		hostnames.New(hostnames.Options{Zone: s.cfg.Zone, ServiceTagDomain: s.cfg.DNS.ServiceTagDomain, Log: log.With("component", "hostnames"), Registerer: reg}),
		vips.New(vips.Options{Zone: s.cfg.Zone, Pools: pools, Quarantine: s.cfg.VIPs.Quarantine.D(), Log: log.With("component", "vips"), Registerer: reg, Usage: usage}),
		meshservices.New(meshservices.CoreOptions{Options: s.serviceOptions(), Log: log.With("component", "meshservices"), Registerer: reg}),
		extsvc.New(extsvc.Options{Log: log.With("component", "extsvc"), Registerer: reg}),
		mzservice.New(mzservice.Options{Zone: s.cfg.Zone, Log: log.With("component", "mzservice"), Registerer: reg}),
	}, nil
}

// preview says what hostnames and VIPs services would gain or lose if
// objs were written: new cores (the running ones are the leader's, maybe
// in another instance) decide over this instance's cache. A global
// control plane, which runs no controllers, tells nothing.
func (s *Server) preview(ctx context.Context, st store.Store, c *cache.Cache, objs []*resource.Object) ([]api.NameChange, error) {
	if s.cfg.Mode == config.ModeGlobal {
		return nil, nil
	}
	quiet := slog.New(slog.DiscardHandler)
	all, err := s.cores(nil, quiet, nil)
	if err != nil {
		return nil, err
	}
	// MeshServices that Dataplanes would make are not previewed: their
	// synthesis is not a status decision.
	cores := slices.DeleteFunc(all, func(c reconcile.Core) bool { return c.Name() == "meshservices" })
	now := time.Now
	if s.Clock != nil {
		now = s.Clock
	}
	diffs, err := reconcile.Preview(ctx, reconcile.Env{Store: st, Cache: c, Now: now, Log: quiet}, cores, objs)
	if err != nil {
		return nil, err
	}
	var out []api.NameChange
	for _, d := range diffs {
		out = append(out, api.NameChanges(d.Key, d.Before, d.After)...)
	}
	return out, nil
}

// serviceOptions are the settings of MeshService synthesis.
func (s *Server) serviceOptions() meshservices.Options {
	return meshservices.Options{
		Zone: s.cfg.Zone, ExportDefault: s.cfg.Services.ExportDefault, GracePeriod: s.cfg.Services.DeletionGracePeriod.D(),
	}
}

// vipPools turns the validated configuration into the pools of each kind.
func vipPools(c config.VIPsConfig) (map[resource.Kind]vips.Prefixes, error) {
	out := map[resource.Kind]vips.Prefixes{}
	for k, p := range map[resource.Kind]config.PoolConfig{
		resource.MeshService: c.MeshService, resource.MeshExternalService: c.MeshExternalService, resource.MeshMultiZoneService: c.MeshMultiZoneService,
	} {
		var prefixes vips.Prefixes
		var err error
		if prefixes.V4, err = netip.ParsePrefix(p.CIDR); err != nil {
			return nil, fmt.Errorf("vips pool of %s: %w", k, err)
		}
		if p.CIDRv6 != "" {
			if prefixes.V6, err = netip.ParsePrefix(p.CIDRv6); err != nil {
				return nil, fmt.Errorf("vips v6 pool of %s: %w", k, err)
			}
		}
		out[k] = prefixes
	}
	return out, nil
}

// createDefaults creates the mesh "default", the way Kuma does, unless
// configured not to. Zones receive meshes from global. It runs before the
// API accepts requests, so a ready server always has its default mesh.
func (s *Server) createDefaults(ctx context.Context, st store.Store) error {
	if s.cfg.Defaults.SkipMesh || s.cfg.Mode == config.ModeZone {
		return nil
	}
	key := resource.Key{Kind: resource.Mesh, Name: "default"}
	if _, err := st.Get(ctx, key); !errors.Is(err, store.ErrNotFound) {
		return err
	}
	_, err := store.Create(ctx, st, &resource.Object{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}})
	switch {
	case err == nil:
		s.log.Info("created the default mesh", "mesh", "default")
	case errors.Is(err, store.ErrAlreadyExists):
		err = nil // another instance created it
	default:
		err = fmt.Errorf("create the default mesh: %w", err)
	}
	return err
}
