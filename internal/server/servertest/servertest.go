// Package servertest starts an in-process control plane for tests and
// benchmarks of the packages above server (cli, bench). Production code must
// not import it.
package servertest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/config"
	"github.com/meshnames/meshnames/internal/server"
)

// Options tunes Start.
type Options struct {
	// Clock, when not nil, stamps the store's times.
	Clock func() time.Time
	// NoControllers keeps controllers from writing status, for tests that
	// compare output exactly.
	NoControllers bool
	// DataDir, when set, is the embedded store's directory (for a store
	// seeded beforehand) instead of a fresh temporary one.
	DataDir string
	// XDSListening, when set, is called with the xDS (ADS) address once
	// it accepts streams.
	XDSListening func(xdsAddr string)
}

// Start runs `serve` in-process with cfg, on free loopback API and DNS
// ports (whatever cfg says: tests must pass beside a server running on the
// default ports) and, unless cfg names a store, a fresh embedded store in a
// temporary directory. It returns the API's URL and stops the server when
// tb ends.
func Start(tb testing.TB, cfg config.Config, o Options) string {
	tb.Helper()
	cfg.API.Addr = "127.0.0.1:0"
	cfg.DNS.Addr = "127.0.0.1:0"
	cfg.XDS.Addr = "127.0.0.1:0"
	if cfg.Store.URL == "" {
		cfg.Store.DataDir = o.DataDir
		if cfg.Store.DataDir == "" {
			cfg.Store.DataDir = tb.TempDir()
		}
	}
	if errs := cfg.Validate(); len(errs) > 0 {
		tb.Fatalf("servertest: invalid config: %v", errs)
	}
	srv := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), "test")
	srv.Clock = o.Clock
	srv.NoControllers = o.NoControllers
	srv.XDSListening = o.XDSListening
	addr := make(chan string, 1)
	srv.Listening = func(a string) { addr <- a }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("server: %v", err)
		}
	})
	select {
	case a := <-addr:
		return "http://" + a
	case err := <-done:
		tb.Fatalf("servertest: server did not start: %v", err)
	case <-time.After(60 * time.Second):
		tb.Fatal("servertest: server did not start within 60s")
	}
	return ""
}
