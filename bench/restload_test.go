package bench

// The write-path benchmark: the load of the black-box REST
// benchmark rest-load (which also measured Kuma), run against a real
// `meshnames serve` from a Go benchmark, recorded in docs/performance.md
// under "Write path".
//
//	go test -run '^$' -bench RestLoad -benchtime 1x -count 3 -timeout 120m ./bench/
//	go test -run '^$' -bench 'RestLoad/embedded/existing=0' -benchtime 1x ./bench/ -args -restload.profile /tmp/prof
//
// A profile covers the server's whole life: with existing services that
// includes loading them. Profiles of the same runs with
// -restload.setup-only, subtracted with go tool pprof -diff_base, leave the
// load.
//
// One iteration is a whole measurement on a fresh server (run it with
// -benchtime 1x and repeat with -count); every iteration's figures are also
// logged (-v) so that runs can be told apart.

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
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

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store/postgres/pgtest"
)

var (
	restLoadProfile   = flag.String("restload.profile", "", "directory BenchmarkRestLoad writes a CPU profile of each server into (MESHNAMES_CPU_PROFILE)")
	restLoadSetupOnly = flag.Bool("restload.setup-only", false, "BenchmarkRestLoad starts and settles each server, then stops it without any load: with -restload.profile, the base profile (go tool pprof -diff_base) that leaves the load alone")
)

// restLoad is one variant of BenchmarkRestLoad.
type restLoad struct {
	store    string // "embedded" or "postgres"
	existing int    // MeshServices stored before the server starts
	n        int    // MeshServices created through the API
	c        int    // concurrent clients
}

// BenchmarkRestLoad creates n MeshServices through the REST API with c
// concurrent clients, exactly as rest-load does (same bodies, one PUT per
// service over keep-alive connections, the whole object in each answer),
// on a server started with --skip-default-generators and the HostnameGenerator
// rest-load creates, then waits until every one of them has a VIP and a
// hostname (rest-load's -poll-mode list -poll 50ms: a paged list scan,
// pages seen ready not fetched again). It reports creates/s (first PUT to
// last answer), PUT latency, the time from the last answer until all were
// ready (including the scan that saw it), the server's CPU seconds per
// 1,000 creates, over the PUTs and up to all ready, the cores it used
// over the PUTs, and the machine's load average when they started.
//
// With existing > 0 the store first holds that many MeshServices (written
// directly, named by the same generator on the server's first start and
// left to settle: all named, the cache frozen, the server idle).
func BenchmarkRestLoad(b *testing.B) {
	for _, v := range []restLoad{
		{store: "embedded", existing: 0, n: 10_000, c: 8},
		{store: "embedded", existing: 100_000, n: 10_000, c: 8},
		{store: "postgres", existing: 0, n: 10_000, c: 8},
	} {
		b.Run(fmt.Sprintf("%s/existing=%d/n=%d/c=%d", v.store, v.existing, v.n, v.c), func(b *testing.B) {
			if testing.Short() {
				b.Skip("-short: BenchmarkRestLoad runs a meshnames server through thousands of creates per iteration")
			}
			v.run(b)
		})
	}
}

// restLoadFigures are one iteration's results.
type restLoadFigures struct {
	createsPerS           float64
	p50, p99, max         time.Duration
	readyAfterLast        time.Duration
	cpuPer1k, cpuPer1kAll float64 // CPU s per 1,000 creates: the PUTs; up to all ready
	cores                 float64 // the server's CPU over the PUTs per second of them
	load1                 float64 // load average (1 min) when the PUTs started
}

