package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/auth"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlite"
	"github.com/meshnames/meshnames/internal/token"
)

// BenchmarkPutCreate measures creates through the API (PUT of a new
// MeshService each, durable in the embedded store, 8 concurrent clients)
// with security off, with the guard on and requests admin without a token
// (loopback: the audit entry is written, no token is checked), and with a
// bearer token checked on every request. token vs loopback is the cost
// of the token check; loopback vs off the cost of the audit entry.
func BenchmarkPutCreate(b *testing.B) {
	for _, mode := range []string{"off", "loopback", "token"} {
		b.Run("security="+mode, func(b *testing.B) {
			st, err := sqlite.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			ctx := context.Background()
			if _, err := store.Create(ctx, st, &resource.Object{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}}); err != nil {
				b.Fatal(err)
			}
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			c := cache.New(st, log, nil)
			cctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { c.Run(cctx); close(done) }()
			defer func() { cancel(); <-done }()
			for synced, _ := c.Status(); !synced; synced, _ = c.Status() {
				time.Sleep(time.Millisecond)
			}
			o := Options{Cache: c, Admission: admission.New(admission.Options{Store: st, Cache: c, Mode: "standalone", Zone: "east"}),
				Store: st, Log: log, Registry: prometheus.NewRegistry()}
			var bearer string
			if mode != "off" {
				keys, err := token.LoadKeys(ctx, st)
				if err != nil {
					b.Fatal(err)
				}
				o.Keys = keys
				o.Admission = admission.New(admission.Options{Store: AuditingStore(st), Cache: c, Mode: "standalone", Zone: "east"})
				o.Auth = auth.NewGuard(auth.Options{Keys: keys, LoopbackAdmin: mode == "loopback", Log: log})
				if mode == "token" {
					if bearer, err = keys.Sign(token.Claims{Subject: "bench", Role: token.RoleOperator, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
						b.Fatal(err)
					}
				}
			}
			srv := httptest.NewServer(New(o).Handler())
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			var n atomic.Int64
			b.SetParallelism(4) // 8 clients on 2 cores
			cpu0 := cpuTime()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					name := fmt.Sprintf("svc-%d", n.Add(1))
					body := []byte(`{"type":"MeshService","name":"` + name + `","mesh":"default","spec":{"ports":[{"port":80,"targetPort":8080,"appProtocol":"http"}]}}`)
					req, _ := http.NewRequest(http.MethodPut, srv.URL+"/meshes/default/meshservices/"+name, bytes.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Prefer", "return=minimal")
					if bearer != "" {
						req.Header.Set("Authorization", "Bearer "+bearer)
					}
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusCreated {
						b.Errorf("PUT %s = %d", name, resp.StatusCode)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
			// CPU time per create (server and clients, this process) is
			// what a CPU-bound server's throughput is the inverse of, and
			// it suffers less than wall time from other load on the machine.
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/create")
		})
	}
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGuardCheck measures what the guard costs one request: a token
// verified before (the cache), and a token never seen (a full Ed25519
// verification, as for the first request of each token).
func BenchmarkGuardCheck(b *testing.B) {
	st, err := sqlite.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	keys, err := token.LoadKeys(context.Background(), st)
	if err != nil {
		b.Fatal(err)
	}
	// The rate limiter is on, with a rate no request reaches, so that its
	// bookkeeping is measured too.
	g := auth.NewGuard(auth.Options{Keys: keys, Rate: 1e9, Burst: 1e9, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	a := auth.Action{Class: auth.Write, Method: http.MethodPut, Kind: resource.MeshService, Mesh: "default"}
	sign := func(i int) string {
		raw, err := keys.Sign(token.Claims{ID: fmt.Sprintf("t%d", i), Subject: "bench", Role: token.RoleOperator, ExpiresAt: time.Now().Add(time.Hour)})
		if err != nil {
			b.Fatal(err)
		}
		return raw
	}
	req := httptest.NewRequest(http.MethodPut, "/meshes/default/meshservices/x", nil)
	b.Run("cached", func(b *testing.B) {
		req.Header.Set("Authorization", "Bearer "+sign(0))
		for b.Loop() {
			if _, ref := g.Check(req, a); ref != nil {
				b.Fatal(ref.Detail)
			}
		}
	})
	b.Run("first-use", func(b *testing.B) {
		raws := make([]string, b.N)
		for i := range raws {
			raws[i] = sign(i + 1)
		}
		b.ResetTimer()
		for i := range b.N {
			req.Header.Set("Authorization", "Bearer "+raws[i])
			if _, ref := g.Check(req, a); ref != nil {
				b.Fatal(ref.Detail)
			}
		}
	})
}
