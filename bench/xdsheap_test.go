package bench

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/config"
	"github.com/meshnames/meshnames/internal/server/servertest"
)

// BenchmarkXDSLiveHeap is BenchmarkXDS's memory figure taken in-process:
// the control plane runs in the benchmark's process (the proxies, in
// bench/xdsload, do not), on a store seeded with MESHNAMES_BENCH_SERVICES
// MeshServices (default 10,000), and it reports the live heap, goroutine
// stacks and goroutines per proxy once MESHNAMES_BENCH_XDS_PROXIES
// proxies (default 1,000) have their first config, less with one proxy
// connected (for which the mesh's resources are built). -args -heap-profile FILE writes a heap profile with the
// proxies connected, which tells what each one holds:
//
//	go test -run '^$' -bench XDSLiveHeap -benchtime 1x -timeout 30m ./bench/ -args -heap-profile heap.pb.gz
//	go tool pprof -sample_index inuse_space -top heap.pb.gz
func BenchmarkXDSLiveHeap(b *testing.B) {
	nProxies := envInt("MESHNAMES_BENCH_XDS_PROXIES", 1000)
	nServices := envInt("MESHNAMES_BENCH_SERVICES", 10_000)
	for range b.N {
		xdsloadBinary(b)
		dir := b.TempDir()
		seedServices(b, dir, nServices)
		cfg := config.Default()
		cfg.XDS.MaxStreamsPerClient = nProxies + 16
		xdsAddrs := make(chan string, 1)
		api := servertest.Start(b, cfg, servertest.Options{DataDir: dir, XDSListening: func(a string) { xdsAddrs <- a }})
		xdsAddr := <-xdsAddrs
		c := newClient()
		dps := make([]string, nProxies)
		bodies := make([][]byte, nProxies)
		for i := range dps {
			dps[i] = fmt.Sprintf("proxy-%d", i)
			bodies[i] = proxyJSON(dps[i], i)
		}
		if _, err := putAllAt(c, func(name string) string { return dataplanePath(api, name) }, dps, bodies, 16); err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Minute)
		for {
			total, named, err := countNamed(c, api)
			if err == nil && total == nServices && named == nServices {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d named (%v)", named, total, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if _, err := putAllAt(c, func(name string) string { return dataplanePath(api, name) }, []string{"warm-0"}, [][]byte{proxyJSON("warm-0", nProxies)}, 1); err != nil {
			b.Fatal(err)
		}
		// the mesh's table is built for its first proxy: shared, not
		// counted per proxy
		startXDSClients(b, xdsAddr, "warm-", 1, 1).Connected(time.Minute)
		waitFrozen(b, c, api, nServices+nProxies+1, 5*time.Minute)
		c.CloseIdleConnections()
		heap0, stacks0, g0 := liveMemory()

		x := startXDSClients(b, xdsAddr, "proxy-", nProxies, 4)
		x.Connected(time.Duration(nProxies) * 10 * time.Second)
		time.Sleep(3 * time.Second) // the last ACKs
		heap1, stacks1, g1 := liveMemory()
		per := func(a, b uint64) float64 { return (float64(b) - float64(a)) / 1024 / float64(nProxies) }
		b.ReportMetric(per(heap0, heap1), "live-KiB/proxy")
		b.ReportMetric(per(stacks0, stacks1), "stack-KiB/proxy")
		b.ReportMetric(float64(g1-g0)/float64(nProxies), "goroutines/proxy")
		b.ReportMetric(float64(heap0)/(1<<20), "live-MiB-before")
		writeHeapProfile(b, *heapProfile)
	}
}

// liveMemory collects twice and returns the live heap, the goroutine
// stacks and the number of goroutines.
func liveMemory() (heap, stacks uint64, goroutines int) {
	heap = liveHeap()
	s := []metrics.Sample{{Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	return heap, s[0].Value.Uint64(), runtime.NumGoroutine()
}
