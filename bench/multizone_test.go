package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/postgres/pgtest"
	"github.com/meshnames/meshnames/internal/token"
	"github.com/meshnames/meshnames/internal/zonesync"
)

// envInt reads a positive integer from the environment, or def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// prepareGlobal creates the global's token keys and sync certificate in
// its embedded store in dir (as its first start would) and signs a token
// for each zone; the global started on dir then serves with them.
func prepareGlobal(tb testing.TB, dir string, zones []string) map[string]string {
	tb.Helper()
	ctx := context.Background()
	st := openEmbedded(tb, dir)
	defer st.Close()
	keys, err := token.LoadKeys(ctx, st)
	if err != nil {
		tb.Fatal(err)
	}
	tlsm, err := zonesync.LoadGlobalTLS(ctx, st, "", "")
	if err != nil {
		tb.Fatal(err)
	}
	files := map[string]string{}
	for _, z := range zones {
		raw, err := keys.Sign(token.Claims{Subject: "zone " + z, Role: token.RoleZone, Zone: z, SyncPin: tlsm.Pin, ExpiresAt: time.Now().Add(24 * time.Hour)})
		if err != nil {
			tb.Fatal(err)
		}
		files[z] = filepath.Join(tb.TempDir(), z+".token")
		if err := os.WriteFile(files[z], []byte(raw), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	return files
}

// federation is a global and the tokens and sync address its zones
// connect with.
type federation struct {
	global   *serverProc
	syncAddr string            // host:port of the global's sync service
	tokens   map[string]string // zone token files, by zone
}

// startGlobal starts a global on a new embedded store prepared for zones
// (prepareGlobal), with env, and waits until it is ready.
func startGlobal(tb testing.TB, c *http.Client, zones []string, env []string) federation {
	tb.Helper()
	dir := tb.TempDir()
	f := federation{tokens: prepareGlobal(tb, dir, zones), syncAddr: fmt.Sprintf("127.0.0.1:%d", freePort(tb))}
	f.global = startServerEnv(tb, env, "--mode", "global", "--data-dir", dir, "--sync-addr", f.syncAddr, "--log-level", "warn")
	f.global.waitReady(c, 2*time.Minute)
	return f
}

// startZone starts zone on the embedded store in dir, with env and args,
// syncing with the global at syncAddr (host:port; a proxy of it, say).
func (f federation) startZone(tb testing.TB, env []string, zone, dir, syncAddr string, args ...string) *serverProc {
	tb.Helper()
	return startServerEnv(tb, env, append([]string{"--mode", "zone", "--zone", zone, "--data-dir", dir, "--log-level", "warn",
		"--global-address", "grpcs://" + syncAddr, "--zone-token-file", f.tokens[zone]}, args...)...)
}

// seedZone stores n MeshServices of zone in the embedded store in dir, as
// the zone's API would have (and the mesh default, as the global's sync
// would have).
func seedZone(tb testing.TB, dir, zone string, n int) {
	tb.Helper()
	ctx := context.Background()
	st := openEmbedded(tb, dir)
	defer st.Close()
	ops := []store.Op{{Type: store.OpCreate, Object: &resource.Object{Kind: resource.Mesh, Name: "default",
		Labels: map[string]string{resource.LabelOrigin: resource.OriginGlobal}, Spec: &resource.MeshSpec{}}}}
	adm := admission.New(admission.Options{Mode: resource.ModeZone, Zone: zone})
	flush := func() {
		rs, err := st.Apply(ctx, ops...)
		if err != nil {
			tb.Fatal(err)
		}
		for _, r := range rs {
			if r.Err != nil {
				tb.Fatal(r.Err)
			}
		}
		ops = ops[:0]
	}
	for i := range n {
		obj := &resource.Object{Kind: resource.MeshService, Mesh: "default", Name: seededName(i), Spec: &resource.MeshServiceSpec{
			Selector: resource.MeshServiceSelector{DataplaneTags: map[string]string{"kuma.io/service": seededName(i)}},
			Ports:    []resource.Port{{Port: 80, AppProtocol: "http"}},
		}}
		if errs := adm.Admit(obj, admission.Writer{Source: admission.User}); len(errs) > 0 {
			tb.Fatal(errs)
		}
		ops = append(ops, store.Op{Type: store.OpCreate, Object: obj, DiscardObject: true})
		if len(ops) == seedBatch {
			flush()
		}
	}
	flush()
}

// dnsAddr returns the DNS address a server was started with.
func (p *serverProc) dnsAddr() string {
	args := p.cmd.Args
	i := slices.Index(args, "--dns-addr")
	return args[i+1]
}

func answers(c *dns.Client, addr, name string) bool {
	ok, _ := answersErr(c, addr, name)
	return ok
}

// answersErr is answers that also returns the exchange's error (a query
// that timed out, say), for the probes to count.
func answersErr(c *dns.Client, addr, name string) (bool, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	r, _, err := c.Exchange(m, addr)
	return err == nil && len(r.Answer) > 0, err
}

func zoneInsight(tb testing.TB, c *http.Client, global, zone string) api.ZoneInsight {
	tb.Helper()
	resp, err := c.Get(global + "/zones/" + zone + "/_insight")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var in api.ZoneInsight
	if err := json.NewDecoder(resp.Body).Decode(&in); err != nil {
		tb.Fatal(err)
	}
	return in
}

// syncStall is how long the initial sync may go without any zone's count
// of MeshServices moving before waitSynced calls it stalled.
const syncStall = time.Minute

// syncPoll is how often waitSynced reads the zones' counts: the initial
// sync takes tens of seconds, so a quarter second is within its noise.
const syncPoll = 250 * time.Millisecond

// waitSynced waits until the cache of every process of procs holds want
// MeshServices. A sync where no count moves for syncStall fails the
// benchmark with every count and the global's insight of every zone of
// zones (and the processes' logs, printed at cleanup), rather than
// waiting for the test's timeout.
func waitSynced(b *testing.B, c *http.Client, global string, zones []string, procs []*serverProc, want float64) {
	b.Helper()
	counts := make([]float64, len(procs))
	moved := time.Now()
	for {
		done := true
		for i, p := range procs {
			p.checkAlive()
			if counts[i] >= want {
				continue // a zone's count does not fall in the sync: spare it the scrape
			}
			v, err := metric(c, p.api, `meshnames_cache_objects{kind="MeshService"}`)
			if err == nil && v != counts[i] {
				counts[i], moved = v, time.Now()
			}
			done = done && counts[i] >= want
		}
		if done {
			return
		}
		if time.Since(moved) > syncStall {
			var report strings.Builder
			for i, p := range procs {
				fmt.Fprintf(&report, "\n%s: %.0f of %.0f MeshServices", p.api, counts[i], want)
			}
			for _, z := range zones {
				in, _ := json.Marshal(zoneInsight(b, c, global, z))
				fmt.Fprintf(&report, "\nthe global's insight of %s: %s", z, in)
			}
			b.Fatalf("initial sync stalled: no zone's count moved for %s%s", syncStall, report.String())
		}
		// Each scrape of /metrics costs a process about 0.25 ms of CPU:
		// every 100 ms, eleven processes' scrapes were about 1% of the
		// machine, taken from the sync being measured.
		time.Sleep(syncPoll)
	}
}

// BenchmarkMultizone runs a global and MESHNAMES_BENCH_ZONES zone processes
// (default 10), each zone seeded with MESHNAMES_BENCH_SERVICES MeshServices
// (default 10,000), all on embedded stores, and measures:
//
//   - initial-sync-s: from starting the zones (the global already up) to
//     every zone storing every other zone's services;
//   - named-s: until every zone answers, by DNS, the last service of every
//     other zone (svc-N.svc.<zone>.mesh.local);
//   - settle-s: from then until the federation is settled (settle: every
//     process froze what it decoded, returned the memory of its last
//     burst, and all are nearly idle);
//   - p50-ms, p99-ms, max-ms: then, a new service created through zone 0's
//     API, until each other zone answers its name by DNS (probes x zones);
//     a probe slower than a second is logged with the processes' logs;
//   - bytes/change/zone: bytes the global sent each receiving zone per new
//     service (the insight's counters over the probes);
//   - zones-cpu-s-at-sync, global-cpu-s-at-sync: CPU the processes used
//     until the initial sync was stored everywhere (a figure the machine's
//     other load does not inflate the way it does wall time), and
//     zones-cpu-s-at-named, global-cpu-s-at-named until it was named;
//   - global-writes/service, zone-writes/service: the revision of the
//     global's store, and the average of the zones', once every zone
//     answers every other zone's last service, per service of the
//     federation (zones x services; a zone's seeded services count);
//     global-received/service, global-sent/service: resources the global
//     received from all zones and sent to them by then (the insights'
//     counters of the current streams);
//   - zone-memory-returns, global-memory-returns: how often a zone (on
//     average) and the global returned idle memory to the system until
//     every zone answered every other zone's last service
//     (meshnames_memory_returns_total), and memory-returns-during-probes,
//     those of every process while the probes ran;
//   - zone-freezes/service: resources a zone's cache froze until settled,
//     per service of the federation (zones' average);
//   - zone-peak-rss-MiB, global-peak-rss-MiB: the most resident memory
//     of any zone, and of the global, until every zone answered every
//     other zone's last service (VmHWM);
//   - zone-rss-MiB-avg, global-rss-MiB: resident memory at the end;
//   - resync-resources: what zone 1 received on reconnecting after a
//     partition of MESHNAMES_BENCH_PARTITION seconds (default 60) during
//     which 10 services were created, and resync-snapshots, the full states
//     it needed (0 expected);
//   - full-states: the full states on every zone's current stream, either
//     way, at the end (0 expected: an inventory that disagreed with what a
//     side holds asks for one).
//
// MESHNAMES_BENCH_PROFILE_DIR=DIR gives the global and zone z2 (z0 when
// fewer than three zones) CPU and allocation profiles (global.cpu,
// global.alloc, zone.cpu, zone.alloc in DIR); the benchmark then stops
// every process with SIGTERM once every zone answers every other zone's
// last service, so that the profiles cover start, initial sync and naming
// only, and skips the probes and the partition.
func BenchmarkMultizone(b *testing.B) {
	nZones := envInt("MESHNAMES_BENCH_ZONES", 10)
	nServices := envInt("MESHNAMES_BENCH_SERVICES", 10_000)
	partition := time.Duration(envInt("MESHNAMES_BENCH_PARTITION", 60)) * time.Second
	profDir := os.Getenv("MESHNAMES_BENCH_PROFILE_DIR")
	profEnv := func(name string) []string {
		if profDir == "" {
			return nil
		}
		return []string{"MESHNAMES_CPU_PROFILE=" + filepath.Join(profDir, name+".cpu"),
			"MESHNAMES_ALLOC_PROFILE=" + filepath.Join(profDir, name+".alloc")}
	}
	profZone := min(2, nZones-1)
	const probes = 50
	const slowProbe = time.Second            // a probe this slow is reported with the processes' logs
	const tailProbe = 100 * time.Millisecond // a zone this slow to answer a probe is logged (the target's p99)
	for range b.N {
		c := newClient()
		zones := make([]string, nZones)
		for i := range zones {
			zones[i] = fmt.Sprintf("z%d", i)
		}
		fed := startGlobal(b, c, zones, profEnv("global"))
		global, syncAddr := fed.global, fed.syncAddr
		dirs := make([]string, nZones)
		for i, z := range zones {
			dirs[i] = b.TempDir()
			seedZone(b, dirs[i], z, nServices)
		}
		proxy := pgtest.StartProxy(b, "tcp://"+syncAddr)
		b.ResetTimer()
		start := time.Now()
		procs := make([]*serverProc, nZones)
		for i, z := range zones {
			addr := syncAddr
			if i == 1 {
				addr = strings.TrimPrefix(proxy.URL, "tcp://")
			}
			var env []string
			if i == profZone {
				env = profEnv("zone")
			}
			procs[i] = fed.startZone(b, env, z, dirs[i], addr)
		}
		waitSynced(b, c, global.api, zones, procs, float64(nZones*nServices))
		synced := time.Since(start)
		var zonesCPU time.Duration
		for _, p := range procs {
			if d, err := cpuTime(p.pid()); err == nil {
				zonesCPU += d
			}
		}
		globalCPU, _ := cpuTime(global.pid())
		dc := &dns.Client{Timeout: time.Second}
		last := seededName(nServices - 1)
		for i, p := range procs {
			for j, z := range zones {
				if i == j {
					continue
				}
				for !answers(dc, p.dnsAddr(), last+".svc."+z+".mesh.local") {
					p.checkAlive()
					time.Sleep(50 * time.Millisecond)
				}
			}
		}
		named := time.Since(start)
		var zonesCPUNamed time.Duration
		for _, p := range procs {
			if d, err := cpuTime(p.pid()); err == nil {
				zonesCPUNamed += d
			}
		}
		globalCPUNamed, _ := cpuTime(global.pid())
		var zonesPeak int64
		for _, p := range procs {
			if r, err := peakRSS(p.pid()); err == nil {
				zonesPeak = max(zonesPeak, r)
			}
		}
		globalPeak, _ := peakRSS(global.pid())
		b.StopTimer()
		b.ReportMetric(synced.Seconds(), "initial-sync-s")
		b.ReportMetric(named.Seconds(), "named-s")
		b.ReportMetric(zonesCPU.Seconds(), "zones-cpu-s-at-sync")
		b.ReportMetric(globalCPU.Seconds(), "global-cpu-s-at-sync")
		b.ReportMetric(zonesCPUNamed.Seconds(), "zones-cpu-s-at-named")
		b.ReportMetric(globalCPUNamed.Seconds(), "global-cpu-s-at-named")
		b.ReportMetric(float64(zonesPeak)/(1<<20), "zone-peak-rss-MiB")
		b.ReportMetric(float64(globalPeak)/(1<<20), "global-peak-rss-MiB")
		// What one service costs in writes: the global's and the zones'
		// revisions (every write is one), and the resources the global
		// received and sent, per service of the federation.
		perService := func(v float64) float64 { return v / float64(nZones*nServices) }
		if v, err := metric(c, global.api, "meshnames_cache_revision"); err == nil {
			b.ReportMetric(perService(v), "global-writes/service")
		}
		var zoneRevs float64
		for _, p := range procs {
			if v, err := metric(c, p.api, "meshnames_cache_revision"); err == nil {
				zoneRevs += v
			}
		}
		b.ReportMetric(perService(zoneRevs)/float64(nZones), "zone-writes/service")
		var received, sent int64
		for _, z := range zones {
			in := zoneInsight(b, c, global.api, z)
			received += in.Received.Resources
			sent += in.Sent.Resources
		}
		b.ReportMetric(perService(float64(received)), "global-received/service")
		b.ReportMetric(perService(float64(sent)), "global-sent/service")
		b.ReportMetric(memoryReturns(c, procs)/float64(nZones), "zone-memory-returns")
		if v, err := metric(c, global.api, "meshnames_memory_returns_total"); err == nil {
			b.ReportMetric(v, "global-memory-returns")
		}
		if profDir != "" {
			for _, p := range procs {
				p.stop()
			}
			global.stop()
			continue
		}

		// The probes measure a settled federation: the work the initial
		// sync leaves behind (freezing what it decoded, returning memory,
		// compactions) would otherwise be what they time.
		settleStart := time.Now()
		settle(b, c, append([]*serverProc{global}, procs...), 5*time.Minute)
		b.ReportMetric(time.Since(settleStart).Seconds(), "settle-s")
		// How often a zone's cache encoded a resource for keeping (see
		// internal/cache): once per resource is the least, after its last
		// change; what the sync's writes make it freeze before is extra.
		var frozen float64
		for _, p := range procs {
			if v, err := metric(c, p.api, "meshnames_cache_frozen_total"); err == nil {
				frozen += v
			}
		}
		b.ReportMetric(perService(frozen)/float64(nZones), "zone-freezes/service")

		// One new service at a time, answered everywhere. Returns of
		// memory to the system during the probes (a full collection and
		// a madvise of the idle heap, see internal/server/memory.go) are
		// counted: one may delay what the process does meanwhile.
		all := append([]*serverProc{global}, procs...)
		returnsBefore := memoryReturns(c, all)
		before := map[string]int64{}
		for _, z := range zones[1:] {
			before[z] = zoneInsight(b, c, global.api, z).Sent.Bytes
		}
		var lat []time.Duration
		var slow []string
		var dnsErrors atomic.Int64 // probe queries that failed (timed out): a zone's DNS not answering
		for i := range probes {
			name := fmt.Sprintf("probe-%03d", i)
			body := fmt.Sprintf(`{"type":"MeshService","name":%q,"mesh":"default","spec":{"ports":[{"port":80}]}}`, name)
			t0 := time.Now()
			if err := putResource(c, procs[0].api+"/meshes/default/meshservices/"+name, []byte(body), true); err != nil {
				b.Fatal(err)
			}
			var mu sync.Mutex
			var wg sync.WaitGroup
			var zoneSlow []string
			for zi, p := range procs[1:] {
				wg.Go(func() {
					pc := &dns.Client{Timeout: time.Second}
					for {
						ok, err := answersErr(pc, p.dnsAddr(), name+".svc.z0.mesh.local")
						if ok {
							break
						}
						if err != nil {
							dnsErrors.Add(1)
							mu.Lock()
							zoneSlow = append(zoneSlow, fmt.Sprintf("%s: query failed after %s: %v", zones[zi+1], time.Since(t0).Round(time.Millisecond), err))
							mu.Unlock()
						}
						if time.Since(t0) > time.Minute {
							b.Errorf("%s not answered within a minute", name)
							return
						}
						time.Sleep(time.Millisecond)
					}
					d := time.Since(t0)
					mu.Lock()
					lat = append(lat, d)
					if d > tailProbe {
						zoneSlow = append(zoneSlow, fmt.Sprintf("%s answered after %s", zones[zi+1], d.Round(time.Millisecond)))
					}
					mu.Unlock()
				})
			}
			wg.Wait()
			if len(zoneSlow) > 0 {
				b.Logf("%s (PUT at %s): %s", name, t0.Format("15:04:05.000"), strings.Join(zoneSlow, "; "))
			}
			if d := time.Since(t0); d > slowProbe {
				slow = append(slow, fmt.Sprintf("%s: %s", name, d.Round(time.Millisecond)))
			}
		}
		if len(slow) > 0 {
			// What the processes logged (warnings and errors) says why.
			b.Logf("probes slower than %s: %s", slowProbe, strings.Join(slow, ", "))
			b.Logf("--- global's log:\n%s", global.log.String())
			for i, p := range procs {
				b.Logf("--- %s's log:\n%s", zones[i], p.log.String())
			}
		}
		var bytes int64
		for _, z := range zones[1:] {
			bytes += zoneInsight(b, c, global.api, z).Sent.Bytes - before[z]
		}
		slices.Sort(lat)
		b.ReportMetric(ms(percentile(lat, 0.5)), "p50-ms")
		b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
		b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
		b.ReportMetric(float64(dnsErrors.Load()), "probe-dns-errors")
		b.ReportMetric(memoryReturns(c, all)-returnsBefore, "memory-returns-during-probes")
		b.ReportMetric(float64(bytes)/float64(probes*(nZones-1)), "bytes/change/zone")

		// A partition of zone 1.
		streams := zoneInsight(b, c, global.api, "z1").Streams
		proxy.Cut()
		cut := time.Now()
		for zoneInsight(b, c, global.api, "z1").Online {
			time.Sleep(100 * time.Millisecond)
		}
		for i := range 10 {
			name := fmt.Sprintf("during-%d", i)
			body := fmt.Sprintf(`{"type":"MeshService","name":%q,"mesh":"default","spec":{"ports":[{"port":80}]}}`, name)
			if err := putResource(c, procs[0].api+"/meshes/default/meshservices/"+name, []byte(body), true); err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(time.Until(cut.Add(partition))) // the partition's length is the scenario
		proxy.Restore()
		for i := range 10 {
			for !answers(dc, procs[1].dnsAddr(), fmt.Sprintf("during-%d.svc.z0.mesh.local", i)) {
				time.Sleep(10 * time.Millisecond)
			}
		}
		in := zoneInsight(b, c, global.api, "z1")
		if in.Streams <= streams {
			b.Errorf("z1 did not reconnect on a new stream (%d streams, %d before)", in.Streams, streams)
		}
		b.ReportMetric(float64(in.Sent.Resources), "resync-resources")
		b.ReportMetric(float64(in.Sent.Snapshots), "resync-snapshots")
		b.ReportMetric(float64(in.Sent.Bytes), "resync-bytes")
		// Full states on every zone's current stream, either way: an
		// inventory that disagreed asks for one (0 expected).
		var fullStates int64
		for _, z := range zones {
			in := zoneInsight(b, c, global.api, z)
			fullStates += in.Sent.Snapshots + in.Received.Snapshots
		}
		b.ReportMetric(float64(fullStates), "full-states")
		var zonesRSS int64
		for _, p := range procs {
			if r, err := rss(p.pid()); err == nil {
				zonesRSS += r
			}
		}
		b.ReportMetric(float64(zonesRSS)/float64(1<<20)/float64(nZones), "zone-rss-MiB-avg")
		if r, err := rss(global.pid()); err == nil {
			b.ReportMetric(float64(r)/float64(1<<20), "global-rss-MiB")
		}
		for _, p := range procs {
			p.kill()
		}
		global.kill()
	}
}

// memoryReturns sums meshnames_memory_returns_total over procs.
func memoryReturns(c *http.Client, procs []*serverProc) float64 {
	var sum float64
	for _, p := range procs {
		if v, err := metric(c, p.api, "meshnames_memory_returns_total"); err == nil {
			sum += v
		}
	}
	return sum
}

// settle waits until every process holds no decoded resource (its cache
// froze what the initial sync decoded, cache.FreezeAfter after its last
// change), has returned the memory of its last burst of work
// (meshnames_memory_return_pending 0: a return paced to come later than
// the burst's end, up to minutes, comes at the first quiet second after;
// in the probes it took 1-2 s of CPU on several processes at once), and
// the processes used under settledCPU of CPU each (on average) in each of
// the last settledSeconds seconds. An idle process uses some (heartbeats,
// the memory watch); the seconds measured leave out its answers to the
// metrics this reads.
func settle(tb testing.TB, c *http.Client, procs []*serverProc, timeout time.Duration) {
	tb.Helper()
	settleBelow(tb, c, procs, timeout, 20*time.Millisecond)
}

// settleBelow is settle with the CPU a settled process may use each
// second (on average over procs).
func settleBelow(tb testing.TB, c *http.Client, procs []*serverProc, timeout, cpu time.Duration) {
	tb.Helper()
	const settledSeconds = 3
	settledCPU := time.Duration(len(procs)) * cpu
	deadline := time.Now().Add(timeout)
	total := func() time.Duration {
		var sum time.Duration
		for _, p := range procs {
			p.checkAlive()
			d, err := cpuTime(p.pid())
			if err != nil {
				tb.Fatal(err)
			}
			sum += d
		}
		return sum
	}
	quiet := 0
	var used time.Duration
	decoded, pending := 0.0, 0.0
	for quiet < settledSeconds {
		if time.Now().After(deadline) {
			tb.Fatalf("the federation did not settle within %s: %s of CPU in the last second, %.0f resources decoded, %.0f returns of memory pending", timeout, used, decoded, pending)
		}
		// The second measured starts after the last reads of the metrics:
		// answering them is the benchmark's load, not the process's own
		// (an idle Kubernetes-mode process uses 14-16 ms of CPU a second
		// on G, 29-38 ms while its metrics are read twice a second).
		prev := total()
		time.Sleep(time.Second)
		used, decoded, pending = total()-prev, 0, 0
		for _, p := range procs {
			v, err := metric(c, p.api, cacheDecoded)
			if err != nil {
				tb.Fatal(err)
			}
			decoded += v
			v, err = metric(c, p.api, returnPending)
			if err != nil {
				tb.Fatal(err)
			}
			pending += v
		}
		if used < settledCPU && decoded == 0 && pending == 0 {
			quiet++
		} else {
			quiet = 0
		}
	}
}