func (v restLoad) run(b *testing.B) {
	var all []restLoadFigures
	iter := 0
	for b.Loop() {
		b.StopTimer()
		iter++
		var env []string
		if *restLoadProfile != "" {
			if err := os.MkdirAll(*restLoadProfile, 0o755); err != nil {
				b.Fatal(err)
			}
			name := fmt.Sprintf("restload-%s-existing%d-n%d-c%d-%d.pprof", v.store, v.existing, v.n, v.c, iter)
			env = []string{"MESHNAMES_CPU_PROFILE=" + filepath.Join(*restLoadProfile, name)}
		}
		c := restLoadClient()
		p := v.server(b, c, env)
		if *restLoadSetupOnly {
			p.stop()
			b.Logf("iteration %d: server started and settled, no load (-restload.setup-only)", iter)
			b.StartTimer()
			continue
		}
		b.StartTimer()
		f := v.measure(b, c, p)
		b.StopTimer()
		p.stop()
		b.Logf("iteration %d: %.0f creates/s, PUT p50 %.2f ms p99 %.2f ms max %.1f ms, all ready %.3f s after the last PUT, "+
			"server CPU %.3f s per 1,000 creates (%.3f s up to all ready), %.2f cores, load average %.2f",
			iter, f.createsPerS, ms(f.p50), ms(f.p99), ms(f.max), f.readyAfterLast.Seconds(), f.cpuPer1k, f.cpuPer1kAll, f.cores, f.load1)
		all = append(all, f)
		b.StartTimer()
	}
	if len(all) == 0 {
		return
	}
	avg := func(g func(restLoadFigures) float64) float64 {
		s := 0.0
		for _, f := range all {
			s += g(f)
		}
		return s / float64(len(all))
	}
	b.ReportMetric(avg(func(f restLoadFigures) float64 { return f.createsPerS }), "creates/s")
	b.ReportMetric(avg(func(f restLoadFigures) float64 { return ms(f.p50) }), "put-p50-ms")
	b.ReportMetric(avg(func(f restLoadFigures) float64 { return ms(f.p99) }), "put-p99-ms")
	b.ReportMetric(avg(func(f restLoadFigures) float64 { return ms(f.max) }), "put-max-ms")
	b.ReportMetric(avg(func(f restLoadFigures) float64 { return f.readyAfterLast.Seconds() }), "ready-s-after-last-put")
	b.ReportMetric(avg(func(f restLoadFigures) float64 { return f.cpuPer1k }), "cpu-s/1k-creates")
	b.ReportMetric(avg(func(f restLoadFigures) float64 { return f.cpuPer1kAll }), "cpu-s/1k-to-ready")
	b.ReportMetric(avg(func(f restLoadFigures) float64 { return f.cores }), "server-cores")
	b.ReportMetric(avg(func(f restLoadFigures) float64 { return f.load1 }), "loadavg")
}

// server starts a server for one iteration, with the existing services
// stored, named and settled, and the benchmark's HostnameGenerator.
func (v restLoad) server(b *testing.B, c *http.Client, env []string) *serverProc {
	args := []string{"--skip-default-generators"}
	switch v.store {
	case "embedded":
		dir := b.TempDir()
		if v.existing > 0 {
			t := time.Now()
			seedObjects(b, dir, v.existing, existingService)
			b.Logf("seeded %d services in %s", v.existing, time.Since(t).Round(time.Millisecond))
			// The first start names them all, which a profile must not
			// hold: a profiled server is started again on the named store.
			if env != nil {
				p := startServerArgs(b, append(args, "--data-dir", dir)...)
				v.prepare(b, c, p, true)
				p.stop()
			}
		}
		args = append(args, "--data-dir", dir)
	case "postgres":
		if v.existing > 0 {
			b.Fatal("existing services are seeded only into the embedded store")
		}
		// The data directory still holds admin.token, which the first
		// start writes: keep it out of the working directory.
		args = append(args, "--store", pgtest.URL(b), "--data-dir", b.TempDir())
	default:
		b.Fatalf("unknown store %q", v.store)
	}
	p := startServerEnv(b, env, args...)
	v.prepare(b, c, p, env == nil)
	return p
}

// prepare waits for p, creates what rest-load creates before its load (the
// default mesh when missing, its HostnameGenerator) and, with existing
// services, waits until the server has settled; list confirms that all
// existing services are named with a list of them all.
func (v restLoad) prepare(b *testing.B, c *http.Client, p *serverProc, list bool) {
	p.waitReady(c, 10*time.Minute)
	code, body, err := restLoadDo(c, http.MethodGet, p.api+"/meshes/default", nil)
	if err == nil && code == http.StatusNotFound {
		code, body, err = restLoadDo(c, http.MethodPut, p.api+"/meshes/default", []byte(`{"type":"Mesh","name":"default"}`))
	}
	if err != nil || code >= 300 {
		b.Fatalf("mesh default: HTTP %d %v %s", code, err, body)
	}
	code, body, err = restLoadDo(c, http.MethodPut, p.api+"/hostnamegenerators/bench-hostnames", restLoadGenerator())
	if err != nil || code >= 300 {
		b.Fatalf("PUT HostnameGenerator: HTTP %d %v %s", code, err, body)
	}
	if v.existing == 0 {
		return
	}
	// The runner decides services in key order: wait for the last one
	// (single GETs, cheap), then, with list, confirm with a list of all.
	t := time.Now()
	deadline := t.Add(20 * time.Minute)
	last := existingService(v.existing - 1).Name
	for {
		p.checkAlive()
		code, body, err := restLoadDo(c, http.MethodGet, servicePath(p.api, last), nil)
		if err != nil || code != http.StatusOK {
			b.Fatalf("GET %s: HTTP %d %v %s", last, code, err, body)
		}
		var s restLoadView
		if err := json.Unmarshal(body, &s); err != nil {
			b.Fatal(err)
		}
		if s.ready() {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s has no VIP and hostname after 20 minutes", last)
		}
		time.Sleep(100 * time.Millisecond)
	}
	done := map[int]int{}
	for list {
		p.checkAlive()
		total, ready, err := scanReady(c, p.api, 0, done, nil)
		if err != nil {
			b.Fatal(err)
		}
		if total != v.existing {
			b.Fatalf("the API lists %d MeshServices, want the %d seeded", total, v.existing)
		}
		if ready == v.existing {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d seeded services have a VIP and a hostname after 20 minutes", ready, v.existing)
		}
		time.Sleep(time.Second)
	}
	b.Logf("%d seeded services named %s after ready", v.existing, time.Since(t).Round(time.Millisecond))
	c.CloseIdleConnections()
	waitFrozen(b, c, p.api, v.existing, 10*time.Minute)
	waitIdle(b, p, 5*time.Minute)
}

