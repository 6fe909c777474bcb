package bench

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/store/postgres/pgtest"
)

// failoverRuns is how many leaders one benchmark iteration kills.
const failoverRuns = 10

// BenchmarkFailover measures the failover time of instances sharing one
// PostgreSQL schema: from SIGKILL of the leader to the first status write
// by the new leader. The probe is a MeshService PUT through a surviving
// instance right after the kill (so only the new leader can write its
// status) and read back every 5 ms until it shows a VIP. Two instances
// run; after each kill a new instance replaces the dead one. The schema
// holds 10,000 MeshServices, named before the first kill, which the new
// leader's controllers rebuild their state from. Each kill falls at a
// random point of the leader's renewal period. One iteration is
// failoverRuns kills; median-s and max-s are over them.
//
// The leader holds an advisory lock on its election session, which
// PostgreSQL releases when the process dies, so the failover time is up
// to one retry interval, then the new leader's catch-up and controller
// start; the rest of the dead leader's lease matters only when the
// database cannot see that it is gone.
func BenchmarkFailover(b *testing.B) {
	for _, lease := range []struct{ duration, renew, retry string }{
		{"3s", "1s", "250ms"},
		{"15s", "5s", "1s"}, // the defaults
	} {
		b.Run("lease="+lease.duration, func(b *testing.B) {
			renew, err := time.ParseDuration(lease.renew)
			if err != nil {
				b.Fatal(err)
			}
			const n = 10_000
			url := pgtest.URL(b)
			args := []string{"--store", url, "--leader-lease-duration", lease.duration,
				"--leader-renew-interval", lease.renew, "--leader-retry-interval", lease.retry,
				"--data-dir", b.TempDir()} // where the first start writes admin.token
			c := newClient()
			alive := []*serverProc{startServerArgs(b, args...), startServerArgs(b, args...)}
			for _, p := range alive {
				p.waitReady(c, 2*time.Minute)
			}
			names := make([]string, n)
			bodies := make([][]byte, n)
			for i := range n {
				names[i] = fmt.Sprintf("svc-%05d", i)
				bodies[i] = serviceJSON(names[i])
			}
			if _, err := putAll(c, alive[0].api, names, bodies, 16); err != nil {
				b.Fatal(err)
			}
			waitNamed(b, c, alive[0], n, 5*time.Minute)

			var took []time.Duration
			probe := 0
			for b.Loop() {
				took = took[:0]
				for range failoverRuns {
					leader := waitLeading(b, c, alive, time.Minute)
					other := alive[1-leader]
					name := fmt.Sprintf("probe-%03d", probe)
					probe++
					// Kill at a random point of the renewal period, as a
					// crash would fall.
					time.Sleep(rand.N(renew))
					t0 := time.Now()
					alive[leader].kill()
					if err := putService(c, other.api, name, serviceJSON(name), true); err != nil {
						b.Fatal(err)
					}
					for {
						s, err := getService(c, other.api, name)
						if err != nil {
							b.Fatal(err)
						}
						if s.hasVIP() {
							break
						}
						if time.Since(t0) > 2*time.Minute {
							b.Fatalf("%s has no VIP 2 min after the leader was killed", name)
						}
						time.Sleep(5 * time.Millisecond)
					}
					took = append(took, time.Since(t0))
					b.Logf("failover %d: %s", len(took), took[len(took)-1].Round(time.Millisecond))
					p := startServerArgs(b, args...)
					p.waitReady(c, 2*time.Minute)
					alive = []*serverProc{other, p}
				}
			}
			slices.Sort(took)
			b.ReportMetric(percentile(took, 0.5).Seconds(), "median-s")
			b.ReportMetric(took[len(took)-1].Seconds(), "max-s")
			b.ReportMetric(took[0].Seconds(), "min-s")
		})
	}
}

// waitNamed waits until p lists n services, all named.
func waitNamed(b *testing.B, c *http.Client, p *serverProc, n int, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		total, named, err := countNamed(c, p.api)
		if err == nil && total == n && named == n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d services named after %s (%v)", named, total, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitLeading returns the index of the instance of ps that says it leads.
func waitLeading(b *testing.B, c *http.Client, ps []*serverProc, timeout time.Duration) int {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for i, p := range ps {
			resp, err := c.Get(p.api + "/_leader")
			if err != nil {
				continue
			}
			var l struct {
				Leading bool `json:"leading"`
			}
			err = json.NewDecoder(resp.Body).Decode(&l)
			resp.Body.Close()
			if err == nil && l.Leading {
				return i
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("no instance leads after %s", timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
