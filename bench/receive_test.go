package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkZoneReceive measures what one zone spends receiving a
// federation, with nothing else running but the global: the part of
// BenchmarkMultizone that every zone pays and that its eleven processes
// sharing two cores make noisy (about ±10% from run to run there).
//
// Before the timer: a global and MESHNAMES_BENCH_ZONES-1 feeder zones
// (default 9), each seeded with MESHNAMES_BENCH_SERVICES MeshServices
// (default 10,000), sync; then the feeders stop. Each iteration then
// starts zone "r" on a new data directory seeded with as many services of
// its own, as a zone restored from nothing, and stops it once its cache
// holds its own and every feeder's services. It reports, as the mean of
// the iterations:
//
//   - receive-s: from starting zone r to that;
//   - zone-cpu-s: zone r's CPU time (user and system) by then, and
//     zone-cpu-us/service the same per service it holds (its own are
//     named, the others received and named);
//   - global-cpu-s: the global's CPU time meanwhile;
//
// and zone-peak-rss-MiB, the most resident memory of any iteration's zone.
//
// MESHNAMES_BENCH_PROFILE_DIR=DIR writes zone r's CPU and allocation
// profiles of each iteration there (zone-receive-N.cpu, .alloc).
func BenchmarkZoneReceive(b *testing.B) {
	feeders := envInt("MESHNAMES_BENCH_ZONES", 10) - 1
	nServices := envInt("MESHNAMES_BENCH_SERVICES", 10_000)
	profDir := os.Getenv("MESHNAMES_BENCH_PROFILE_DIR")
	if profDir != "" {
		if err := os.MkdirAll(profDir, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	if feeders < 1 {
		b.Fatal("MESHNAMES_BENCH_ZONES must be at least 2: a feeder and the receiving zone")
	}
	c := newClient()
	zones := []string{"r"}
	for i := range feeders {
		zones = append(zones, fmt.Sprintf("f%d", i))
	}
	fed := startGlobal(b, c, zones, nil)
	global := fed.global
	procs := make([]*serverProc, feeders)
	for i, z := range zones[1:] {
		dir := b.TempDir()
		seedZone(b, dir, z, nServices)
		procs[i] = fed.startZone(b, nil, z, dir, fed.syncAddr)
	}
	waitSynced(b, c, global.api, zones[1:], []*serverProc{global}, float64(feeders*nServices))
	for _, p := range procs {
		p.stop()
	}
	want := float64((feeders + 1) * nServices)

	b.ResetTimer()
	var cpu, globalCPU, wall time.Duration
	var peak int64
	for i := range b.N {
		b.StopTimer()
		dir := b.TempDir()
		seedZone(b, dir, "r", nServices)
		var env []string
		if profDir != "" {
			name := filepath.Join(profDir, fmt.Sprintf("zone-receive-%d", i))
			env = []string{"MESHNAMES_CPU_PROFILE=" + name + ".cpu", "MESHNAMES_ALLOC_PROFILE=" + name + ".alloc"}
		}
		g0, err := cpuTime(global.pid())
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		zone := fed.startZone(b, env, "r", dir, fed.syncAddr)
		waitSynced(b, c, global.api, []string{"r"}, []*serverProc{zone}, want)
		wall += time.Since(start)
		b.StopTimer()
		d, err := cpuTime(zone.pid())
		if err != nil {
			b.Fatal(err)
		}
		cpu += d
		g1, err := cpuTime(global.pid())
		if err != nil {
			b.Fatal(err)
		}
		globalCPU += g1 - g0
		if r, err := peakRSS(zone.pid()); err == nil {
			peak = max(peak, r)
		}
		zone.stop()
		b.StartTimer()
	}
	b.StopTimer()
	n := time.Duration(b.N)
	b.ReportMetric((wall / n).Seconds(), "receive-s")
	b.ReportMetric((cpu / n).Seconds(), "zone-cpu-s")
	b.ReportMetric(float64((cpu/n).Microseconds())/want, "zone-cpu-us/service")
	b.ReportMetric((globalCPU / n).Seconds(), "global-cpu-s")
	b.ReportMetric(float64(peak)/(1<<20), "zone-peak-rss-MiB")
}
