package bench

// Benchmark of the xDS control plane (issue 46, ARCHITECTURE.md section
// 11) with simulated delta ADS clients in a process of their own
// (bench/xdsload), recorded in docs/performance.md under "xDS".
//
//	go test -run '^$' -bench XDS -benchtime 1x -v -timeout 60m ./bench/

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/meshnames/meshnames/bench/xdsload/xdsloadtest"
)

// proxyJSON is a Dataplane for a proxy that only calls out: no inbound.
func proxyJSON(name string, i int) []byte {
	return fmt.Appendf(nil, `{"type":"Dataplane","name":%q,"mesh":"default","spec":{"networking":{"address":"10.200.%d.%d"}}}`,
		name, i>>8&0xff, i&0xff)
}

// backendJSON is a Dataplane with one inbound of MeshService svc (as
// serviceJSON selects it: tag kuma.io/service, port 8080), in state.
func backendJSON(name, svc string, i int, state string) []byte {
	return fmt.Appendf(nil, `{"type":"Dataplane","name":%q,"mesh":"default","spec":{"networking":{"address":"10.100.%d.%d",`+
		`"inbound":[{"port":8080,"tags":{"kuma.io/service":%q},"state":%q}]}}}`,
		name, i>>8&0xff, i&0xff, svc, state)
}

func dataplanePath(api, name string) string { return api + "/meshes/default/dataplanes/" + name }

// putDataplane writes a Dataplane (created or replaced) and returns when
// the API acknowledged it.
func putDataplane(tb testing.TB, c *http.Client, api, name string, body []byte) time.Time {
	tb.Helper()
	code, msg, err := restLoadDo(c, http.MethodPut, dataplanePath(api, name), body)
	if err != nil || code != http.StatusOK && code != http.StatusCreated {
		tb.Fatalf("PUT Dataplane %s: %d %s %v", name, code, msg, err)
	}
	return time.Now()
}

// BenchmarkXDS measures ADS with MESHNAMES_BENCH_XDS_PROXIES delta
// clients (default 1,000) in one mesh of MESHNAMES_BENCH_SERVICES
// MeshServices (default 10,000), against a real `meshnames serve` on the
// embedded store. The services (one http port each), a Dataplane per
// proxy (no inbound) and one backend Dataplane for each of the first
// MESHNAMES_BENCH_XDS_ROUNDS services (default 20) are created through the
// REST API, and every service is named with a VIP, before any proxy
// connects. Then:
//
//   - mesh-first-config-ms: one proxy connects first (warm-0, its own
//     xdsload), for which the control plane builds the mesh's resources
//     (they are kept while a proxy uses them); from starting xdsload to
//     its first config;
//   - first-config: bench/xdsload connects the proxies,
//     MESHNAMES_BENCH_XDS_CONNECT at a time (default 1: each proxy's time
//     alone, with those before it connected and idle); from before it
//     dials to its ACK of the last of CDS, EDS and LDS, which must hold
//     every service;
//   - rss-KiB/proxy and heap-KiB/proxy: the server's RSS (and Go heap in
//     use) with every proxy connected, less with only the first one
//     (the mesh's shared resources built), both settled (the cache froze what stopped changing, the memory of the
//     last burst returned), over the proxies; MESHNAMES_BENCH_XDS_MEMORY=0
//     skips the settling (about 40 s) and these figures;
//   - new-service: ROUNDS new MeshServices, one at a time, from the PUT's
//     acknowledgment to each proxy's ACK of the service's outbound listener
//     (which needs its VIP: the write, the VIP controller's status write
//     and the push are all in it);
//   - endpoint: ROUNDS backend inbounds flipped NotReady, from the PUT's
//     acknowledgment to each proxy's ACK of the new load assignment;
//   - *-cpu-µs/proxy: the server's CPU from before each such PUT to the
//     first quiet 200 ms after every proxy had it, over the proxies (it
//     includes the API write, naming and the VIP, about 0.2 ms per change
//     without proxies); *-xdsload-cpu-µs/proxy the same of the clients,
//     which share the machine's cores with the server; *-responses/proxy
//     how many responses a change took per proxy.
//
// Latencies are taken from both processes' wall clocks, on one host.
// MESHNAMES_BENCH_PROFILE_DIR=DIR writes the server's CPU profile and its
// heap profile (taken with the proxies connected, at the end) there.
func BenchmarkXDS(b *testing.B) {
	nProxies := envInt("MESHNAMES_BENCH_XDS_PROXIES", 1000)
	nServices := envInt("MESHNAMES_BENCH_SERVICES", 10_000)
	rounds := min(envInt("MESHNAMES_BENCH_XDS_ROUNDS", 20), nServices)
	connect := envInt("MESHNAMES_BENCH_XDS_CONNECT", 1)
	memory := os.Getenv("MESHNAMES_BENCH_XDS_MEMORY") != "0"
	profDir := os.Getenv("MESHNAMES_BENCH_PROFILE_DIR")
	b.Run(fmt.Sprintf("proxies=%d/services=%d", nProxies, nServices), func(b *testing.B) {
		for range b.N {
			benchXDS(b, nProxies, nServices, rounds, connect, memory, profDir)
		}
	})
}

