package faults

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/zonesync"
)

// multizone is a global on the embedded store and zones reaching it each
// through a proxy of its own.
type multizone struct {
	global  *server
	sync    string // the global's sync address
	zones   map[string]*server
	proxies map[string]*proxy
}

// startMultizone starts a global and the zones named.
func startMultizone(t *testing.T, zones ...string) *multizone {
	t.Helper()
	m := &multizone{sync: addr(t), zones: map[string]*server{}, proxies: map[string]*proxy{}}
	m.global = serve(t, "global", "--mode", "global", "--sync-addr", m.sync, "--sync-heartbeat", "300ms")
	m.global.ready(time.Minute)
	for _, z := range zones {
		m.proxies[z] = startProxy(t, m.sync)
		m.zones[z] = serve(t, z, "--mode", "zone", "--zone", z, "--global-address", "grpcs://"+m.proxies[z].addr(),
			"--zone-token-file", m.token(t, z), "--sync-heartbeat", "300ms")
	}
	for _, z := range zones {
		m.zones[z].ready(time.Minute)
		waitFor(t, time.Minute, z+" has the default mesh from the global", func() bool {
			code, _, err := call(http.MethodGet, m.zones[z].api+"/meshes/default", nil)
			return err == nil && code == http.StatusOK
		})
	}
	return m
}

// token issues a zone token on the global with the command line.
func (m *multizone) token(t *testing.T, zone string) string {
	t.Helper()
	out, err := exec.Command(binary, "token", "zone", "--zone", zone, "--server", m.global.api).Output()
	if err != nil {
		t.Fatalf("token zone --zone %s: %v", zone, err)
	}
	path := filepath.Join(t.TempDir(), zone+".token")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// externalService is a MeshExternalService with an InternalVIP match.
func externalService(name string) map[string]any {
	return map[string]any{"type": "MeshExternalService", "name": name, "mesh": "default",
		"spec": map[string]any{"match": []map[string]any{{"type": "InternalVIP", "value": name + ".ext.mesh.local", "port": 443, "protocol": "tcp"}}}}
}

// churn creates resources at path (a collection under mesh default) with
// doc and deletes one in four of those it created, until ctx ends.
func churn(ctx context.Context, api, plural, prefix string, doc func(string) map[string]any) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 4))
		var made []string
		for i := 0; ctx.Err() == nil; i++ {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if i%4 == 3 && len(made) > 0 {
				j := rng.IntN(len(made))
				_, _, _ = callCtx(rctx, http.MethodDelete, api+"/meshes/default/"+plural+"/"+made[j], nil)
				made = slices.Delete(made, j, j+1)
			} else {
				name := fmt.Sprintf("%s-%d", prefix, i)
				if code, _, err := callCtx(rctx, http.MethodPut, api+"/meshes/default/"+plural+"/"+name, doc(name)); err == nil && code < 300 {
					made = append(made, name)
				}
			}
			cancel()
			time.Sleep(time.Duration(20+rng.IntN(60)) * time.Millisecond)
		}
	})
	return &wg
}

