package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/cli"
	"github.com/meshnames/meshnames/internal/config"
	"github.com/meshnames/meshnames/internal/server/servertest"
	"github.com/meshnames/meshnames/internal/store/postgres/pgtest"
)

// Services is how many MeshServices one iteration applies.
const Services = 10_000

// writeServices writes a YAML stream of n MeshServices named
// svc-<prefix>-<i> and returns its path.
func writeServices(tb testing.TB, prefix string, n int) string {
	tb.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `---
type: MeshService
name: svc-%s-%d
mesh: default
labels:
  app: svc-%d
  team: team-%d
spec:
  selector:
    dataplaneTags:
      kuma.io/service: svc-%s-%d
  ports:
  - name: http
    port: 80
    targetPort: 8080
    appProtocol: http
  - port: 9090
    appProtocol: grpc
`, prefix, i, i, i%50, prefix, i)
	}
	path := filepath.Join(tb.TempDir(), "services.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// apply runs `meshnames apply -f path` in-process against server.
func apply(tb testing.TB, server, path string) {
	var out, errOut bytes.Buffer
	env := cli.Env{In: strings.NewReader(""), Out: &out, Err: &errOut, Now: time.Now,
		Getenv: func(k string) (string, bool) {
			if k == cli.ServerEnv {
				return server, true
			}
			return "", false
		}}
	root := cli.New(env)
	root.SetArgs([]string{"apply", "-f", path})
	if err := root.Execute(); err != nil {
		tb.Fatalf("apply: %v\n%s", err, errOut.String())
	}
	if n := strings.Count(out.String(), " created\n"); n != Services {
		tb.Fatalf("apply created %d services, want %d:\n%.2000s", n, Services, out.String())
	}
}

// BenchmarkApply10k applies 10,000 new MeshServices with `meshnames apply`
// (client-side validation, then PUTs 16 at a time) to a server on each
// backend. One op is the whole apply; services/s is the throughput.
func BenchmarkApply10k(b *testing.B) {
	for _, backend := range []string{"embedded", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			cfg := config.Default()
			if backend == "postgres" {
				cfg.Store.URL = pgtest.URL(b)
			}
			server := servertest.Start(b, cfg, servertest.Options{})
			paths := make([]string, b.N)
			for i := range b.N {
				paths[i] = writeServices(b, fmt.Sprint(i), Services)
			}
			b.ResetTimer()
			for i := range b.N {
				apply(b, server, paths[i])
			}
			b.ReportMetric(float64(Services*b.N)/b.Elapsed().Seconds(), "services/s")
		})
	}
}
