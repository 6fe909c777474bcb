package server

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/config"
	"github.com/meshnames/meshnames/internal/leader"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/token"
	"github.com/meshnames/meshnames/internal/zonesync"
)

// syncParts are the zone sync parts of a control plane: a global's server,
// or a zone's client; none in standalone mode.
type syncParts struct {
	global *zonesync.Global
	zone   *zonesync.Zone
	// pin is the fingerprint of the global's sync certificate, which zone
	// tokens carry.
	pin string
}

// newSync builds the sync parts of the configured mode. On a global it
// loads (or, at first start, creates) the sync certificate from the store;
// keys verify zone tokens.
func (s *Server) newSync(ctx context.Context, st store.Store, c *cache.Cache, keys *token.Keys, reg prometheus.Registerer) (*syncParts, error) {
	sc := s.cfg.Sync
	switch s.cfg.Mode {
	case config.ModeGlobal:
		tlsm, err := zonesync.LoadGlobalTLS(ctx, st, sc.TLSCert, sc.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("sync.tlsCert: %w", err)
		}
		if tlsm.Created {
			s.log.Info("created the global's sync certificate; zone tokens pin it", "pin", tlsm.Pin)
		}
		verify := func(raw string, now time.Time) (string, error) {
			cl, err := keys.Verify(raw, now)
			if err != nil {
				return "", err
			}
			if cl.Role != token.RoleZone {
				return "", fmt.Errorf("a %s token is not a zone token", cl.Role)
			}
			return cl.Zone, nil
		}
		g := zonesync.NewGlobal(zonesync.GlobalOptions{
			Store: st, Cache: c, Log: s.log.With("component", "zonesync"), Registerer: reg,
			Addr: sc.Addr, TLS: tlsm, Verify: verify,
			Instance: leader.NewHolderID(sc.Addr), Version: s.version,
			ExportDefault: s.cfg.Services.ExportDefault, Heartbeat: sc.Heartbeat.D(),
			Listening: s.SyncListening,
		})
		return &syncParts{global: g, pin: tlsm.Pin}, nil
	case config.ModeZone:
		z := zonesync.NewZone(zonesync.ZoneOptions{
			Store: st, Cache: c, Log: s.log.With("component", "zonesync"), Registerer: reg,
			Zone: s.cfg.Zone, Address: sc.GlobalAddress, TokenFile: sc.ZoneTokenFile,
			CAFile: sc.GlobalCAFile, Insecure: sc.Insecure,
			Env: syncEnv(s.cfg), ExportDefault: s.cfg.Services.ExportDefault,
			Version: s.version, Heartbeat: sc.Heartbeat.D(),
		})
		return &syncParts{zone: z}, nil
	}
	return &syncParts{}, nil
}

// syncEnv is the kuma.io/env a zone sets on the services it sends that
// carry none, so that the global's synced generators select them.
func syncEnv(cfg config.Config) string {
	if cfg.KubernetesEnv() {
		return resource.EnvKubernetes
	}
	return resource.EnvUniversal
}

// run serves the global's side until ctx ends; a zone's client runs with
// the controllers, while this instance leads (runControllers).
func (p *syncParts) run(ctx context.Context) error {
	if p.global == nil {
		return nil
	}
	return p.global.Run(ctx)
}

// ready says why the sync parts make this instance not ready: a zone the
// global refuses (zonesync.Zone.Ready).
func (p *syncParts) ready() error {
	if p.zone == nil {
		return nil
	}
	return p.zone.Ready()
}

// checkZoneToken refuses to start a zone whose token file it cannot use
// (unreadable, not a zone token, for another zone, expired): such a zone
// would run without ever syncing, which looks like a working zone. The
// error names the file and the reason.
func (s *Server) checkZoneToken() error {
	if s.cfg.Mode != config.ModeZone {
		return nil
	}
	sc := s.cfg.Sync
	return zonesync.CheckTokenFile(sc.ZoneTokenFile, s.cfg.Zone, sc.GlobalCAFile, time.Now())
}