// names returns the names of what lists holds with the origin label.
func names(vs map[string]*view, origin string) []string {
	var out []string
	for n, v := range vs {
		if v.Labels[resource.LabelOrigin] == origin {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// converged says whether every zone holds exactly the other zones'
// services and the global's external services, and the global every
// zone's services; what differs, when not.
// nameDiff says which of the sorted names want are not in the sorted got
// and which of got are not in want, at most five of each.
func nameDiff(got, want []string) string {
	var missing, extra []string
	for _, n := range want {
		if _, ok := slices.BinarySearch(got, n); !ok && len(missing) < 5 {
			missing = append(missing, n)
		}
	}
	for _, n := range got {
		if _, ok := slices.BinarySearch(want, n); !ok && len(extra) < 5 {
			extra = append(extra, n)
		}
	}
	return fmt.Sprintf(" (missing %v, not wanted %v)", missing, extra)
}

func (m *multizone) converged() (bool, string) {
	local := map[string][]string{}
	for z, s := range m.zones {
		vs, err := list(s.api)
		if err != nil {
			return false, err.Error()
		}
		local[z] = names(vs, resource.OriginZone)
	}
	gext, err := listKind(m.global.api, "meshexternalservices")
	if err != nil {
		return false, err.Error()
	}
	var wantExt []string
	for n := range gext {
		wantExt = append(wantExt, zonesync.HashedName(resource.MeshExternalService, "default", n, "", ""))
	}
	sort.Strings(wantExt)
	var wantGlobal []string
	for z, s := range m.zones {
		var want []string
		for other, ns := range local {
			for _, n := range ns {
				h := zonesync.HashedName(resource.MeshService, "default", n, other, "")
				if other != z {
					want = append(want, h)
				}
				if z == other {
					wantGlobal = append(wantGlobal, h)
				}
			}
		}
		sort.Strings(want)
		vs, err := list(s.api)
		if err != nil {
			return false, err.Error()
		}
		if got := names(vs, resource.OriginGlobal); !slices.Equal(got, want) {
			return false, fmt.Sprintf("%s holds %d synced services, want %d%s", z, len(got), len(want), nameDiff(got, want))
		}
		ext, err := listKind(s.api, "meshexternalservices")
		if err != nil {
			return false, err.Error()
		}
		if got := slices.Sorted(maps.Keys(ext)); !slices.Equal(got, wantExt) {
			return false, fmt.Sprintf("%s holds %d external services of the global, want %d%s", z, len(got), len(wantExt), nameDiff(got, wantExt))
		}
	}
	sort.Strings(wantGlobal)
	gs, err := list(m.global.api)
	if err != nil {
		return false, err.Error()
	}
	if got := slices.Sorted(maps.Keys(gs)); !slices.Equal(got, wantGlobal) {
		return false, fmt.Sprintf("the global holds %d services, want %d", len(got), len(wantGlobal))
	}
	return true, ""
}

// waitConverged waits until m converged, failing with what differs after
// within.
func (m *multizone) waitConverged(t *testing.T, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, why := m.converged()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			dumpStacks(append([]*server{m.global}, slices.Collect(maps.Values(m.zones))...))
			t.Fatalf("not converged within %s: %s (the logs end with each process's goroutines)", within, why)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestZonePartitions: a global and three zones, each zone behind a proxy
// cut (silently or with resets) and healed at random, while every zone
// creates and deletes services and the global external services.
// Afterwards every zone holds exactly the others' services and the
// global's external services, and the global every zone's services: none
// missing, none left over, none twice. Quick: 20 s; long: 5,000 services
// created in each zone first, then 10 minutes.
func TestZonePartitions(t *testing.T) {
	t.Parallel()
	run := pick(20*time.Second, 10*time.Minute)
	preload := pick(0, 5_000) // services per zone before the partitions
	m := startMultizone(t, "east", "west", "north")
	for z, s := range m.zones {
		bulk(t, s.api, "pre-"+z, preload)
	}
	ctx, stop := context.WithCancel(context.Background())
	var wgs []*sync.WaitGroup
	for z, s := range m.zones {
		wgs = append(wgs, churn(ctx, s.api, "meshservices", "svc-"+z, func(n string) map[string]any { return meshService(n, 80, nil) }))
	}
	wgs = append(wgs, churn(ctx, m.global.api, "meshexternalservices", "ext", externalService))
	cuts := map[string]int{}
	var mu sync.Mutex
	var chaos sync.WaitGroup
	for z, p := range m.proxies {
		chaos.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(len(z))))
			for ctx.Err() == nil {
				time.Sleep(time.Duration(500+rng.IntN(2500)) * time.Millisecond)
				p.set([]cut{silent, reset}[rng.IntN(2)])
				mu.Lock()
				cuts[z]++
				mu.Unlock()
				time.Sleep(time.Duration(500+rng.IntN(2500)) * time.Millisecond)
				p.set(open)
			}
		})
	}
	time.Sleep(run)
	stop()
	chaos.Wait()
	for _, wg := range wgs {
		wg.Wait()
	}
	for _, p := range m.proxies {
		p.set(open)
	}
	healed := time.Now()
	m.waitConverged(t, 3*time.Minute)
	gs, _ := list(m.global.api)
	t.Logf("%s of partitions (%v cuts by zone): converged %s after the last heal, the global holding %d services",
		run, cuts, time.Since(healed).Round(time.Millisecond), len(gs))
	for z, s := range m.zones {
		if strings.Contains(s.log.String(), "panic") {
			t.Errorf("%s panicked", z)
		}
	}
	// A cut loses nothing a stream acknowledged, so no inventory should
	// have differed; one that did was repaired by a full state, and says
	// what the streams missed.
	for _, s := range append([]*server{m.global}, slices.Collect(maps.Values(m.zones))...) {
		for _, line := range strings.Split(s.log.String(), "\n") {
			if strings.Contains(line, "differs from the peer's inventory") {
				t.Logf("%s: %s", s.name, line)
			}
		}
	}
}

