package bench

// Benchmark of a new service reaching the proxies of other zones (issue
// 47): the zone sync and the xDS push together, with simulated delta ADS
// clients (bench/xdsload), recorded in docs/performance.md under "xDS".

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshnames/meshnames/bench/xdsload/xdsloadtest"
	"github.com/meshnames/meshnames/internal/config"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/xds"
	"github.com/meshnames/meshnames/internal/zonesync"
)

// zoneIngressJSON is a ZoneIngress named ingress at address:10001.
func zoneIngressJSON(address string) []byte {
	return fmt.Appendf(nil, `{"type":"ZoneIngress","name":"ingress","networking":{"address":%q,"port":10001}}`, address)
}

// BenchmarkXDSMultizone runs a global and MESHNAMES_BENCH_ZONES zones
// (default 10) on embedded stores, each seeded with
// MESHNAMES_BENCH_SERVICES MeshServices (default 1,000; exported, as
// services.exportDefault has it, so every zone holds every zone's) and
// given a ZoneIngress through its API (other zones' clusters reach a
// zone's services through it), and MESHNAMES_BENCH_XDS_PROXIES proxies
// per zone (default 100): a Dataplane without inbound each, connected by
// one xdsload per zone to its zone's ADS server once every zone holds
// every service with a VIP. Unless MESHNAMES_BENCH_SETTLE=0, it then
// waits for the federation to settle (as BenchmarkMultizone does: about
// 40 s, the caches freezing what the sync decoded). Then
// MESHNAMES_BENCH_XDS_ROUNDS times (default 20) it creates a MeshService
// through zone z0's API and times, from the PUT's acknowledgment:
//
//   - cross-zone: each proxy of every other zone ACKing the synced
//     service's outbound listener (outbound:<synced name>_msvc_80): z0's
//     write, the sync through the global, the receiving zone's store, its
//     VIP and the push are all in it. The listener is the last of the
//     service's resources a proxy gets (its cluster and load assignment,
//     whose endpoint is z0's ingress, come before it);
//   - local: each proxy of z0 ACKing the service's own outbound listener,
//     the same figure for one zone, from the same writes (below zero when
//     the proxies ACKed before the benchmark read the PUT's answer);
//
// each as p50, p99 and max over rounds x proxies, and the CPU per change
// of the zones, the global and the xdsloads (from before each PUT until
// every process is quiet again). load-avg is the machine's highest
// 1-minute load average seen. Once, it checks that a proxy of z1 has the
// last service's cluster with z0's ingress as its endpoint, by the SNI.
func BenchmarkXDSMultizone(b *testing.B) {
	nZones := envInt("MESHNAMES_BENCH_ZONES", 10)
	nServices := envInt("MESHNAMES_BENCH_SERVICES", 1000)
	nProxies := envInt("MESHNAMES_BENCH_XDS_PROXIES", 100)
	rounds := envInt("MESHNAMES_BENCH_XDS_ROUNDS", 20)
	settled := os.Getenv("MESHNAMES_BENCH_SETTLE") != "0"
	if nZones < 2 {
		b.Fatal("MESHNAMES_BENCH_ZONES must be at least 2: the zone that creates and one that receives")
	}
	b.Run(fmt.Sprintf("zones=%d/services=%d/proxies=%d", nZones, nServices, nProxies), func(b *testing.B) {
		for range b.N {
			benchXDSMultizone(b, nZones, nServices, nProxies, rounds, settled)
		}
	})
}