// measure runs the load against p and returns its figures.
func (v restLoad) measure(b *testing.B, c *http.Client, p *serverProc) restLoadFigures {
	var f restLoadFigures
	f.load1 = loadAverage(b)
	cpu0, err := cpuTime(p.pid())
	if err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, v.n)
	var (
		next     atomic.Int64
		errMu    sync.Mutex
		firstErr error
		failed   int
		wg       sync.WaitGroup
	)
	next.Store(-1)
	start := time.Now()
	for range v.c {
		wg.Go(func() {
			for {
				i := int(next.Add(1))
				if i >= v.n {
					return
				}
				name := restLoadName(i)
				t := time.Now()
				code, body, err := restLoadDo(c, http.MethodPut, servicePath(p.api, name), restLoadService(name, fmt.Sprintf("ns-%d", i%100)))
				lat[i] = time.Since(t)
				if err != nil || code >= 300 {
					errMu.Lock()
					failed++
					if firstErr == nil {
						firstErr = fmt.Errorf("PUT %s: HTTP %d %v %s", name, code, err, body)
					}
					errMu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	lastPut := time.Now()
	cpu1, err := cpuTime(p.pid())
	if err != nil {
		b.Fatal(err)
	}
	if firstErr != nil {
		b.Fatalf("%d of %d PUTs failed; first: %v", failed, v.n, firstErr)
	}
	// The new services sort after the existing ones (svc- after old-):
	// only their pages are scanned.
	done := map[int]int{}
	for deadline := lastPut.Add(5 * time.Minute); ; {
		total, ready, err := scanReady(c, p.api, v.existing, done, restLoadLoaded)
		if err != nil {
			b.Fatal(err)
		}
		if total != v.n {
			b.Fatalf("the API lists %d MeshServices after the %d existing, want %d", total, v.existing, v.n)
		}
		if ready == v.n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d services have a VIP and a hostname 5 minutes after the last PUT", ready, v.n)
		}
		p.checkAlive()
		time.Sleep(50 * time.Millisecond)
	}
	allReady := time.Now()
	cpu2, err := cpuTime(p.pid())
	if err != nil {
		b.Fatal(err)
	}
	slices.Sort(lat)
	f.createsPerS = float64(v.n) / lastPut.Sub(start).Seconds()
	f.p50, f.p99, f.max = percentile(lat, 0.5), percentile(lat, 0.99), lat[len(lat)-1]
	f.readyAfterLast = allReady.Sub(lastPut)
	f.cpuPer1k = (cpu1 - cpu0).Seconds() / float64(v.n) * 1000
	f.cpuPer1kAll = (cpu2 - cpu0).Seconds() / float64(v.n) * 1000
	f.cores = (cpu1 - cpu0).Seconds() / lastPut.Sub(start).Seconds()
	return f
}

// restLoadClient is rest-load's HTTP client.
func restLoadClient() *http.Client {
	return &http.Client{
		Timeout:   60 * time.Second,
		Transport: &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64},
	}
}

// restLoadDo sends one request as rest-load does and reads the whole
// answer.
func restLoadDo(c *http.Client, method, url string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// restLoadName is the name rest-load gives its i-th service.
func restLoadName(i int) string { return fmt.Sprintf("svc-%d", i) }

// restLoadService is the body rest-load PUTs for a service with
// -no-selector, encoded as it encodes it (from a map, per request).
func restLoadService(name, ns string) []byte {
	b, err := json.Marshal(map[string]any{
		"type": "MeshService",
		"name": name,
		"mesh": "default",
		"labels": map[string]string{
			"kuma.io/origin": "zone",
			"kuma.io/env":    "universal",
			"bench":          "true",
			"ns":             ns,
		},
		"spec": map[string]any{
			"ports": []map[string]any{{"port": 80, "targetPort": 8080, "appProtocol": "http", "name": "main"}},
		},
	})
	if err != nil {
		panic(err)
	}
	return b
}

// restLoadGenerator is the HostnameGenerator rest-load creates.
func restLoadGenerator() []byte {
	b, err := json.Marshal(map[string]any{
		"type":   "HostnameGenerator",
		"name":   "bench-hostnames",
		"labels": map[string]string{"kuma.io/origin": "zone"},
		"spec": map[string]any{
			"template": `{{ .DisplayName }}.{{ label "ns" }}.svc.mesh.local`,
			"selector": map[string]any{"meshService": map[string]any{"matchLabels": map[string]string{"bench": "true"}}},
		},
	})
	if err != nil {
		panic(err)
	}
	return b
}

// existingService is the i-th service stored before the server starts: what
// the API stores for a rest-load PUT, named old-NNNNNN so that all of them
// sort before the load's svc-N.
func existingService(i int) *resource.Object {
	name := fmt.Sprintf("old-%06d", i)
	return &resource.Object{
		Kind: resource.MeshService, Mesh: "default", Name: name,
		Labels: systemLabels(name, map[string]string{
			"kuma.io/env": "universal", "bench": "true", "ns": fmt.Sprintf("ns-%d", i%100),
		}),
		Spec: &resource.MeshServiceSpec{
			Ports: []resource.Port{{Name: "main", Port: 80, TargetPort: &resource.IntOrString{Int: 8080}, AppProtocol: "http"}},
		},
	}
}

// restLoadLoaded reports whether name is one of the load's services.
func restLoadLoaded(name string) bool {
	n, ok := strings.CutPrefix(name, "svc-")
	if !ok {
		return false
	}
	_, err := strconv.Atoi(n)
	return err == nil
}

// restLoadView is what rest-load reads of a service: ready when it has a
// VIP and a hostname.
type restLoadView struct {
	Name   string `json:"name"`
	Status struct {
		VIPs []struct {
			IP string `json:"ip"`
		} `json:"vips"`
		Addresses []restLoadAddress `json:"addresses"`
	} `json:"status"`
}

type restLoadAddress struct {
	Hostname string `json:"hostname"`
}

func (s *restLoadView) ready() bool {
	return len(s.Status.VIPs) > 0 && s.Status.VIPs[0].IP != "" &&
		slices.ContainsFunc(s.Status.Addresses, func(a restLoadAddress) bool { return a.Hostname != "" })
}

// scanPage is the size of a page of scanReady, rest-load's.
const scanPage = 1000

// scanReady lists the MeshServices of mesh default from offset on, 1,000
// at a time, and returns how many there are from offset and how many of
// them are ready. done, when not nil, holds the pages (by offset) seen all
// ready, which are not fetched again, as rest-load's list poll does. want,
// when not nil, must hold every name listed.
func scanReady(c *http.Client, api string, offset int, done map[int]int, want func(string) bool) (total, ready int, err error) {
	for off := offset; ; off += scanPage {
		if n, ok := done[off]; ok {
			total, ready = total+n, ready+n
			if n < scanPage {
				return total, ready, nil
			}
			continue
		}
		code, body, err := restLoadDo(c, http.MethodGet, fmt.Sprintf("%s/meshes/default/meshservices?size=%d&offset=%d", api, scanPage, off), nil)
		if err != nil {
			return 0, 0, err
		}
		if code != http.StatusOK {
			return 0, 0, fmt.Errorf("list: HTTP %d: %.300s", code, body)
		}
		var page struct {
			Total int            `json:"total"`
			Items []restLoadView `json:"items"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			return 0, 0, err
		}
		r := 0
		for i := range page.Items {
			if want != nil && !want(page.Items[i].Name) {
				return 0, 0, fmt.Errorf("list: %s at offset %d is not one of the services scanned", page.Items[i].Name, off+i)
			}
			if page.Items[i].ready() {
				r++
			}
		}
		total, ready = total+len(page.Items), ready+r
		if done != nil && len(page.Items) > 0 && r == len(page.Items) {
			done[off] = r
		}
		if len(page.Items) < scanPage || off+len(page.Items) >= page.Total {
			return total, ready, nil
		}
	}
}

// waitIdle waits until p has used under 20 ms of CPU over a second.
func waitIdle(b *testing.B, p *serverProc, timeout time.Duration) {
	b.Helper()
	for deadline := time.Now().Add(timeout); ; {
		c0, err := cpuTime(p.pid())
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(time.Second)
		c1, err := cpuTime(p.pid())
		if err != nil {
			b.Fatal(err)
		}
		if c1-c0 < 20*time.Millisecond {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("server still busy (%s of CPU in the last second) after %s", c1-c0, timeout)
		}
	}
}

// loadAverage returns the machine's 1-minute load average.
func loadAverage(b *testing.B) float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		b.Fatalf("malformed /proc/loadavg: %q", raw)
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		b.Fatal(err)
	}
	return v
}
