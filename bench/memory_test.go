package bench

import (
	"flag"
	"net/http"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/config"
	"github.com/meshnames/meshnames/internal/server/servertest"
)

var heapProfile = flag.String("heap-profile", "", "BenchmarkLiveHeap: write a heap profile of the named server to this file")

// liveHeap collects twice and returns the bytes of live heap objects.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// heapUnused returns the heap memory in spans that hold live objects but
// is free: what the runtime cannot return to the OS because objects are
// scattered.
func heapUnused() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/unused:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// BenchmarkLiveHeap measures the live heap per service of a control plane
// run in-process on a store seeded with 100,000 MeshServices, once every
// service is named and has a VIP, the DNS table is built and the cache
// has frozen the resources that stopped changing. It is the
// in-process companion of BenchmarkIdle (which reads the RSS of a real
// process) and tells which part holds the memory: run it with
// -args -heap-profile FILE and read FILE with `go tool pprof -sample_index
// inuse_space`.
func BenchmarkLiveHeap(b *testing.B) {
	const n = 100_000
	for range b.N {
		dir := b.TempDir()
		seedServices(b, dir, n)
		base := liveHeap()
		cfg := config.Default()
		api := servertest.Start(b, cfg, servertest.Options{DataDir: dir})
		c := newClient()
		deadline := time.Now().Add(10 * time.Minute)
		for {
			s, err := getService(c, api, seededName(n-1))
			if err == nil && s.named() {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s not named: %v", seededName(n-1), err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		for {
			total, named, err := countNamed(c, api)
			if err != nil {
				b.Fatal(err)
			}
			if total != n {
				b.Fatalf("the API lists %d MeshServices, want %d", total, n)
			}
			if named == n {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d named", named, n)
			}
			time.Sleep(500 * time.Millisecond)
		}
		for {
			resp, err := c.Get(api + "/readyz")
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		// The steady state: the echoes of the last status writes have
		// reached every part and the cache has frozen what stopped changing.
		waitFrozen(b, c, api, n, 5*time.Minute)
		c.CloseIdleConnections()
		live := liveHeap()
		b.ReportMetric(float64(live-base)/n, "live-B/service")
		b.ReportMetric(float64(live)/(1<<20), "live-MiB")
		b.ReportMetric(float64(heapUnused())/(1<<20), "unused-MiB")
		writeHeapProfile(b, *heapProfile)
	}
}