func benchXDSMultizone(b *testing.B, nZones, nServices, nProxies, rounds int, settled bool) {
	xdsloadBinary(b) // built before anything is timed
	c := newClient()
	load := loadAverage(b)
	zones := make([]string, nZones)
	for i := range zones {
		zones[i] = fmt.Sprintf("z%d", i)
	}
	fed := startGlobal(b, c, zones, nil)
	procs := make([]*serverProc, nZones)
	xdsAddrs := make([]string, nZones)
	env := []string{fmt.Sprintf("MESHNAMES_XDS_MAX_STREAMS_PER_CLIENT=%d", nProxies+16)}
	for i, z := range zones {
		dir := b.TempDir()
		seedZone(b, dir, z, nServices)
		xdsAddrs[i] = fmt.Sprintf("127.0.0.1:%d", freePort(b))
		procs[i] = fed.startZone(b, env, z, dir, fed.syncAddr, "--xds-addr", xdsAddrs[i])
	}
	all := append([]*serverProc{fed.global}, procs...)
	start := time.Now()
	total := nZones * nServices
	waitSynced(b, c, fed.global.api, zones, procs, float64(total))
	synced := time.Since(start)

	ingress := func(i int) string { return fmt.Sprintf("10.250.0.%d", i+1) }
	dps := make([]string, nProxies)
	dpBodies := make([][]byte, nProxies)
	for i := range dps {
		dps[i] = fmt.Sprintf("proxy-%d", i)
		dpBodies[i] = proxyJSON(dps[i], i)
	}
	for i, p := range procs {
		if err := putResource(c, p.api+"/zoneingresses/ingress", zoneIngressJSON(ingress(i)), true); err != nil {
			b.Fatal(err)
		}
		if _, err := putAllAt(c, func(name string) string { return dataplanePath(p.api, name) }, dps, dpBodies, 16); err != nil {
			b.Fatal(err)
		}
	}
	// Every zone holds every zone's ingress and every service with a VIP
	// before a proxy connects, so that a first config is complete.
	waitMetrics(b, c, procs, map[string]float64{
		`meshnames_cache_objects{kind="ZoneIngress"}`: float64(nZones),
		vipsUsed: float64(total),
	}, 5*time.Minute)
	quietCPU(b, pids(all)) // the statuses with those VIPs written and seen

	// One xdsload per zone: a zone's proxies reach its own ADS server.
	connectStart := time.Now()
	xs := make([]*xdsloadtest.Clients, nZones)
	for i := range zones {
		xs[i] = startXDSClients(b, xdsAddrs[i], "proxy-", nProxies, 1)
	}
	var first []time.Duration
	for _, x := range xs {
		for _, fc := range x.Connected(time.Duration(nProxies) * 10 * time.Second) {
			if fc.Clusters != total || fc.Listener != total {
				b.Fatalf("a first config held %d clusters and %d listeners, want %d of each", fc.Clusters, fc.Listener, total)
			}
			first = append(first, fc.Took)
		}
	}
	connected := time.Since(connectStart)
	slices.Sort(first)
	b.Logf("initial sync %.1f s; %d proxies connected in %.1f s, first configs p50 %.1f ms, p99 %.1f ms, max %.1f ms",
		synced.Seconds(), len(first), connected.Seconds(), ms(percentile(first, 0.5)), ms(percentile(first, 0.99)), ms(first[len(first)-1]))
	if settled {
		settle(b, c, all, 5*time.Minute)
	}
	load = max(load, loadAverage(b))

	roundPids := pids(all)
	for _, x := range xs {
		roundPids = append(roundPids, x.Pid())
	}
	b.ResetTimer()
	var local, remote []time.Duration
	var zonesCPU, globalCPU, clientsCPU time.Duration
	var last string
	for r := range rounds {
		last = fmt.Sprintf("xz-%d", r)
		syncedName := zonesync.HashedName(resource.MeshService, "default", last, zones[0], "")
		ws := []watched{{xs[0], xds.OutboundName(last + "_msvc_80")}}
		for _, x := range xs[1:] {
			ws = append(ws, watched{x, xds.OutboundName(syncedName + "_msvc_80")})
		}
		returns0 := memoryReturns(c, all)
		lat, cpu := awaitPush(b, ws, roundPids, func() time.Time {
			if err := putService(c, procs[0].api, last, serviceJSON(last), true); err != nil {
				b.Fatal(err)
			}
			return time.Now()
		})
		var round []time.Duration
		for _, l := range lat[1:] {
			round = append(round, l...)
		}
		local, remote = append(local, lat[0]...), append(remote, round...)
		var zc, xc time.Duration
		for i := range procs {
			zc += cpu[1+i]
			xc += cpu[len(all)+i]
		}
		zonesCPU, globalCPU, clientsCPU = zonesCPU+zc, globalCPU+cpu[0], clientsCPU+xc
		slices.Sort(round)
		slices.Sort(lat[0])
		l := loadAverage(b)
		load = max(load, l)
		b.Logf("%s: local p50 %.1f ms, max %.1f ms; cross-zone p50 %.1f ms, max %.1f ms; CPU %s (zones), %s (global), %s (xdsloads); %.0f returns of memory; load average %.1f",
			last, ms(percentile(lat[0], 0.5)), ms(lat[0][len(lat[0])-1]), ms(percentile(round, 0.5)), ms(round[len(round)-1]),
			zc, cpu[0], xc, memoryReturns(c, all)-returns0, l)
	}
	b.StopTimer()

	// What the cross-zone figure timed is a cluster that reaches z0:
	// z1's proxy has the last service's endpoint at z0's ingress, with
	// the SNI that ingress matches.
	dump := get(b, c, dataplanePath(procs[1].api, "proxy-0")+"/_xds")
	if sni := xds.SNI("default", zones[0], last, "", 80); !strings.Contains(dump, sni) || !strings.Contains(dump, ingress(0)) {
		b.Errorf("z1's proxy-0 has no endpoint %s with SNI %s for %s", ingress(0), sni, last)
	}

	slices.Sort(local)
	slices.Sort(remote)
	b.ReportMetric(ms(percentile(remote, 0.5)), "cross-zone-p50-ms")
	b.ReportMetric(ms(percentile(remote, 0.99)), "cross-zone-p99-ms")
	b.ReportMetric(ms(remote[len(remote)-1]), "cross-zone-max-ms")
	b.ReportMetric(ms(percentile(local, 0.5)), "local-p50-ms")
	b.ReportMetric(ms(percentile(local, 0.99)), "local-p99-ms")
	b.ReportMetric(ms(local[len(local)-1]), "local-max-ms")
	perChange := func(d time.Duration) float64 { return ms(d) / float64(rounds) }
	b.ReportMetric(perChange(zonesCPU), "zones-cpu-ms/change")
	b.ReportMetric(perChange(globalCPU), "global-cpu-ms/change")
	b.ReportMetric(perChange(clientsCPU), "xdsload-cpu-ms/change")
	b.ReportMetric(synced.Seconds(), "initial-sync-s")
	b.ReportMetric(load, "load-avg")
}

// vipsUsed is the series of the VIPs a zone holds for MeshServices (in
// the default pool).
var vipsUsed = `meshnames_vips_pool_addresses{pool="` + config.Default().VIPs.MeshService.CIDR + `",state="used"}`

// waitMetrics waits until every process of procs reports at least want
// of each series.
func waitMetrics(b *testing.B, c *http.Client, procs []*serverProc, want map[string]float64, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for _, p := range procs {
		for series, v := range want {
			for {
				p.checkAlive()
				got, err := metric(c, p.api, series)
				if err == nil && got >= v {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("%s: %s is %.0f after %s, want %.0f (%v)", p.api, series, got, timeout, v, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
}

func pids(procs []*serverProc) []int {
	out := make([]int, len(procs))
	for i, p := range procs {
		out[i] = p.pid()
	}
	return out
}

// get reads url and fails unless it answers 200.
func get(b *testing.B, c *http.Client, url string) string {
	b.Helper()
	resp, err := c.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %s %v\n%.500s", url, resp.Status, err, body)
	}
	return string(body)
}
