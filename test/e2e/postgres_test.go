package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/store/postgres/pgtest"
)

// TestPostgres_TwoInstancesShareState runs two control planes on one
// PostgreSQL schema: a write through one is readable through the other
// within a moment (LISTEN/NOTIFY), and both created the default mesh
// without tripping over each other.
func TestPostgres_TwoInstancesShareState(t *testing.T) {
	t.Parallel() // no timing bound that other processes could break
	url := pgtest.URL(t)
	a := start(t, "a", "--store", url)
	b := start(t, "b", "--store", url)
	a.waitReady(60 * time.Second)
	b.waitReady(60 * time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if code, err := putService(ctx, a.api, "shared", 7000); err != nil || code != http.StatusCreated {
		t.Fatalf("PUT through a = %d, %v", code, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, port, err := getServicePort(b.api, "shared")
		if err == nil && code == http.StatusOK && port == 7000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b never saw the write made through a (last GET %d, port %d, %v)", code, port, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// And back: an update through b reaches a.
	if code, err := putService(ctx, b.api, "shared", 7001); err != nil || code != http.StatusOK {
		t.Fatalf("PUT through b = %d, %v", code, err)
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		if _, port, _ := getServicePort(a.api, "shared"); port == 7001 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a never saw the update made through b")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPostgres_UnreachableDatabase checks that a bad store URL stops the
// process with a message naming the setting.
func TestPostgres_UnreachableDatabase(t *testing.T) {
	t.Parallel() // no timing bound that other processes could break
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := "postgres://nobody@127.0.0.1:" + itoa(freePort(t)) + "/nothing?sslmode=disable&connect_timeout=2"
	_, stderr, err := run(t, ctx, nil, "serve", "--store", url, "--api-addr", "127.0.0.1:0", "--dns-addr", "127.0.0.1:0", "--xds-addr", "127.0.0.1:0")
	if err == nil {
		t.Fatalf("serve with an unreachable database exited 0")
	}
	if !strings.Contains(stderr, "store.url") {
		t.Errorf("error does not name store.url:\n%s", stderr)
	}
}

// TestPostgres_DatabaseLoss cuts the leader off from PostgreSQL with a TCP
// proxy while another instance keeps its connection. The cut-off instance
// keeps answering DNS and reads from its last state, reports not ready,
// refuses writes with 503 and stops leading; the other takes over (at once:
// the cut ended the leader's session) and writes. When the database is back, the cut-off instance recovers by
// itself: ready again, and it serves what was written meanwhile.
func TestPostgres_DatabaseLoss(t *testing.T) {
	url := pgtest.URL(t)
	proxy := pgtest.StartProxy(t, url)
	a := start(t, "a", append([]string{"--store", proxy.URL}, haFlags...)...)
	a.waitReady(60 * time.Second)
	waitLeader(t, 30*time.Second, a)
	b := start(t, "b", append([]string{"--store", url}, haFlags...)...)
	b.waitReady(60 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if code, err := putService(ctx, a.api, "before", 80); err != nil || code != http.StatusCreated {
		t.Fatalf("PUT before = %d, %v", code, err)
	}
	vip := waitVIP(t, a.api, "before")
	eventually(t, "a's DNS answers before", 10*time.Second, func() bool {
		ip, err := resolveA(a.dns, "before.svc.mesh.local")
		return err == nil && ip == vip
	})

	proxy.Cut()
	cut := time.Now()
	eventually(t, "b leads", haLease+5*time.Second, func() bool {
		l, err := getLeader(b.api)
		return err == nil && l.Leading
	})
	t.Logf("b leads %s after the cut", time.Since(cut))
	// a saw its session end when the cut closed its connection, and
	// stopped leading then (b took over because that session ended).
	eventually(t, "a's meshnames_leader_is_leader is 0", 5*time.Second, func() bool {
		v, err := metric(a.api, "meshnames_leader_is_leader")
		return err == nil && v == 0
	})
	eventually(t, "a refuses writes with 503", 10*time.Second, func() bool {
		code, _ := putService(ctx, a.api, "refused", 80)
		return code == http.StatusServiceUnavailable
	})
	eventually(t, "a reports not ready", 15*time.Second, func() bool {
		resp, err := http.Get(a.api + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	})
	if got, err := serviceVIPs(a.api, "before"); err != nil || len(got) != 1 || got[0] != vip {
		t.Errorf("a's GET of before while cut off = %v, %v; want its VIP %s from the last state", got, err, vip)
	}
	if got, err := resolveA(a.dns, "before.svc.mesh.local"); err != nil || got != vip {
		t.Errorf("a's DNS answer for before while cut off = %q, %v; want %s", got, err, vip)
	}
	if code, err := putService(ctx, b.api, "during", 80); err != nil || code != http.StatusCreated {
		t.Fatalf("PUT during through b = %d, %v", code, err)
	}
	during := waitVIP(t, b.api, "during")

	proxy.Restore()
	restored := time.Now()
	a.waitReady(30 * time.Second)
	t.Logf("a ready %s after the database came back", time.Since(restored))
	eventually(t, "a serves what b wrote meanwhile", 15*time.Second, func() bool {
		got, err := serviceVIPs(a.api, "during")
		if err != nil || len(got) != 1 || got[0] != during {
			return false
		}
		ip, err := resolveA(a.dns, "during.svc.mesh.local")
		return err == nil && ip == during
	})
	if code, err := putService(ctx, a.api, "after", 80); err != nil || code != http.StatusCreated {
		t.Errorf("PUT through a after recovery = %d, %v", code, err)
	}
	if l, err := getLeader(a.api); err != nil || l.Leading || l.Holder != mustLeader(t, b).Self {
		t.Errorf("a's view of the leader after recovery = %+v, %v; want b", l, err)
	}
}

func mustLeader(t *testing.T, p *proc) *leaderView {
	t.Helper()
	l, err := getLeader(p.api)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// eventually polls cond until it holds, failing the test after within.
func eventually(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metric returns the value of an unlabelled series of p's /metrics.
func metric(api, name string) (float64, error) {
	resp, err := http.Get(api + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("no series %s", name)
}
