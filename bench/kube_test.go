package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/meshnames/meshnames/internal/config"
	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/kubeapi/kubetest"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/server/servertest"
)

var (
	meshServices   = kubeapi.Resource{Group: "kuma.io", Version: "v1alpha1", Resource: "meshservices", Namespaced: true}
	kubeServices   = flag.Int("kube-services", 10_000, "BenchmarkKube: how many Services")
	kubeCPUProfile = flag.String("kube-cpu-profile", "", "BenchmarkKubeLiveHeap: profile the CPU while the first 20 new Services are named, once all are")
	kubeNamingProf = flag.String("kube-naming-cpu-profile", "", "BenchmarkKubeLiveHeap: profile the CPU from the start until every Service is named")
	kubeNamingHeap = flag.String("kube-naming-heap-profile", "", "BenchmarkKubeLiveHeap: write heap profiles at the start (FILE.start) and once every Service is named (FILE); compare with go tool pprof -base FILE.start FILE")
	kubeRawAdmin   = flag.Bool("kube-raw-admin", false, "BenchmarkKube: also time the raw writes as the cluster's administrator (s-apiserver-raw-writes-admin)")
	kubeAPIProfile = flag.String("kube-apiserver-cpu-profile", "", "BenchmarkKube: profile the API server's CPU for the first 30 s of the raw writes and of the naming, into FILE.raw and FILE.naming")
)

// BenchmarkKube measures the Kubernetes mode against a real kube-apiserver
// and etcd on the same machine: n Services (100 per meshed namespace) are
// in the API server when `meshnames serve --env kubernetes` starts, from no
// MeshService at all. First it times the API server's own writes of what
// a first naming writes (rawMeshServiceWrites, watched as the naming is);
// then it reports the time
// from the process's start until
// every Service's MeshService is named (hostname Available and ClusterIP
// in status, read through meshnames' API), the RSS once settled (settle:
// the cache froze what stopped changing, the memory of the burst is
// returned, the CPU is quiet) and per Service above an idle process on
// the same cluster settled the same way, and then the latency
// of one new Service to its MeshService's status (hostname and VIP), as a
// watch of the custom resource sees it, over 200 Services created one
// after another; last, the raw writes once more, as a check that the
// machine kept its speed through the run. Run with -benchtime=1x: each
// iteration deletes the MeshServices and starts meshnames again.
func BenchmarkKube(b *testing.B) {
	if err := kubetest.Available(); err != nil {
		b.Skip(err)
	}
	n := *kubeServices
	b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) { benchKube(b, n) })
}

// kubeCluster starts a real API server with the CRDs and RBAC installed,
// stopped when b ends.
func kubeCluster(b *testing.B) *kubetest.Cluster {
	ctx := context.Background()
	c, err := kubetest.Start(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Stop)
	if err := c.Setup(ctx); err != nil {
		b.Fatal(err)
	}
	return c
}

// kubeNamed follows every MeshService of a cluster as a watch of the API
// server sees them and tells when n are named: a MeshService of Service
// name in namespace ns is named when its status holds the hostname
// name.ns.svc.mesh.local Available and a VIP. The watch has a price on
// the two cores the naming has: beside the raw writes of 10,000 Services
// it took 2.5 CPU-seconds of this process and about 2.7 of the API
// server's, a twentieth of the CPU of the phase. Cheaper signals are not
// the API server's: meshnames answers a name over DNS while the status
// write that holds it may still be in flight (at 300 Services its DNS
// answered every name when the API server held 242 named), and listing
// every MeshService through meshnames' API each second has meshnames
// encode 13 MB of JSON a second while its last statuses are written (a
// third of what it allocates in a first naming of 10,000).
type kubeNamed struct {
	n     int
	mu    sync.Mutex
	named map[string]bool
	added int       // ADDED events: MeshServices created
	last  time.Time // when the watch showed the nth named
	done  chan struct{}
}

