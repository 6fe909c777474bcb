package bench

// The benchmark's side of bench/xdsload (xdsloadtest).

import (
	"path/filepath"
	"testing"

	"github.com/meshnames/meshnames/bench/xdsload/xdsloadtest"
)

// xdsloadBinary builds bench/xdsload once, beside the meshnames binary
// (removed by TestMain).
func xdsloadBinary(tb testing.TB) string {
	tb.Helper()
	return xdsloadtest.Build(tb, filepath.Dir(meshnamesBinary(tb)))
}

// startXDSClients runs xdsload with n proxies <prefix>0..n-1 of mesh
// default against the ADS address, concurrency of them connecting at once.
func startXDSClients(tb testing.TB, addr, prefix string, n, concurrency int) *xdsloadtest.Clients {
	tb.Helper()
	return xdsloadtest.Start(tb, xdsloadBinary(tb), xdsloadtest.Options{Addr: addr, Prefix: prefix, N: n, Concurrency: concurrency})
}