// bulk creates n services named prefix-<i> on api with 8 clients.
func bulk(t *testing.T, api, prefix string, n int) {
	t.Helper()
	putAll(t, n, func(i int) (string, any) {
		name := fmt.Sprintf("%s-%d", prefix, i)
		return api + msPath(name), meshService(name, 80, nil)
	})
}

// putAll PUTs the n documents doc gives (URL and body) with 8 clients,
// retrying each for 5 s.
func putAll(t *testing.T, n int, doc func(i int) (url string, body any)) {
	t.Helper()
	var wg sync.WaitGroup
	next := make(chan int)
	var failed sync.Once
	for range 8 {
		wg.Go(func() {
			for i := range next {
				url, body := doc(i)
				for attempt := 0; ; attempt++ {
					code, b, err := call(http.MethodPut, url, body)
					if err == nil && code < 300 {
						break
					}
					if attempt == 50 {
						failed.Do(func() { t.Errorf("PUT %s: %d %s %v", url, code, b, err) })
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// received is a zone's count of resources received from its global
// (meshnames_zonesync_resources_total).
func received(s *server, zone string) float64 {
	v, _ := s.metric(fmt.Sprintf(`meshnames_zonesync_resources_total{direction="received",zone=%q}`, zone))
	return v
}

// TestKillGlobalDuringInitialSync: east holds N services, synced to the
// global; west connects for the first time and receives them all, and the
// global is killed with SIGKILL in the middle of that initial sync, then
// restarted. west resumes and converges: it holds exactly east's
// services, as east the global's, and the global east's. The kill comes
// once west stored its first batch (at most 1,000 resources). Quick:
// 2,000; long: 10,000.
func TestKillGlobalDuringInitialSync(t *testing.T) {
	t.Parallel()
	n := pick(2_000, 10_000)
	m := startMultizone(t, "east")
	bulk(t, m.zones["east"].api, "bulk", n)
	waitFor(t, 5*time.Minute, "the global holds east's services", func() bool {
		gs, err := list(m.global.api)
		return err == nil && len(gs) == n
	})
	m.proxies["west"] = startProxy(t, m.sync)
	west := serve(t, "west", "--mode", "zone", "--zone", "west", "--global-address", "grpcs://"+m.proxies["west"].addr(),
		"--zone-token-file", m.token(t, "west"), "--sync-heartbeat", "300ms")
	m.zones["west"] = west
	var at float64
	waitFor(t, 5*time.Minute, "west receiving its initial sync", func() bool {
		at = received(west, "west")
		return at > 0
	})
	m.global.restart()
	killedMid := at < float64(n)
	t.Logf("killed the global with SIGKILL when west had received %.0f resources of about %d (mid-sync: %v)", at, n, killedMid)
	m.global.ready(2 * time.Minute)
	start := time.Now()
	m.waitConverged(t, 5*time.Minute)
	t.Logf("%d services: every side converged %s after the global's restart", n, time.Since(start).Round(time.Millisecond))
	if long() && !killedMid { // quick: two batches, which a slow poll may see both of
		t.Error("the initial sync was over before the kill: nothing was tested mid-sync")
	}
}
