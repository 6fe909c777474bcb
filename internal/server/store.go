package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/meshnames/meshnames/internal/config"
	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/store"
	kubestore "github.com/meshnames/meshnames/internal/store/kube"
	"github.com/meshnames/meshnames/internal/store/pebble"
	"github.com/meshnames/meshnames/internal/store/postgres"
	"github.com/meshnames/meshnames/internal/store/sqlite"
)

// openStore opens the store the configuration names.
func openStore(ctx context.Context, cfg config.Config, clock func() time.Time, log *slog.Logger) (store.Store, error) {
	if cfg.KubernetesEnv() {
		return openKube(ctx, cfg, clock, log)
	}
	if cfg.Postgres() {
		opts := []postgres.Option{postgres.WithLogger(log.With("component", "store"))}
		if clock != nil {
			opts = append(opts, postgres.WithClock(clock))
		}
		st, err := postgres.Open(ctx, cfg.Store.URL, opts...)
		if err != nil {
			return nil, fmt.Errorf("store.url: %w", err)
		}
		log.Info("opened the PostgreSQL store", "url", cfg.Redacted().Store.URL)
		return st, nil
	}
	if cfg.Store.Engine == config.EnginePebble {
		opts := []pebble.Option{pebble.WithLogger(log.With("component", "store"))}
		if clock != nil {
			opts = append(opts, pebble.WithClock(clock))
		}
		st, err := pebble.Open(cfg.Store.DataDir, opts...)
		if err != nil {
			return nil, err
		}
		log.Info("opened the embedded store", "dir", cfg.Store.DataDir, "engine", config.EnginePebble)
		return st, nil
	}
	if pebble.Exists(cfg.Store.DataDir) {
		// SQLite would start an empty store beside the data.
		return nil, fmt.Errorf("store.engine: the data dir %s holds a store of the pebble engine: set store.engine to pebble", cfg.Store.DataDir)
	}
	var opts []sqlite.Option
	if clock != nil {
		opts = append(opts, sqlite.WithClock(clock))
	}
	st, err := sqlite.Open(cfg.Store.DataDir, opts...)
	if err != nil {
		return nil, err
	}
	log.Info("opened the embedded store", "dir", cfg.Store.DataDir, "engine", config.EngineSQLite)
	return st, nil
}

// noBackup says, for a store that takes no backup through meshnames (not
// a store.Backuper), what backs it up instead.
func noBackup(cfg config.Config) string {
	switch {
	case cfg.KubernetesEnv():
		return "the Kubernetes store takes no backup through meshnames: its resources are in the Kubernetes API server, so back up its etcd (an etcd snapshot, or the cluster's backup tool)"
	case cfg.Postgres():
		return "the PostgreSQL store takes no backup through meshnames: back up its database with pg_dump (or PostgreSQL's own continuous archiving)"
	}
	return ""
}

// compactLoop drops tombstones older than the retention, every tenth of the
// retention (at most hourly).
func compactLoop(ctx context.Context, st store.Store, retention time.Duration, log *slog.Logger) error {
	c, ok := st.(store.Compacter)
	if !ok {
		return nil
	}
	every := min(retention/10, time.Hour)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		n, err := c.Compact(ctx, retention)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("compacting the change feed", "err", err)
		case n > 0:
			log.Debug("compacted the change feed", "tombstones", n)
		}
	}
}

// openKube opens the Kubernetes store of env kubernetes.
func openKube(ctx context.Context, cfg config.Config, clock func() time.Time, log *slog.Logger) (store.Store, error) {
	rc, err := kubeapi.Config(cfg.Kubernetes.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes.kubeconfig: %w", err)
	}
	c, err := kubeapi.New(rc)
	if err != nil {
		return nil, err
	}
	c.UserAgent = "meshnames/" + cfg.Zone
	st, err := kubestore.Open(ctx, kubestore.Options{
		Client: c, SystemNamespace: cfg.Kubernetes.SystemNamespace, Mode: cfg.Mode, Zone: cfg.Zone,
		Log: log.With("component", "store"), Now: clock,
	})
	if err != nil {
		return nil, err
	}
	log.Info("opened the Kubernetes store", "server", c.Host(), "systemNamespace", cfg.Kubernetes.SystemNamespace)
	return st, nil
}