func benchXDS(b *testing.B, nProxies, nServices, rounds, connect int, memory bool, profDir string) {
	xdsloadBinary(b) // built before anything is timed
	c := newClient()
	var env []string
	if profDir != "" {
		env = []string{"MESHNAMES_CPU_PROFILE=" + filepath.Join(profDir, "xds.cpu"),
			"MESHNAMES_ALLOC_PROFILE=" + filepath.Join(profDir, "xds.alloc")}
	}
	env = append(env, fmt.Sprintf("MESHNAMES_XDS_MAX_STREAMS_PER_CLIENT=%d", nProxies+16))
	xdsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(b))
	p := startServerEnv(b, env, "--data-dir", b.TempDir(), "--xds-addr", xdsAddr, "--log-level", "warn")
	p.waitReady(c, time.Minute)
	load0 := loadAverage(b)

	names := make([]string, nServices)
	bodies := make([][]byte, nServices)
	for i := range names {
		names[i] = seededName(i)
		bodies[i] = serviceJSON(names[i])
	}
	if _, err := putAll(c, p.api, names, bodies, 16); err != nil {
		b.Fatal(err)
	}
	for i := range rounds {
		putDataplane(b, c, p.api, fmt.Sprintf("backend-%d", i), backendJSON(fmt.Sprintf("backend-%d", i), seededName(i), i, "Ready"))
	}
	dps := make([]string, nProxies)
	dpBodies := make([][]byte, nProxies)
	for i := range dps {
		dps[i] = fmt.Sprintf("proxy-%d", i)
		dpBodies[i] = proxyJSON(dps[i], i)
	}
	dps, dpBodies = append(dps, "warm-0"), append(dpBodies, proxyJSON("warm-0", nProxies))
	if _, err := putAllAt(c, func(name string) string { return dataplanePath(p.api, name) }, dps, dpBodies, 16); err != nil {
		b.Fatal(err)
	}
	waitNamed(b, c, p, nServices, 5*time.Minute)

	// The mesh's resources are built when its first proxy connects (and
	// kept while one is connected): that proxy's first config includes
	// building them, and the memory per proxy is beyond them.
	meshStart := time.Now()
	warm := startXDSClients(b, xdsAddr, "warm-", 1, 1)
	warmConfig := warm.Connected(5 * time.Minute)
	meshFirst := time.Since(meshStart)

	var rss0, heap0 int64
	if memory {
		settle(b, c, []*serverProc{p}, 5*time.Minute)
		rss0, heap0 = memoryOf(b, c, p)
	}

	b.ResetTimer()
	start := time.Now()
	x := startXDSClients(b, xdsAddr, "proxy-", nProxies, connect)
	configs := x.Connected(time.Duration(nProxies) * 10 * time.Second)
	connectTook := time.Since(start)
	first := make([]time.Duration, len(configs))
	for i, fc := range configs {
		if fc.Clusters != nServices || fc.Assignments != nServices || fc.Listener != nServices {
			b.Fatalf("a first config held %d clusters, %d load assignments and %d listeners, want %d of each", fc.Clusters, fc.Assignments, fc.Listener, nServices)
		}
		first[i] = fc.Took
	}
	slices.Sort(first)

	b.Logf("the mesh's first proxy: its first config %.1f ms after it dialed, %.1f ms after xdsload started; then first configs: p50 %.1f ms, p99 %.1f ms, max %.1f ms; all %d connected in %.1f s",
		ms(warmConfig[0].Took), ms(meshFirst), ms(percentile(first, 0.5)), ms(percentile(first, 0.99)), ms(first[len(first)-1]), nProxies, connectTook.Seconds())

	var rss1, heap1 int64
	var idle float64
	if memory {
		// Idle proxies cost a little CPU (HTTP/2 keepalive pings every
		// 30 s each): idle-cores measures it.
		settleBelow(b, c, []*serverProc{p}, 5*time.Minute, 100*time.Millisecond)
		rss1, heap1 = memoryOf(b, c, p)
		idle = idleCores(b, p)
	}

	var created, flipped []time.Duration
	var createdCPU, flippedCPU, createdClients, flippedClients time.Duration
	pushes0 := xdsPushes(b, c, p)
	for i := range rounds {
		name := fmt.Sprintf("new-%d", i)
		lat, cpu, ccpu := pushRound(b, c, x, p, "outbound:"+name+"_msvc_80", func() time.Time {
			if err := putService(c, p.api, name, serviceJSON(name), true); err != nil {
				b.Fatal(err)
			}
			return time.Now()
		})
		created, createdCPU, createdClients = append(created, lat...), createdCPU+cpu, createdClients+ccpu
	}
	pushes1 := xdsPushes(b, c, p)
	for i := range rounds {
		dp := fmt.Sprintf("backend-%d", i)
		lat, cpu, ccpu := pushRound(b, c, x, p, seededName(i)+"_msvc_80", func() time.Time {
			return putDataplane(b, c, p.api, dp, backendJSON(dp, seededName(i), i, "NotReady"))
		})
		flipped, flippedCPU, flippedClients = append(flipped, lat...), flippedCPU+cpu, flippedClients+ccpu
	}
	pushes2 := xdsPushes(b, c, p)
	b.StopTimer()
	load1 := loadAverage(b)
	if profDir != "" {
		p.stop()
	}

	slices.Sort(created)
	slices.Sort(flipped)
	connected := nProxies + 1 // and warm-0
	b.ReportMetric(ms(percentile(first, 0.5)), "first-config-p50-ms")
	b.ReportMetric(ms(percentile(first, 0.99)), "first-config-p99-ms")
	b.ReportMetric(ms(first[len(first)-1]), "first-config-max-ms")
	b.ReportMetric(connectTook.Seconds(), "connect-all-s")
	b.ReportMetric(ms(meshFirst), "mesh-first-config-ms")
	b.ReportMetric(ms(percentile(created, 0.5)), "new-service-p50-ms")
	b.ReportMetric(ms(percentile(created, 0.99)), "new-service-p99-ms")
	b.ReportMetric(ms(created[len(created)-1]), "new-service-max-ms")
	b.ReportMetric(ms(percentile(flipped, 0.5)), "endpoint-p50-ms")
	b.ReportMetric(ms(percentile(flipped, 0.99)), "endpoint-p99-ms")
	b.ReportMetric(ms(flipped[len(flipped)-1]), "endpoint-max-ms")
	perPush := func(d time.Duration) float64 {
		return float64(d.Microseconds()) / float64(rounds*connected)
	}
	// responses sent per change and proxy: 3 for a new service (its
	// cluster, load assignment and listener), 1 for an endpoint
	b.ReportMetric((pushes1-pushes0)/float64(rounds*connected), "new-service-responses/proxy")
	b.ReportMetric((pushes2-pushes1)/float64(rounds*connected), "endpoint-responses/proxy")
	b.ReportMetric(perPush(createdCPU), "new-service-cpu-µs/proxy")
	b.ReportMetric(perPush(flippedCPU), "endpoint-cpu-µs/proxy")
	b.ReportMetric(perPush(createdClients), "new-service-xdsload-cpu-µs/proxy")
	b.ReportMetric(perPush(flippedClients), "endpoint-xdsload-cpu-µs/proxy")
	if memory {
		b.ReportMetric(float64(rss1-rss0)/1024/float64(nProxies), "rss-KiB/proxy")
		b.ReportMetric(float64(heap1-heap0)/1024/float64(nProxies), "heap-KiB/proxy")
		b.ReportMetric(idle, "idle-cores")
		b.Logf("RSS %.1f MiB before the proxies, %.1f MiB with them; heap in use %.1f and %.1f MiB",
			float64(rss0)/(1<<20), float64(rss1)/(1<<20), float64(heap0)/(1<<20), float64(heap1)/(1<<20))
	}
	b.ReportMetric(max(load0, load1), "load-avg")
	b.Logf("load average %.1f before, %.1f after", load0, load1)
}

