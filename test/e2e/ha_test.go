package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/meshnames/meshnames/internal/store/postgres/pgtest"
)

// haLease is the short lease of the high-availability tests, so that a
// failover takes seconds: the leader renews every second, the others try
// every 250 ms.
const haLease = 3 * time.Second

var haFlags = []string{"--leader-lease-duration", "3s", "--leader-renew-interval", "1s", "--leader-retry-interval", "250ms"}

// leaderView is the body of GET /_leader.
type leaderView struct {
	Holder  string `json:"holder"`
	Term    int64  `json:"term"`
	Self    string `json:"self"`
	Leading bool   `json:"leading"`
}

func getLeader(api string) (*leaderView, error) {
	resp, err := http.Get(api + "/_leader")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /_leader: %s", resp.Status)
	}
	var l leaderView
	return &l, json.NewDecoder(resp.Body).Decode(&l)
}

// waitLeader waits until exactly one of ps says it leads and the others
// name it as the holder, and returns it.
func waitLeader(t *testing.T, within time.Duration, ps ...*proc) (*proc, *leaderView) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var leaders []*proc
		var view *leaderView
		agree := true
		views := map[string]*leaderView{}
		for _, p := range ps {
			l, err := getLeader(p.api)
			if err != nil {
				agree = false
				continue
			}
			views[p.name] = l
			if l.Leading {
				leaders, view = append(leaders, p), l
			}
		}
		if len(leaders) == 1 && agree {
			for _, l := range views {
				agree = agree && l.Holder == view.Self && l.Term == view.Term
			}
			if agree {
				return leaders[0], view
			}
		}
		if len(leaders) > 1 {
			t.Fatalf("%d instances say they lead at once", len(leaders))
		}
		if time.Now().After(deadline) {
			t.Fatalf("no single leader within %s: %+v", within, views)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// listVIPs pages through every MeshService of mesh default and returns
// their VIPs by name.
func listVIPs(api string) (map[string][]string, error) {
	out := map[string][]string{}
	for offset := 0; ; {
		resp, err := http.Get(fmt.Sprintf("%s/meshes/default/meshservices?size=1000&offset=%d", api, offset))
		if err != nil {
			return nil, err
		}
		var page struct {
			Total int `json:"total"`
			Items []struct {
				Name   string `json:"name"`
				Status struct {
					VIPs []struct {
						IP string `json:"ip"`
					} `json:"vips"`
				} `json:"status"`
			} `json:"items"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("list: %s: %w", resp.Status, err)
		}
		for _, it := range page.Items {
			ips := []string{}
			for _, v := range it.Status.VIPs {
				ips = append(ips, v.IP)
			}
			out[it.Name] = ips
		}
		offset += len(page.Items)
		if len(page.Items) == 0 || offset >= page.Total {
			return out, nil
		}
	}
}

// waitAllVIPs waits until api lists every name of want, each with one VIP.
func waitAllVIPs(t *testing.T, api string, want []string, within time.Duration) map[string][]string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got, err := listVIPs(api)
		missing, without := 0, 0
		if err == nil {
			for _, n := range want {
				ips, ok := got[n]
				switch {
				case !ok:
					missing++
				case len(ips) != 1:
					without++
				}
			}
			if missing == 0 && without == 0 {
				return got
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, %s lists %d of %d services as missing and %d without exactly one VIP (%v)", within, api, missing, len(want), without, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func deleteService(ctx context.Context, api, name string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, api+"/meshes/default/meshservices/"+name, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// resolveA asks the DNS server at addr for name's A record, retrying a
// timed-out query (UDP on a loaded machine).
func resolveA(addr, name string) (string, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	c := &dns.Client{Timeout: 2 * time.Second}
	var err error
	for range 3 {
		var r *dns.Msg
		if r, _, err = c.Exchange(m, addr); err == nil {
			return answerA(r), nil
		}
	}
	return "", err
}

// putAll creates the services names with workers concurrent PUTs spread
// over the instances, moving to the next instance when one does not answer
// (it was killed). It returns the names whose PUT was acknowledged (201, or
// 200 for a retry of a create that had landed). half, when not nil, is
// called once when half the names are acknowledged.
func putAll(ctx context.Context, ps []*proc, names []string, workers int, half func()) []string {
	var acked []string
	var mu sync.Mutex
	var next, count atomic.Int64
	var once sync.Once
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(names) || ctx.Err() != nil {
					return
				}
				for try := range 2 * len(ps) {
					p := ps[(i+w+try)%len(ps)]
					code, err := putService(ctx, p.api, names[i], 80)
					if err == nil && (code == http.StatusCreated || code == http.StatusOK) {
						mu.Lock()
						acked = append(acked, names[i])
						mu.Unlock()
						if count.Add(1) == int64(len(names)/2) && half != nil {
							once.Do(half)
						}
						break
					}
				}
			}
		})
	}
	wg.Wait()
	return acked
}

// TestHA_FailoverDuringAllocation runs three instances on one PostgreSQL
// schema with a 3 s lease. It deletes services (their VIPs go into
// quarantine), then creates 5,000 through all three instances and kills
// the leader with SIGKILL when half are acknowledged, while the leader is
// allocating. Another instance must lead within the lease plus 5 s, and at
// the end every acknowledged service exists with exactly one VIP, no two
// share one, no deleted service's VIP is reused inside its quarantine, and
// the DNS server of every surviving instance answers every name.
//
// The deleted services hold the first addresses of the pool: a new leader
// that rebuilt its pool without the quarantine (or the allocation cursor)
// would hand them out again at once.
func TestHA_FailoverDuringAllocation(t *testing.T) {
	const services, deleted = 5000, 100
	url := pgtest.URL(t)
	var ps []*proc
	for _, name := range []string{"a", "b", "c"} {
		ps = append(ps, start(t, name, append([]string{"--store", url, "--log-level", "info"}, haFlags...)...))
	}
	for _, p := range ps {
		p.waitReady(60 * time.Second)
	}
	begin := time.Now()
	first, view := waitLeader(t, 30*time.Second, ps...)
	t.Logf("%s leads (term %d)", first.name, view.Term)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Services that are deleted before the failover: their VIPs must stay
	// in quarantine (60 s by default) through it.
	var gone []string
	for i := range 2 * deleted {
		gone = append(gone, fmt.Sprintf("gone-%d", i))
	}
	if acked := putAll(ctx, ps, gone, 8, nil); len(acked) != len(gone) {
		t.Fatalf("%d of %d PUTs acknowledged with every instance up", len(acked), len(gone))
	}
	before := waitAllVIPs(t, first.api, gone, 30*time.Second)
	quarantined := map[string]string{} // VIP -> deleted service
	for _, name := range gone[:deleted] {
		if code, err := deleteService(ctx, ps[len(quarantined)%3].api, name); err != nil || code != http.StatusOK {
			t.Fatalf("DELETE %s = %d, %v", name, code, err)
		}
		quarantined[before[name][0]] = name
	}

	t.Logf("%d services created, %d deleted (%s)", len(gone), deleted, time.Since(begin))
	names := slices.Clone(gone[deleted:])
	var fresh []string
	for i := range services {
		fresh = append(fresh, fmt.Sprintf("svc-%d", i))
	}
	var alive []*proc
	for _, p := range ps {
		if p != first {
			alive = append(alive, p)
		}
	}
	var killed time.Time
	took := make(chan time.Duration, 1) // kill to an instance saying it leads
	acked := putAll(ctx, ps, fresh, 16, func() {
		killed = time.Now()
		first.kill()
		go func() {
			for ctx.Err() == nil {
				for _, p := range alive {
					if l, err := getLeader(p.api); err == nil && l.Leading {
						took <- time.Since(killed)
						return
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	})
	if killed.IsZero() {
		t.Fatal("the leader was never killed")
	}
	t.Logf("%d of %d PUTs acknowledged (%s); the leader was killed %s before the last", len(acked), len(fresh), time.Since(begin), time.Since(killed))
	if len(acked) < len(fresh)*9/10 {
		t.Fatalf("only %d of %d PUTs acknowledged with two of three instances up", len(acked), len(fresh))
	}
	names = append(names, acked...)
	select {
	case d := <-took:
		if d > haLease+5*time.Second {
			t.Errorf("another instance led %s after the kill, want within the lease (%s) plus 5s", d, haLease)
		}
		t.Logf("another instance led %s after the kill", d)
	case <-time.After(haLease + 5*time.Second):
		t.Fatalf("no instance led within the lease (%s) plus 5s of the kill", haLease)
	}
	second, view := waitLeader(t, 10*time.Second, alive...)
	t.Logf("%s leads (term %d)", second.name, view.Term)

	for _, p := range alive {
		got := waitAllVIPs(t, p.api, names, 60*time.Second)
		owner := map[string]string{}
		for name, ips := range got {
			if len(ips) != 1 {
				t.Errorf("%s: %s has VIPs %v, want exactly one", p.name, name, ips)
				continue
			}
			if other, ok := owner[ips[0]]; ok {
				t.Errorf("%s: %s and %s share the VIP %s", p.name, name, other, ips[0])
			}
			owner[ips[0]] = name
			if d, ok := quarantined[ips[0]]; ok {
				t.Errorf("%s: %s got %s, the VIP of the deleted %s, inside its quarantine", p.name, name, ips[0], d)
			}
		}
		for _, name := range quarantined {
			if _, ok := got[name]; ok {
				t.Errorf("%s: the deleted service %s is listed", p.name, name)
			}
		}
		t.Logf("%s lists every service with its VIP (%s)", p.name, time.Since(begin))
		checkDNS(t, p, names, got)
		t.Logf("%s's DNS answers every name (%s)", p.name, time.Since(begin))
	}
}

// checkDNS checks that p's DNS server answers every name's hostname with
// its VIP, within a few seconds of the API showing it.
func checkDNS(t *testing.T, p *proc, names []string, vips map[string][]string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var wrong atomic.Int64
	var firstErr error
	var once sync.Once
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(names) {
					return
				}
				host := names[i] + ".svc.mesh.local"
				for {
					got, err := resolveA(p.dns, host)
					if err == nil && got == vips[names[i]][0] {
						break
					}
					if time.Now().After(deadline) {
						wrong.Add(1)
						once.Do(func() { firstErr = fmt.Errorf("%s answered %q (%v), want %s", host, got, err, vips[names[i]][0]) })
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	if n := wrong.Load(); n > 0 {
		t.Errorf("%s: the DNS server did not answer %d of %d names with their VIP; first: %v", p.name, n, len(names), firstErr)
	}
}

// TestHA_CrashFailoverWithDefaults measures the gap in VIP allocation when
// the leader dies by SIGKILL, with the default leader settings (a 15 s
// lease): two instances share a schema; each round kills the leader, at
// once creates a service through the survivor, and measures the time from
// the kill to that service's VIP, which only a new leader can allocate. A
// new instance replaces the dead one for the next round. The gap must stay
// under 5 s: the dead leader's session ends with its process, so the
// survivor takes over at its next try (1 s) without waiting for the lease.
func TestHA_CrashFailoverWithDefaults(t *testing.T) {
	const rounds, limit = 3, 5 * time.Second
	url := pgtest.URL(t)
	ps := []*proc{start(t, "p0", "--store", url, "--log-level", "info"), start(t, "p1", "--store", url, "--log-level", "info")}
	for _, p := range ps {
		p.waitReady(60 * time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var gaps []time.Duration
	for round := range rounds {
		leader, view := waitLeader(t, 30*time.Second, ps...)
		survivor := ps[0]
		if survivor == leader {
			survivor = ps[1]
		}
		// The survivor knows the leader and a write names a service
		// through it, as before any crash.
		warm := fmt.Sprintf("warm-%d", round)
		if code, err := putService(ctx, survivor.api, warm, 80); err != nil || code != http.StatusCreated {
			t.Fatalf("PUT %s = %d, %v", warm, code, err)
		}
		waitVIP(t, survivor.api, warm)

		killed := time.Now()
		leader.kill()
		probe := fmt.Sprintf("probe-%d", round)
		if code, err := putService(ctx, survivor.api, probe, 80); err != nil || code != http.StatusCreated {
			t.Fatalf("PUT %s through the survivor = %d, %v", probe, code, err)
		}
		for {
			if ips, err := serviceVIPs(survivor.api, probe); err == nil && len(ips) == 1 {
				break
			}
			if time.Since(killed) > 30*time.Second {
				t.Fatalf("round %d: %s has no VIP 30 s after the leader (term %d) was killed", round, probe, view.Term)
			}
			time.Sleep(5 * time.Millisecond)
		}
		gap := time.Since(killed)
		gaps = append(gaps, gap)
		t.Logf("round %d: killed %s (term %d); %s got its VIP %s later", round, leader.name, view.Term, probe, gap.Round(time.Millisecond))
		if gap > limit {
			t.Errorf("round %d: VIP allocation stopped for %s after the leader was killed, want under %s", round, gap, limit)
		}
		next := start(t, fmt.Sprintf("p%d", round+2), "--store", url, "--log-level", "info")
		next.waitReady(60 * time.Second)
		ps = []*proc{survivor, next}
	}
	slices.Sort(gaps)
	t.Logf("allocation gaps after SIGKILL of the leader, default settings: min %s, max %s", gaps[0].Round(time.Millisecond), gaps[len(gaps)-1].Round(time.Millisecond))
}
