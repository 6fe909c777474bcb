package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/apiserver"
	"github.com/meshnames/meshnames/internal/audit"
	"github.com/meshnames/meshnames/internal/auth"
	"github.com/meshnames/meshnames/internal/config"
	"github.com/meshnames/meshnames/internal/history"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/token"
)

// AdminTokenFile is the file in the data directory where the first start
// writes an admin token.
const AdminTokenFile = "admin.token"

// adminTokenValidity is how long the first start's admin token is valid.
const adminTokenValidity = 8760 * time.Hour

// loadKeys loads the token keys, creating them at the first start; the
// instance that creates them writes an admin token into the data directory
// (also on PostgreSQL, where the data directory holds nothing else).
func (s *Server) loadKeys(ctx context.Context, st store.Store) (*token.Keys, error) {
	keys, err := token.LoadKeys(ctx, st)
	if err != nil {
		return nil, err
	}
	keys.RefreshInterval = s.cfg.API.Auth.RefreshInterval.D()
	if !keys.Created() {
		return keys, nil
	}
	path, id, err := writeAdminToken(ctx, keys, s.cfg.Store.DataDir)
	if err != nil {
		s.log.Error("first start: cannot write the admin token; issue one from this host with `meshnames token user --name admin --role admin`",
			"err", err)
		return keys, nil
	}
	s.log.Info("first start: wrote an admin token; keep it secret, it manages everything", "path", path, "token", id,
		"expires", time.Now().Add(adminTokenValidity).UTC().Format(time.RFC3339))
	return keys, nil
}

// writeAdminToken issues an admin token and writes it, mode 0600, to
// dir/admin.token (replacing a file left by an earlier store: its token
// was signed by keys that no longer exist). It returns the path and the
// token's ID.
func writeAdminToken(ctx context.Context, keys *token.Keys, dir string) (string, string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	c := token.Claims{ID: token.NewID(), Subject: "admin", Role: token.RoleAdmin, ExpiresAt: time.Now().Add(adminTokenValidity)}
	entry := api.AuditEntry{Subject: "meshnames", Verb: api.VerbIssueToken, Name: c.ID, Result: api.ResultSuccess,
		Reason: "the first start's admin token, written to " + AdminTokenFile}
	raw, _, err := keys.Issue(ctx, c, "first start", audit.Op(entry, 0))
	if raw == "" {
		return "", "", err
	}
	path := filepath.Join(dir, AdminTokenFile)
	tmp, err := os.CreateTemp(dir, AdminTokenFile+".*")
	if err != nil {
		return "", "", err
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if _, err := tmp.WriteString(raw + "\n"); err != nil {
		_ = tmp.Close()
		return "", "", err
	}
	if err := errors.Join(tmp.Sync(), tmp.Close()); err != nil {
		return "", "", err
	}
	if err := os.Rename(tmp.Name(), path); err != nil { // CreateTemp made it 0600
		return "", "", err
	}
	return path, c.ID, nil
}

// newGuard builds the API's authentication for a listener at addr:
// requests without a token are admin only on a loopback listener.
func (s *Server) newGuard(keys *token.Keys, addr string, reg prometheus.Registerer) *auth.Guard {
	a := s.cfg.API.Auth
	loopback := a.LoopbackAdmin && config.LoopbackAddr(addr)
	switch {
	case loopback:
		s.log.Info("the REST API listens on loopback: requests from this host without a token are admin (api.auth.loopbackAdmin)")
	case s.cfg.API.TLS.Cert == "" && !config.LoopbackAddr(addr):
		s.log.Warn("the REST API listens off loopback without TLS (--api-insecure): tokens cross the network in clear", "addr", addr)
	}
	return auth.NewGuard(auth.Options{
		Keys: keys, LoopbackAdmin: loopback, Rate: float64(a.RateLimit), Burst: a.RateBurst,
		Log: s.log.With("component", "auth"), Registerer: reg,
	})
}

// apiTLS loads the API's certificate, or returns nil when it has none.
func apiTLS(c config.APITLSConfig) (*tls.Config, error) {
	if c.Cert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.Cert, c.Key)
	if err != nil {
		return nil, fmt.Errorf("api.tls: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// compactRecordsLoop drops audit entries and history events older than
// their retention, every tenth of the shorter one (at most hourly).
func compactRecordsLoop(ctx context.Context, st store.Store, cfg config.Config, log *slog.Logger) error {
	rec, ok := st.(store.Recorder)
	if !ok {
		return nil
	}
	streams := []struct {
		name      string
		retention time.Duration
	}{{audit.Stream, cfg.Audit.Retention.D()}, {history.Stream, cfg.History.Retention.D()}}
	every := min(streams[0].retention/10, streams[1].retention/10, time.Hour)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		for _, s := range streams {
			n, err := rec.CompactRecords(ctx, s.name, time.Now().Add(-s.retention))
			switch {
			case err != nil && ctx.Err() == nil:
				log.Warn("compacting records", "stream", s.name, "err", err)
			case n > 0:
				log.Debug("compacted records", "stream", s.name, "records", n)
			}
		}
	}
}

// apiLimits converts the configured limits of a request.
func apiLimits(l config.APILimitsConfig) apiserver.Limits {
	return apiserver.Limits{MaxBodyBytes: int64(l.MaxBodyBytes), MaxApplyBytes: int64(l.MaxApplyBytes), MaxApplyDocuments: l.MaxApplyDocuments}
}