// xdsPushes returns how many responses the server sent, of every type.
func xdsPushes(b *testing.B, c *http.Client, p *serverProc) float64 {
	b.Helper()
	sum := 0.0
	for _, typ := range []string{"CDS", "EDS", "LDS"} {
		v, err := metric(c, p.api, `meshnames_xds_pushes_total{type="`+typ+`"}`)
		if err != nil {
			b.Fatal(err)
		}
		sum += v
	}
	return sum
}

// memoryOf returns the server's RSS and Go heap in use.
func memoryOf(b *testing.B, c *http.Client, p *serverProc) (rssBytes, heapBytes int64) {
	b.Helper()
	r, err := rss(p.pid())
	if err != nil {
		b.Fatal(err)
	}
	h, err := metric(c, p.api, heapInuse)
	if err != nil {
		b.Fatal(err)
	}
	return r, int64(h)
}

// pushRound sets a watch for resource name on every proxy, waits for a
// quiet server and xdsload, makes the change with write (which returns
// when the API acknowledged it) and returns each proxy's latency from then
// to its ACK of name, and the CPU of the server and of xdsload from before
// write until both were quiet again.
func pushRound(b *testing.B, c *http.Client, x *xdsloadtest.Clients, p *serverProc, name string, write func() time.Time) (lat []time.Duration, server, clients time.Duration) {
	b.Helper()
	var returns0 float64
	lats, cpu := awaitPush(b, []watched{{x, name}}, []int{p.pid(), x.Pid()}, func() time.Time {
		returns0 = memoryReturns(c, []*serverProc{p})
		return write()
	})
	returns := memoryReturns(c, []*serverProc{p}) - returns0
	sorted := slices.Sorted(slices.Values(lats[0]))
	// a return of memory to the OS (a full collection, and the heap
	// locked while it is released) in the round shows in its CPU
	b.Logf("%s: p50 %.1f ms, max %.1f ms; CPU %s (server), %s (xdsload); %.0f returns of memory; load average %.1f",
		name, ms(percentile(sorted, 0.5)), ms(sorted[len(sorted)-1]), cpu[0], cpu[1], returns, loadAverage(b))
	return lats[0], cpu[0], cpu[1]
}