// watchKubeNamed starts following the MeshServices of c, until stop is
// called.
func watchKubeNamed(c *kubetest.Cluster, n int) (w *kubeNamed, stop func()) {
	w = &kubeNamed{n: n, named: map[string]bool{}, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		c.Client.Follow(ctx, meshServices, "", kubeapi.ListOptions{}, "", w, slog.New(slog.DiscardHandler))
	})
	return w, func() { cancel(); wg.Wait() }
}

// Replace implements kubeapi.Handler.
func (w *kubeNamed) Replace(items []json.RawMessage, _ string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	clear(w.named)
	for _, raw := range items {
		w.see(kubeapi.Modified, raw)
	}
	w.check()
}

// Event implements kubeapi.Handler.
func (w *kubeNamed) Event(ev kubeapi.Event) {
	if ev.Type == kubeapi.Bookmark {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if ev.Type == kubeapi.Added {
		w.added++
	}
	w.see(ev.Type, ev.Object)
	w.check()
}

// see applies one MeshService's state; w.mu is held.
func (w *kubeNamed) see(typ string, raw json.RawMessage) {
	key, named, err := kubeMeshServiceNamed(raw)
	if err != nil {
		return
	}
	if named && typ != kubeapi.Deleted {
		w.named[key] = true
	} else {
		delete(w.named, key)
	}
}

// kubeMeshServiceNamed reads a MeshService custom resource as the API
// server sends it: its key (name.namespace) and whether it is named, its
// hostname key.svc.mesh.local Available and a VIP in its status. Half the
// events of a naming are creations, whose status holds no VIP: their key
// is all it reads of them (kubeapi.MetaOf), so that the watch takes less
// of the cores the naming is measured on.
func kubeMeshServiceNamed(raw json.RawMessage) (key string, named bool, err error) {
	if !bytes.Contains(raw, []byte(`"vips"`)) {
		m, err := kubeapi.MetaOf(raw)
		return m.Name + "." + m.Namespace, false, err
	}
	var ms struct {
		Metadata struct{ Name, Namespace string } `json:"metadata"`
		Status   struct {
			Addresses []struct{ Hostname, Status string } `json:"addresses"`
			VIPs      []struct{ IP string }               `json:"vips"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &ms); err != nil {
		return "", false, err
	}
	key = ms.Metadata.Name + "." + ms.Metadata.Namespace
	if len(ms.Status.VIPs) > 0 {
		for _, a := range ms.Status.Addresses {
			named = named || a.Hostname == key+".svc.mesh.local" && a.Status == resource.AddressAvailable
		}
	}
	return key, named, nil
}

// check closes done the first time n are named; w.mu is held.
func (w *kubeNamed) check() {
	if len(w.named) >= w.n && w.last.IsZero() {
		w.last = time.Now()
		close(w.done)
	}
}

// kubeTimeline logs every 5 seconds of the naming how many MeshServices
// the watch w saw created and named, and the CPU the API server and etcd,
// meshnames and this benchmark (its watch) used in those seconds (from
// /proc: it costs them nothing), until the function it returns is called:
// where a naming waits rather than works shows as CPU below the two cores.
func kubeTimeline(b *testing.B, c *kubetest.Cluster, p *serverProc, w *kubeNamed) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		prevCluster, err := clusterCPU(c)
		if err != nil {
			return
		}
		prevBench, err := cpuTime(os.Getpid())
		if err != nil {
			return
		}
		var prevOwn time.Duration
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			own, err := cpuTime(p.pid())
			if err != nil {
				return
			}
			cluster, err := clusterCPU(c)
			if err != nil {
				return
			}
			bench, err := cpuTime(os.Getpid())
			if err != nil {
				return
			}
			w.mu.Lock()
			added, named := w.added, len(w.named)
			w.mu.Unlock()
			b.Logf("naming at %4.0fs: %5d created, %5d named; cores used: API server and etcd %.2f, meshnames %.2f, benchmark %.2f",
				time.Since(p.started).Seconds(), added, named, (cluster-prevCluster).Seconds()/5, (own-prevOwn).Seconds()/5, (bench-prevBench).Seconds()/5)
			prevCluster, prevOwn, prevBench = cluster, own, bench
		}
	})
	return func() { close(done); wg.Wait() }
}

// waitKubeNamed waits until the watch w has shown all its MeshServices
// named, failing the benchmark at deadline (alive fails it if the process
// is gone), and returns when the watch showed the last one named.
func waitKubeNamed(b *testing.B, w *kubeNamed, deadline time.Time, alive func()) time.Time {
	b.Helper()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-w.done:
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.last
		case <-tick.C:
			alive()
			if time.Now().After(deadline) {
				w.mu.Lock()
				named := len(w.named)
				w.mu.Unlock()
				b.Fatalf("%d of %d MeshServices named in the API server", named, w.n)
			}
		}
	}
}

// confirmNamed checks through meshnames' API that all n MeshServices are
// named there too (countNamed), as its watch of the API server shows them
// moments after the writes.
func confirmNamed(b *testing.B, hc *http.Client, api string, n int, deadline time.Time, alive func()) {
	b.Helper()
	for {
		total, named, err := countNamed(hc, api)
		if err == nil && total == n && named == n {
			return
		}
		alive()
		if time.Now().After(deadline) {
			b.Fatalf("the API server has all %d named; meshnames' API %d of %d (%v)", n, named, total, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kubeSettledCPU is the CPU a settled Kubernetes-mode process may use each
// second: renewing its leader Lease and following its watches takes 14-16
// ms a second, which the kernel counts in 10 ms ticks, so settle's bound
// for universal mode (below 20 ms) is missed on many seconds.
const kubeSettledCPU = 50 * time.Millisecond

func benchKube(b *testing.B, n int) {
	ctx := context.Background()
	c := kubeCluster(b)
	hc := newClient()
	args := []string{"--env", "kubernetes", "--kubeconfig", c.MeshnamesKubeconfig, "--zone", "east", "--log-level", "info"}

	// An idle process on the same cluster, for the RSS per service.
	idle := startServerArgs(b, args...)
	idle.waitReady(hc, 2*time.Minute)
	settleBelow(b, hc, []*serverProc{idle}, 5*time.Minute, kubeSettledCPU)
	base, err := rss(idle.pid())
	if err != nil {
		b.Fatal(err)
	}
	baseAnon, err := procStatus(idle.pid(), "RssAnon")
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("idle: %s; Go runtime memory %s", rssParts(idle.pid()), runtimeMemory(b, hc, idle.api))
	idle.stop()

	const perNS = 100
	namespaces := (n + perNS - 1) / perNS
	seedStart := time.Now()
	seedKube(b, c, n, perNS)
	seeded := time.Since(seedStart)
	b.Logf("seeded %d Services in %d namespaces in %s", n, namespaces, seeded.Round(time.Millisecond))
	b.ReportMetric(float64(n)/seeded.Seconds(), "apiserver-service-creates/s")

	for range b.N {
		// The API server's own rate for the writes meshnames makes to
		// name n Services: n MeshServices created and their statuses
		// written, by 16 clients, with nothing else running.
		deleteAll := func() {
			for i := range namespaces {
				if err := c.Client.Delete(ctx, meshServices, fmt.Sprintf("ns-%03d", i), "", kubeapi.Preconditions{}); err != nil {
					b.Fatal(err)
				}
			}
		}
		if *kubeRawAdmin {
			clusterQuiet(b, c)
			admin := rawMeshServiceWrites(b, c, c.Client, n, perNS)
			b.ReportMetric(admin.Seconds(), "s-apiserver-raw-writes-admin")
			deleteAll()
		}
		clusterQuiet(b, c)
		clusterCPU, benchCPU := clusterCPUTime(b, c), benchCPUTime(b)
		rawProfiled := apiserverCPUProfile(b, c, *kubeAPIProfile, ".raw")
		raw := rawMeshServiceWrites(b, c, meshnamesClient(b, c), n, perNS)
		rawProfiled()
		b.ReportMetric(raw.Seconds(), "s-apiserver-raw-writes")
		b.ReportMetric((clusterCPUTime(b, c) - clusterCPU).Seconds(), "cpu-s-apiserver-raw")
		// This process's CPU for the raw writes: their 16 clients.
		b.ReportMetric((benchCPUTime(b) - benchCPU).Seconds(), "cpu-s-benchmark-raw")
		// From no MeshService at all.
		deleteAll()
		clusterQuiet(b, c)
		clusterCPU = clusterCPUTime(b, c)
		requests := apiserverRequests(b, c)
		benchCPU = benchCPUTime(b)
		namingProfiled := apiserverCPUProfile(b, c, *kubeAPIProfile, ".naming")
		named, stopWatch := watchKubeNamed(c, n)
		p := startServerArgs(b, args...)
		deadline := p.started.Add(15 * time.Minute)
		stopTimeline := kubeTimeline(b, c, p, named)
		allNamed := waitKubeNamed(b, named, deadline, p.checkAlive).Sub(p.started)
		stopTimeline()
		stopWatch()
		namingProfiled()
		// Where the time went: CPU of the API server and etcd, and of
		// meshnames, against the raw writes' CPU; and the writes
		// meshnames made.
		namingCPU, err := cpuTime(p.pid())
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric((clusterCPUTime(b, c) - clusterCPU).Seconds(), "cpu-s-apiserver-naming")
		// This process's CPU in the naming: its watch of the MeshServices
		// and the timeline, on the cores the naming has.
		b.ReportMetric((benchCPUTime(b) - benchCPU).Seconds(), "cpu-s-benchmark-naming")
		confirmNamed(b, hc, p.api, n, deadline, p.checkAlive)
		b.ReportMetric(namingCPU.Seconds(), "cpu-s-meshnames-naming")
		// The requests of the naming (the benchmark's watch among them:
		// a LIST and a WATCH of meshservices).
		after := apiserverRequests(b, c)
		for _, key := range slices.Sorted(maps.Keys(after)) {
			if d := after[key] - requests[key]; d > 0 {
				b.Logf("naming: %.0f %s requests to the API server (%.2f per Service)", d, key, d/float64(n))
			}
		}
		b.ReportMetric(allNamed.Seconds(), "s-all-named")
		b.ReportMetric(allNamed.Seconds()/raw.Seconds(), "x-apiserver-raw")
		b.Logf("all %d named %s after the start: %.2f times the API server's raw writes", n, allNamed.Round(time.Millisecond), allNamed.Seconds()/raw.Seconds())
		// Settled, as BenchmarkIdle measures universal mode: the cache
		// has frozen what stopped changing and the memory of the naming's
		// burst is returned.
		settleBelow(b, hc, []*serverProc{p}, 5*time.Minute, kubeSettledCPU)
		r, err := rss(p.pid())
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(r)/(1<<20), "RSS-MiB")
		b.ReportMetric(float64(r-base)/float64(n), "B/service")
		// The anonymous part alone: what the process allocated, without
		// the binary's pages, which move a few MiB between processes.
		anon, err := procStatus(p.pid(), "RssAnon")
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(anon-baseAnon)/float64(n), "anon-B/service")
		b.Logf("RSS %.1f MiB settled, %d B per Service above an idle instance (%.1f MiB)", float64(r)/(1<<20), (r-base)/int64(n), float64(base)/(1<<20))
		b.Logf("with %d Services: %s; Go runtime memory %s", n, rssParts(p.pid()), runtimeMemory(b, hc, p.api))

		lat := newServiceLatency(b, c, 200)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "new-p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "new-p99-ms")
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "new-max-ms")
		p.stop()
		// What went wrong, if anything, and the relists of watches that
		// fell behind.
		for _, line := range strings.Split(p.log.String(), "\n") {
			if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") || strings.Contains(line, "listing again") || strings.Contains(line, "leader") {
				b.Log(line)
			}
		}
		// Cleaning up is not measured: a slow API server (the 30 s
		// timeout of a request) must not lose the figures above.
		if err := c.Client.Delete(ctx, kubeapi.Services, "latency", "", kubeapi.Preconditions{}); err != nil {
			b.Logf("deleting the Services of namespace latency: %v", err)
		}
		if err := c.Client.Delete(ctx, meshServices, "latency", "", kubeapi.Preconditions{}); err != nil {
			b.Logf("deleting the MeshServices of namespace latency: %v", err)
		}
		// The raw writes again, as before the naming (no MeshService, the
		// API server and etcd quiet): a machine or an API server that
		// changed speed during the run shows as a difference between the
		// two, which the ratio to the first alone would hide.
		deleteAll()
		clusterQuiet(b, c)
		clusterCPU = clusterCPUTime(b, c)
		rawAfter := rawMeshServiceWrites(b, c, meshnamesClient(b, c), n, perNS)
		b.ReportMetric(rawAfter.Seconds(), "s-apiserver-raw-writes-after")
		b.ReportMetric((clusterCPUTime(b, c) - clusterCPU).Seconds(), "cpu-s-apiserver-raw-after")
		b.ReportMetric(allNamed.Seconds()/rawAfter.Seconds(), "x-apiserver-raw-after")
		// The naming runs between the two: where the machine's speed
		// drifted through the run, their mean is the raw rate of the
		// naming's time (machine I: the second raw writes took from 17%
		// less to 41% more time than the first).
		b.ReportMetric(2*allNamed.Seconds()/(raw+rawAfter).Seconds(), "x-apiserver-raw-mean")
		deleteAll()
	}
}

// rawMeshServiceWrites creates n MeshServices (perNS to a namespace, as
// meshnames would name them, and shaped as its own: labels, a port, a
// selector, an identity) and then writes each one's status (a VIP and the
// four addresses meshnames gives it), with 16 clients, as client, and
// returns how long that took. It is the floor meshnames' first naming
// stands on: two writes per Service through the same API server, on the
// same machine, by meshnames' user (an administrator's requests skip the
// authorization and the API Priority and Fairness queues that meshnames'
// go through: -kube-raw-admin times them too).
//
// They are timed as the naming is, by the same watch (kubeNamed): from
// their start until it shows all n named. The watch is the benchmark's
// instrument, a watcher more for the API server to serve every write to;
// timing the naming with it and the raw writes without it charged its
// cost to meshnames.
func rawMeshServiceWrites(b *testing.B, c *kubetest.Cluster, client *kubeapi.Client, n, perNS int) time.Duration {
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	named, stopWatch := watchKubeNamed(c, n)
	defer stopWatch()
	start := time.Now()
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				ns, name := fmt.Sprintf("ns-%03d", i/perNS), fmt.Sprintf("raw-%05d", i)
				if err := client.Create(ctx, meshServices, ns, rawMeshService(name, ns), nil); err != nil {
					errs <- err
					return
				}
				status := map[string]any{"status": map[string]any{
					"vips":      []any{map[string]any{"ip": fmt.Sprintf("10.96.%d.%d", i/250, i%250+1), "type": "Kubernetes"}},
					"addresses": rawAddresses(name, ns)}}
				if err := client.Patch(ctx, meshServices, ns, name, "status", kubeapi.MergePatch, status, nil); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	d := waitKubeNamed(b, named, start.Add(15*time.Minute), func() {}).Sub(start)
	b.Logf("the API server took %s for %d MeshService creates and %d status writes, as its watch showed them (%.0f writes/s)", d.Round(time.Millisecond), n, n, float64(2*n)/d.Seconds())
	return d
}

// rawMeshService is a MeshService as meshnames creates one for Service
// name of namespace ns.
func rawMeshService(name, ns string) map[string]any {
	return map[string]any{"apiVersion": "kuma.io/v1alpha1", "kind": "MeshService",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{
			"kuma.io/mesh": "default", "kuma.io/managed-by": "raw-bench", "k8s.kuma.io/service-name": name,
			"k8s.kuma.io/is-headless-service": "false", "kuma.io/env": "kubernetes"}},
		"spec": map[string]any{"selector": map[string]any{"dataplaneLabels": map[string]any{"matchLabels": map[string]any{"app": "x", "k8s.kuma.io/namespace": ns}}},
			"ports":      []any{map[string]any{"name": "http", "port": 80, "appProtocol": "http"}},
			"identities": []any{map[string]any{"type": "ServiceTag", "value": name + "_" + ns + "_svc_80"}},
			"export":     map[string]any{"mode": "All"}}}
}

// rawAddresses are the addresses meshnames writes into the status of a
// Service's MeshService: its hostname and its ServiceTag's three names.
func rawAddresses(name, ns string) []any {
	tag := name + "_" + ns + "_svc_80"
	address := func(hostname, kind, origin string) any {
		return map[string]any{"hostname": hostname, "status": "Available", "origin": map[string]any{"kind": kind, "name": origin}}
	}
	return []any{
		address(name+"."+ns+".svc.mesh.local", "HostnameGenerator", "local-kube-mesh-service"),
		address(tag+".mesh", "ServiceTag", tag),
		address(name+"-"+ns+"-svc-80.mesh", "ServiceTagAlias", tag),
		address(name+"."+ns+".svc.80.mesh", "ServiceTagAlias", tag),
	}
}

// seedKube creates n Services, perNS to a meshed namespace, with 16
// clients at once.
func seedKube(b *testing.B, c *kubetest.Cluster, n, perNS int) {
	ctx := context.Background()
	for i := range (n + perNS - 1) / perNS {
		ns := fmt.Sprintf("ns-%03d", i)
		if err := c.Apply(ctx, []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+", labels: {kuma.io/sidecar-injection: enabled}}\n")); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				svc := map[string]any{"apiVersion": "v1", "kind": "Service",
					"metadata": map[string]any{"name": fmt.Sprintf("svc-%05d", i), "namespace": fmt.Sprintf("ns-%03d", i/perNS)},
					"spec":     map[string]any{"selector": map[string]any{"app": "x"}, "ports": []any{map[string]any{"name": "http", "port": 80, "appProtocol": "http"}}}}
				if err := c.Client.Create(ctx, kubeapi.Services, fmt.Sprintf("ns-%03d", i/perNS), svc, nil); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// newServiceLatency creates k Services one after another in namespace
// latency and returns, sorted, how long each took from the create to a
// watch event of its MeshService showing a hostname and a VIP.
func newServiceLatency(b *testing.B, c *kubetest.Cluster, k int) []time.Duration {
	ctx := context.Background()
	if err := c.Apply(ctx, []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: latency, labels: {kuma.io/sidecar-injection: enabled}}\n")); err != nil {
		b.Fatal(err)
	}
	var list struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := c.Client.Get(ctx, meshServices, "latency", "", &list); err != nil {
		b.Fatal(err)
	}
	w, err := c.Client.Watch(ctx, meshServices, "latency", kubeapi.WatchOptions{ResourceVersion: list.Metadata.ResourceVersion})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	var out []time.Duration
	for i := range k {
		name := fmt.Sprintf("new-%04d", i)
		svc := map[string]any{"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": name, "namespace": "latency"},
			"spec":     map[string]any{"ports": []any{map[string]any{"port": 80}}}}
		start := time.Now()
		if err := c.Client.Create(ctx, kubeapi.Services, "latency", svc, nil); err != nil {
			b.Fatal(err)
		}
		for {
			ev, err := w.Next()
			if err != nil {
				b.Fatalf("watch: %v", err)
			}
			key, named, err := kubeMeshServiceNamed(ev.Object)
			if err != nil {
				b.Fatal(err)
			}
			if key == name+".latency" && named {
				d := time.Since(start)
				if d > time.Second {
					b.Logf("%s took %s (created at %s)", name, d.Round(time.Millisecond), start.UTC().Format(time.TimeOnly))
				}
				out = append(out, d)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// BenchmarkKubeLiveHeap is the in-process companion of BenchmarkKube: a
// control plane run in this process on a real API server holding n
// Services, once every MeshService is named; it reports the live heap per
// Service (run with -args -heap-profile FILE to see which part holds it).
func BenchmarkKubeLiveHeap(b *testing.B) {
	if err := kubetest.Available(); err != nil {
		b.Skip(err)
	}
	n := *kubeServices
	c := kubeCluster(b)
	seedKube(b, c, n, 100)
	for range b.N {
		base := liveHeap()
		cfg := config.Default()
		cfg.Env, cfg.Kubernetes.Kubeconfig, cfg.Zone = config.EnvKubernetes, c.MeshnamesKubeconfig, "east"
		cfg.DNS.Addr = fmt.Sprintf("127.0.0.1:%d", freePort(b))
		cfg.XDS.Addr = "127.0.0.1:0"
		if *kubeNamingHeap != "" {
			writeHeapProfile(b, *kubeNamingHeap+".start")
		}
		// The watch runs in this process: pprof's -ignore watchKubeNamed
		// leaves it out of the profiles.
		named, stopWatch := watchKubeNamed(c, n)
		stopProfile := startCPUProfile(b, *kubeNamingProf)
		start := time.Now()
		api := servertest.Start(b, cfg, servertest.Options{})
		hc := newClient()
		last := waitKubeNamed(b, named, start.Add(15*time.Minute), func() {})
		stopProfile()
		stopWatch()
		if *kubeNamingHeap != "" {
			writeHeapProfile(b, *kubeNamingHeap)
		}
		b.ReportMetric(last.Sub(start).Seconds(), "s-all-named")
		confirmNamed(b, hc, api, n, start.Add(15*time.Minute), func() {})
		if *kubeCPUProfile != "" {
			stop := startCPUProfile(b, *kubeCPUProfile)
			lat := newServiceLatency(b, c, 20)
			stop()
			b.Logf("latencies after all were named: %v", lat)
		}
		// Settled as BenchmarkKube measures it: the echoes of the last
		// status writes have reached every part and the cache has frozen
		// what stopped changing.
		waitFrozen(b, hc, api, n, 5*time.Minute)
		hc.CloseIdleConnections()
		live := liveHeap()
		b.ReportMetric(float64(live-base)/float64(n), "live-B/service")
		b.ReportMetric(float64(live)/(1<<20), "live-MiB")
		b.ReportMetric(float64(heapUnused())/(1<<20), "unused-MiB")
		writeHeapProfile(b, *heapProfile)
	}
}

// startCPUProfile profiles this process's CPU into path until the
// function it returns is called; with path empty it does nothing.
func startCPUProfile(b *testing.B, path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// writeHeapProfile writes a heap profile of this process to path, when
// path is not empty.
func writeHeapProfile(b *testing.B, path string) {
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// apiserverCPUProfile starts a 30-second CPU profile of the API server
// (its /debug/pprof, as the administrator) written to path+suffix, and
// returns a function that waits for it; with path empty it does nothing.
func apiserverCPUProfile(b *testing.B, c *kubetest.Cluster, path, suffix string) (wait func()) {
	if path == "" {
		return func() {}
	}
	done := make(chan error, 1)
	go func() {
		resp, err := adminGet(c, "/debug/pprof/profile?seconds=30")
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("API server profile: %s: %s", resp.Status, body)
		}
		if err == nil {
			err = os.WriteFile(path+suffix, body, 0o644)
		}
		done <- err
	}()
	return func() {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}

// adminGet sends GET path to the API server as its administrator, on a
// connection of its own that closes with the response's body.
func adminGet(c *kubetest.Cluster, path string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, c.Host+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+kubetest.AdminToken)
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // a local test cluster's self-signed certificate
	return hc.Do(req)
}

// meshnamesClient is a client of the API server as meshnames' own user,
// with the permissions docs/kubernetes.md's RBAC grants it.
func meshnamesClient(b *testing.B, c *kubetest.Cluster) *kubeapi.Client {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.MeshnamesKubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	client, err := kubeapi.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return client
}

// clusterQuiet waits until the API server and etcd are quiet (under a
// tenth of a core for a second), so that a phase's time and CPU are its
// own, not the tail of what came before it (the seeding, the deletion of
// 10,000 MeshServices, which the watch cache and etcd finish after the
// requests return); it logs how long that took.
func clusterQuiet(b *testing.B, c *kubetest.Cluster) {
	start := time.Now()
	prev := clusterCPUTime(b, c)
	for time.Since(start) < time.Minute {
		time.Sleep(time.Second)
		now := clusterCPUTime(b, c)
		if now-prev < 100*time.Millisecond {
			b.Logf("the API server and etcd were quiet %s after the previous phase", time.Since(start).Round(time.Second))
			return
		}
		prev = now
	}
	b.Logf("the API server and etcd were still busy a minute after the previous phase")
}

// clusterCPUTime is the CPU time the API server and etcd have used.
func clusterCPUTime(b *testing.B, c *kubetest.Cluster) time.Duration {
	t, err := clusterCPU(c)
	if err != nil {
		b.Fatal(err)
	}
	return t
}

// benchCPUTime is the CPU time this process has used.
func benchCPUTime(b *testing.B) time.Duration {
	t, err := cpuTime(os.Getpid())
	if err != nil {
		b.Fatal(err)
	}
	return t
}

// clusterCPU is clusterCPUTime for goroutines other than the benchmark's,
// which may not fail it.
func clusterCPU(c *kubetest.Cluster) (sum time.Duration, err error) {
	for _, pid := range c.Pids() {
		t, err := cpuTime(pid)
		if err != nil {
			return 0, err
		}
		sum += t
	}
	return sum, nil
}

// apiserverRequests counts the API server's requests so far by verb and
// resource, and by code for those not answered 2xx ("PATCH
// meshservices/status", "PATCH meshservices/status 409";
// apiserver_request_total of its /metrics).
func apiserverRequests(b *testing.B, c *kubetest.Cluster) map[string]float64 {
	resp, err := adminGet(c, "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	label := func(line, name string) string {
		_, rest, _ := strings.Cut(line, name+`="`)
		v, _, _ := strings.Cut(rest, `"`)
		return v
	}
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		key := label(line, "verb") + " " + label(line, "resource")
		if sub := label(line, "subresource"); sub != "" {
			key += "/" + sub
		}
		if code := label(line, "code"); !strings.HasPrefix(code, "2") {
			key += " " + code
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			b.Fatalf("apiserver_request_total: %q: %v", line, err)
		}
		out[key] += v
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	return out
}

// The benchmark's signal: a MeshService is named once its status holds
// its hostname Available and a VIP; a creation is read for its key alone.
func TestKubeMeshServiceNamed(t *testing.T) {
	meta := `"metadata":{"name":"web","namespace":"shop","resourceVersion":"5","managedFields":[{"manager":"m"}]}`
	for _, c := range []struct {
		raw   string
		named bool
	}{
		{`{` + meta + `,"spec":{"ports":[{"port":80}]}}`, false},
		{`{` + meta + `,"status":{"vips":[{"ip":"10.96.0.1"}],"addresses":[{"hostname":"web.shop.svc.mesh.local","status":"Available"}]}}`, true},
		{`{` + meta + `,"status":{"vips":[{"ip":"10.96.0.1"}],"addresses":[{"hostname":"web.shop.svc.mesh.local","status":"Unavailable"}]}}`, false},
		{`{` + meta + `,"status":{"vips":[],"addresses":[{"hostname":"web.shop.svc.mesh.local","status":"Available"}]}}`, false},
		{`{` + meta + `,"status":{"addresses":[{"hostname":"web.shop.svc.mesh.local","status":"Available"}]}}`, false},
	} {
		key, named, err := kubeMeshServiceNamed(json.RawMessage(c.raw))
		if err != nil || key != "web.shop" || named != c.named {
			t.Errorf("%s: %q, named %v, %v; want web.shop, %v", c.raw, key, named, err, c.named)
		}
	}
	if _, _, err := kubeMeshServiceNamed(json.RawMessage(`{"metadata":`)); err == nil {
		t.Error("a broken object read without an error")
	}
}
