package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/store/postgres/pgtest"
)

// writeLog is what the writers of a fault test were told: the services
// whose PUT was acknowledged, and those whose PUT got no 2xx (it may have
// committed or not).
type writeLog struct {
	mu      sync.Mutex
	acked   map[string]bool
	unknown map[string]bool
	refused map[int]int // status (0: no answer) -> count
}

func newWriteLog() *writeLog {
	return &writeLog{acked: map[string]bool{}, unknown: map[string]bool{}, refused: map[int]int{}}
}

func (l *writeLog) record(name string, code int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil && (code == http.StatusCreated || code == http.StatusOK) {
		l.acked[name] = true
		return
	}
	l.unknown[name] = true
	l.refused[code]++
}

func (l *writeLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// write runs n writers that PUT new services, in turn to each of apis,
// until ctx ends; a refused PUT is followed by a pause of 20 ms.
func (l *writeLog) write(ctx context.Context, n int, apis []string, prefix string) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				name := fmt.Sprintf("%s-w%d-%d", prefix, w, i)
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				code, _, err := callCtx(rctx, http.MethodPut, apis[(w+i)%len(apis)]+msPath(name), meshService(name, 80, nil))
				cancel()
				if ctx.Err() != nil {
					l.record(name, 0, ctx.Err()) // cut short by the test's end: unknown
					return
				}
				l.record(name, code, err)
				if err != nil || code >= 300 {
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	return &wg
}

// checkServices lists api until every acknowledged service is there and
// every service has a VIP (within: api may be an instance whose copy of
// the store lags the one that acknowledged the last writes), then checks
// that every acknowledged service is there, nothing is there that no
// writer sent, and no VIP is held by two services. It returns the number
// of services.
func (l *writeLog) checkServices(t *testing.T, api string, within time.Duration, allowed func(string) bool) int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var got map[string]*view
	settled := func() bool {
		var err error
		if got, err = list(api); err != nil {
			return false
		}
		for name := range l.acked {
			if got[name] == nil {
				return false
			}
		}
		for _, v := range got {
			if len(v.Status.VIPs) == 0 {
				return false
			}
		}
		return true
	}
	// Until the deadline; what is still missing then is reported below.
	for deadline := time.Now().Add(within); !settled() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if got == nil {
		t.Fatalf("%s: cannot list the services", api)
	}
	for name := range l.acked {
		if got[name] == nil {
			t.Errorf("acknowledged service %s is lost", name)
		}
	}
	holder := map[string]string{}
	for name, v := range got {
		if !l.acked[name] && !l.unknown[name] && !allowed(name) {
			t.Errorf("service %s is there, but no writer sent it", name)
		}
		for _, vip := range v.Status.VIPs {
			if other, ok := holder[vip.IP]; ok {
				t.Errorf("VIP %s is held by %s and %s", vip.IP, other, name)
			}
			holder[vip.IP] = name
		}
	}
	return len(got)
}

// vipOf returns the first VIP of a service, or "".
func vipOf(api, name string) string {
	code, b, err := call(http.MethodGet, api+msPath(name), nil)
	if err != nil || code != http.StatusOK {
		return ""
	}
	var v view
	if json.Unmarshal(b, &v) != nil || len(v.Status.VIPs) == 0 {
		return ""
	}
	return v.Status.VIPs[0].IP
}

// percentile returns the p-th percentile (0-100) of ds, nearest rank.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

// TestPostgresCut: two instances share PostgreSQL, each through a proxy
// of its own, while six writers PUT new services through both. Each cycle
// cuts both proxies, silently or with resets by turns, for one to three
// seconds, then heals them, and measures how long until a service created
// after the heal has a VIP (allocation resumed). Afterwards no
// acknowledged service is lost and no VIP is held by two services.
// Quick: 4 cycles; long: 100.
func TestPostgresCut(t *testing.T) {
	t.Parallel()
	cycles := pick(4, 100)
	base := pgtest.URL(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	var proxies []*proxy
	var servers []*server
	for i := range 2 {
		p := startProxy(t, u.Host)
		pu := *u
		pu.Host = p.addr()
		proxies = append(proxies, p)
		servers = append(servers, serve(t, fmt.Sprintf("pg-%d", i), "--store", pu.String()))
	}
	var apis []string
	for _, s := range servers {
		s.ready(time.Minute)
		apis = append(apis, s.api)
	}
	log := newWriteLog()
	ctx, stop := context.WithCancel(context.Background())
	writers := log.write(ctx, 6, apis, "svc")
	t.Cleanup(func() { stop(); writers.Wait() })
	waitFor(t, time.Minute, "writes before the first cut", func() bool { return log.count() >= 50 })

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 49))
	var resumed []time.Duration
	probes := map[string]bool{}
	for c := range cycles {
		mode := []cut{silent, reset}[c%2]
		for _, p := range proxies {
			p.set(mode)
		}
		time.Sleep(time.Second + time.Duration(rng.IntN(2000))*time.Millisecond)
		for _, p := range proxies {
			p.set(open)
		}
		healed := time.Now()
		probe := fmt.Sprintf("probe-%d", c)
		probes[probe] = true
		api := apis[c%len(apis)]
		waitFor(t, 2*time.Minute, "a service created after the heal gets a VIP", func() bool {
			if code, _, err := call(http.MethodPut, api+msPath(probe), meshService(probe, 80, nil)); err != nil || code >= 300 {
				return false
			}
			return vipOf(api, probe) != ""
		})
		resumed = append(resumed, time.Since(healed))
		t.Logf("cycle %d (%s): allocation resumed %s after the heal", c, mode, resumed[c].Round(time.Millisecond))
	}
	stop()
	writers.Wait()
	n := log.checkServices(t, apis[0], 2*time.Minute, func(name string) bool { return probes[name] })
	t.Logf("%d cycles, 2 instances, 6 writers: %d services (%d acknowledged, %d PUTs unanswered or refused: %v); "+
		"allocation resumed after a heal in p50 %s, p99 %s, max %s",
		cycles, n, log.count(), len(log.unknown), log.refused,
		percentile(resumed, 50).Round(time.Millisecond), percentile(resumed, 99).Round(time.Millisecond), slices.Max(resumed).Round(time.Millisecond))
	for _, s := range servers { // what made a write a 500, if any did
		n := 0
		for line := range strings.SplitSeq(s.log.String(), "\n") {
			if strings.Contains(line, `msg="store write failed"`) && n < 3 {
				t.Logf("%s: %s", s.name, line)
				n++
			}
		}
	}
	if p99 := percentile(resumed, 99); long() && p99 > 5*time.Second {
		t.Errorf("allocation resumed after a heal in p99 %s, want under 5 s", p99)
	}
}