// watched is a resource the proxies of one xdsload are to receive.
type watched struct {
	x    *xdsloadtest.Clients
	name string
}

// awaitPush sets the watches ws, waits until the processes pids are quiet,
// makes the change with write (which returns when the API acknowledged
// it) and returns, per watch, each proxy's latency from then to its ACK
// of the resource, and the CPU each of pids used from before write until
// all were quiet again. Each proxy must receive one version.
func awaitPush(b *testing.B, ws []watched, pids []int, write func() time.Time) (lat [][]time.Duration, cpu []time.Duration) {
	b.Helper()
	for _, w := range ws {
		w.x.Watch(w.name)
	}
	cpu0 := quietCPU(b, pids)
	ack := write()
	lat = make([][]time.Duration, len(ws))
	for i, w := range ws {
		// xdsload timed each ACK itself: waiting for the watches one after
		// another does not delay what they measure
		seen := w.x.Seen(w.name, time.Minute)
		at, versions := seen.At, seen.Versions
		if len(versions) != 1 {
			b.Errorf("the proxies received %d versions of %s: %v", len(versions), w.name, versions)
		}
		lat[i] = make([]time.Duration, len(at))
		for j, t := range at {
			lat[i][j] = t.Sub(ack)
		}
	}
	cpu1 := quietCPU(b, pids)
	cpu = make([]time.Duration, len(pids))
	for i := range pids {
		cpu[i] = cpu1[i] - cpu0[i]
	}
	return lat, cpu
}

// quietCPU waits for 200 ms in which the processes pids used under two
// clock ticks (20 ms) of CPU together and returns the CPU time of each at
// their start.
func quietCPU(b *testing.B, pids []int) []time.Duration {
	b.Helper()
	read := func() ([]time.Duration, time.Duration) {
		out := make([]time.Duration, len(pids))
		var sum time.Duration
		for i, pid := range pids {
			d, err := cpuTime(pid)
			if err != nil {
				b.Fatal(err)
			}
			out[i], sum = d, sum+d
		}
		return out, sum
	}
	deadline := time.Now().Add(time.Minute)
	for {
		c0, s0 := read()
		time.Sleep(200 * time.Millisecond)
		_, s1 := read()
		if s1-s0 < 2*time.Second/clockTicks {
			return c0
		}
		if time.Now().After(deadline) {
			b.Fatalf("the server and xdsload used %s of CPU in 200 ms, a minute after a change", s1-s0)
		}
	}
}
