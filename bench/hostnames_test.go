package bench

// Benchmarks of naming (hostnames and VIPs) against real `meshnames serve`
// processes on the embedded store, recorded in docs/performance.md
// (Targets, Naming, Memory). Each runs only with -bench: all setup (building
// the binary, seeding, starting servers) happens inside the benchmark
// functions, which use b.Loop and so run once per -count.
//
//	go test -run '^$' -bench PutToHostname -benchtime 200x -timeout 60m ./bench/
//	go test -run '^$' -bench 'BulkNaming|Idle' -benchtime 1x -timeout 60m ./bench/
//
// BulkNaming and Idle do a whole measurement per iteration (a fresh server
// each time); run them with -benchtime 1x and repeat with -count.

import (
	"flag"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// pollInterval is the pause between two reads of a service that is not
// named yet.
const pollInterval = 500 * time.Microsecond

// waitInitialNaming waits until all n seeded services carry their default
// hostname as Available and returns when the API first showed that: when
// the last seeded service (the controller writes in name order) was named,
// confirmed by listing every service.
func waitInitialNaming(b *testing.B, c *http.Client, p *serverProc, n int, timeout time.Duration) time.Time {
	at, _ := waitInitialNamingCPU(b, c, p, n, timeout)
	return at
}

// waitInitialNamingCPU is waitInitialNaming that also returns the CPU time
// the server had used when the services were seen named, read before the
// listing that confirms it (a list of all n costs seconds of CPU at
// 100,000) unless that listing found some still unnamed.
func waitInitialNamingCPU(b *testing.B, c *http.Client, p *serverProc, n int, timeout time.Duration) (time.Time, time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	last := seededName(n - 1)
	var at time.Time
	for {
		p.checkAlive()
		s, err := getService(c, p.api, last)
		if err != nil {
			b.Fatal(err)
		}
		if s.named() {
			at = time.Now()
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s not named after %s", last, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	used, err := cpuTime(p.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	for first := true; ; first = false {
		total, named, err := countNamed(c, p.api)
		if err != nil {
			b.Fatal(err)
		}
		if total != n {
			b.Fatalf("the API lists %d MeshServices, want %d", total, n)
		}
		if named == n {
			if !first {
				// The last service was not the last one named.
				at = time.Now()
				if used, err = cpuTime(p.cmd.Process.Pid); err != nil {
					b.Fatal(err)
				}
			}
			return at, used
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d services named after %s", named, n, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// percentile returns the nearest-rank q-quantile of sorted ds.
func percentile(sorted []time.Duration, q float64) time.Duration {
	i := int(float64(len(sorted))*q+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// BenchmarkPutToHostname measures, with N MeshServices already named, the
// time from just before the PUT of one new MeshService to the first GET of
// it that shows its default hostname Available (GETs 0.5 ms apart). The N
// services are written into the data directory before the server starts;
// the time the server takes from exec to all N named is reported as
// initial-naming-s (the full computation, end to end).
func BenchmarkPutToHostname(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			t := time.Now()
			seedServices(b, dir, n)
			b.Logf("seeded %d services in %s", n, time.Since(t).Round(time.Millisecond))

			c := newClient()
			p := startServer(b, dir)
			ready := p.waitReady(c, 10*time.Minute)
			named, namingCPU := waitInitialNamingCPU(b, c, p, n, 20*time.Minute)
			ctrl, ok := p.controllerStart()
			if !ok {
				b.Fatal("the server did not log the controllers' start")
			}
			okWrites, err1 := metric(c, p.api, writesOK)
			failed, err2 := metric(c, p.api, writesFailed)
			if err1 != nil || err2 != nil {
				b.Fatal(err1, err2)
			}
			b.Logf("ready after %s, all %d named after %s (controller start %s, CPU %s), status writes: %.0f ok, %.0f failed",
				ready.Sub(p.started).Round(time.Millisecond), n, named.Sub(p.started).Round(time.Millisecond),
				ctrl.Round(time.Millisecond), namingCPU, okWrites, failed)

			var lat, latName, latVIP, put []time.Duration
			i := 0
			for b.Loop() {
				name := fmt.Sprintf("new-%06d", i)
				i++
				body := serviceJSON(name)
				t0 := time.Now()
				if err := putService(c, p.api, name, body, false); err != nil {
					b.Fatal(err)
				}
				put = append(put, time.Since(t0))
				var sawName, sawVIP bool
				for {
					s, err := getService(c, p.api, name)
					if err != nil {
						b.Fatal(err)
					}
					if !sawName && s.hasName() {
						sawName = true
						latName = append(latName, time.Since(t0))
					}
					if !sawVIP && s.hasVIP() {
						sawVIP = true
						latVIP = append(latVIP, time.Since(t0))
					}
					if s.named() {
						break
					}
					if time.Since(t0) > 30*time.Second {
						b.Fatalf("%s not named 30 s after its PUT: %+v", name, s.Status)
					}
					time.Sleep(pollInterval)
				}
				lat = append(lat, time.Since(t0))
			}
			slices.Sort(lat)
			slices.Sort(latName)
			slices.Sort(latVIP)
			slices.Sort(put)
			b.ReportMetric(ms(percentile(lat, 0.5)), "p50-ms")
			b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
			b.ReportMetric(ms(percentile(latName, 0.5)), "hostname-p50-ms")
			b.ReportMetric(ms(percentile(latName, 0.99)), "hostname-p99-ms")
			b.ReportMetric(ms(percentile(latVIP, 0.5)), "vip-p50-ms")
			b.ReportMetric(ms(percentile(latVIP, 0.99)), "vip-p99-ms")
			b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
			b.ReportMetric(ms(percentile(put, 0.5)), "put-p50-ms")
			b.ReportMetric(named.Sub(p.started).Seconds(), "initial-naming-s")
			b.ReportMetric(namingCPU.Seconds(), "initial-naming-cpu-s")
			b.ReportMetric(ready.Sub(p.started).Seconds(), "ready-s")
			b.ReportMetric(ctrl.Seconds(), "controller-start-s")
			b.ReportMetric(failed, "initial-failed-writes")
			p.stop() // SIGTERM: a MESHNAMES_CPU_PROFILE is written
		})
	}
}

// putAll PUTs every service with the given number of workers and returns
// when the last PUT was acknowledged.
func putAll(c *http.Client, api string, names []string, bodies [][]byte, workers int) (time.Time, error) {
	return putAllAt(c, func(name string) string { return servicePath(api, name) }, names, bodies, workers)
}

// putAllAt PUTs bodies[i] to path(names[i]) with workers concurrent
// requests and returns when the last PUT was acknowledged.
func putAllAt(c *http.Client, path func(name string) string, names []string, bodies [][]byte, workers int) (time.Time, error) {
	var (
		mu      sync.Mutex
		lastAck time.Time
		errs    []error
		wg      sync.WaitGroup
	)
	jobs := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				err := putResource(c, path(names[i]), bodies[i], true)
				ack := time.Now()
				mu.Lock()
				if ack.After(lastAck) {
					lastAck = ack
				}
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	for i := range names {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if len(errs) > 0 {
		return lastAck, fmt.Errorf("%d of %d PUTs failed; first: %w", len(errs), len(names), errs[0])
	}
	return lastAck, nil
}

// BenchmarkBulkNaming PUTs 10,000 (and 100,000) new MeshServices into a
// fresh server with 16 concurrent workers (keep-alive connections, Prefer:
// return=minimal, as `meshnames apply` does) and measures how long after
// the last acknowledged PUT all of them are named. The probe is the
// controller's count of successful status writes (/metrics, every 2 ms);
// a full list of the services then confirms that each shows its hostname
// Available; s-after-last-put-list is when that list completed, an upper
// bound that includes the list itself (list-s).
func BenchmarkBulkNaming(b *testing.B) {
	const workers = 16
	for _, n := range []int{10_000, 100_000} {
		benchBulkNaming(b, n, workers)
	}
}

func benchBulkNaming(b *testing.B, n, workers int) {
	b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
		names := make([]string, n)
		bodies := make([][]byte, n)
		for i := range n {
			names[i] = fmt.Sprintf("bulk-%05d", i)
			bodies[i] = serviceJSON(names[i])
		}
		var afterLast, afterLastList, putS, totalS, listS []float64
		for b.Loop() {
			b.StopTimer()
			c := newClient()
			p := startServer(b, b.TempDir())
			p.waitReady(c, time.Minute)
			base, err := metric(c, p.api, writesOK)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()

			start := time.Now()
			lastAck, err := putAll(c, p.api, names, bodies, workers)
			if err != nil {
				b.Fatal(err)
			}
			var probe time.Time
			for deadline := time.Now().Add(5 * time.Minute); ; {
				v, err := metric(c, p.api, writesOK)
				if err != nil {
					b.Fatal(err)
				}
				if v-base >= float64(n) {
					probe = time.Now()
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("%.0f of %d status writes after 5 minutes", v-base, n)
				}
				p.checkAlive()
				time.Sleep(2 * time.Millisecond)
			}
			b.StopTimer()

			var listed time.Time
			var listTook time.Duration
			for deadline := time.Now().Add(time.Minute); ; {
				t := time.Now()
				total, named, err := countNamed(c, p.api)
				listTook = time.Since(t)
				if err != nil {
					b.Fatal(err)
				}
				if total != n {
					b.Fatalf("the API lists %d MeshServices, want %d", total, n)
				}
				if named == n {
					listed = time.Now()
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("%d of %d named a minute after the probe said all were written", named, n)
				}
				time.Sleep(10 * time.Millisecond)
			}
			p.stop()
			afterLast = append(afterLast, probe.Sub(lastAck).Seconds())
			afterLastList = append(afterLastList, listed.Sub(lastAck).Seconds())
			putS = append(putS, lastAck.Sub(start).Seconds())
			totalS = append(totalS, probe.Sub(start).Seconds())
			listS = append(listS, listTook.Seconds())
			b.StartTimer()
		}
		b.ReportMetric(mean(afterLast), "s-after-last-put")
		b.ReportMetric(mean(afterLastList), "s-after-last-put-list")
		b.ReportMetric(mean(putS), "put-s")
		b.ReportMetric(mean(totalS), "total-s")
		b.ReportMetric(mean(listS), "list-s")
	})
}

// idleSettle is how long a server is left alone before an idle window.
const idleSettle = 5 * time.Second

// idleWindow is how long idle CPU is sampled. The Go runtime forces a
// garbage collection every 2 minutes, after which it returns memory to the
// OS: a window longer than that (go test ... -args -idle-window 150s)
// includes one, in the CPU and in the RSS read at its end.
var idleWindow = flag.Duration("idle-window", 10*time.Second, "how long BenchmarkIdle samples CPU before it reads RSS")

// idleCores returns the CPU the server used over *idleWindow while nothing
// talked to it, in cores (CPU seconds per wall second).
func idleCores(b *testing.B, p *serverProc) float64 {
	b.Helper()
	cpu0, err := cpuTime(p.pid())
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	time.Sleep(*idleWindow)
	cpu1, err := cpuTime(p.pid())
	if err != nil {
		b.Fatal(err)
	}
	return (cpu1 - cpu0).Seconds() / time.Since(t0).Seconds()
}

// settledIdle waits idleSettle, then returns p's CPU over the idle window
// (idleCores) and its RSS at the end of it.
func settledIdle(b *testing.B, p *serverProc) (cores float64, rssBytes int64) {
	b.Helper()
	time.Sleep(idleSettle)
	cores = idleCores(b, p)
	r, err := rss(p.pid())
	if err != nil {
		b.Fatal(err)
	}
	return cores, r
}

// BenchmarkIdle measures a server holding 100,000 named MeshServices while
// nothing changes: its CPU over 10 s (-idle-window) without requests,
// after its cache has frozen what stopped changing and 5 s of quiet, and
// its RSS at the end of that window, less the RSS of a fresh server
// without services measured the same way in the same iteration, per
// service. The server first names every service (a store seeded without
// status); it is then restarted on the same store and measured again
// (restart-*), as after an upgrade.
func BenchmarkIdle(b *testing.B) {
	const n = 100_000
	b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
		var cores, emptyCores, perService, emptyRSS, fullRSS, heapPerService, restartPerService, restartCores []float64
		for b.Loop() {
			c := newClient()
			empty := startServer(b, b.TempDir())
			empty.waitReady(c, time.Minute)
			ec, r0 := settledIdle(b, empty)
			emptyCores = append(emptyCores, ec)
			h0, err := metric(c, empty.api, heapInuse)
			if err != nil {
				b.Fatal(err)
			}
			empty.stop()

			dir := b.TempDir()
			seedServices(b, dir, n)
			p := startServer(b, dir)
			p.waitReady(c, 10*time.Minute)
			waitInitialNaming(b, c, p, n, 20*time.Minute)
			c.CloseIdleConnections()
			if cpu, err := cpuTime(p.pid()); err != nil || cpu < time.Second {
				// Naming 100,000 services takes seconds of CPU: anything
				// less means /proc/PID/stat was misread.
				b.Fatalf("server CPU time after naming %d services is %s (%v)", n, cpu, err)
			}
			waitFrozen(b, c, p.api, n, 5*time.Minute)
			pc, r1 := settledIdle(b, p)
			cores = append(cores, pc)
			h1, err := metric(c, p.api, heapInuse)
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("Go runtime memory with %d services: %s", n, runtimeMemory(b, c, p.api))
			p.stop()
			b.Logf("RSS %d MiB empty, %d MiB with %d services; heap in use %.0f MiB empty, %.0f MiB with %d services",
				r0>>20, r1>>20, n, h0/(1<<20), h1/(1<<20), n)

			// A restart on the same store, every service named: what an
			// upgrade or a new leader's process goes through.
			p = startServer(b, dir)
			start := time.Now()
			p.waitReady(c, 10*time.Minute)
			waitInitialNaming(b, c, p, n, 10*time.Minute)
			waitFrozen(b, c, p.api, n, 5*time.Minute)
			rc, r2 := settledIdle(b, p)
			restartCores = append(restartCores, rc)
			c.CloseIdleConnections()
			p.stop()
			b.Logf("restarted with %d named services: frozen and settled %s after exec, RSS %d MiB", n, time.Since(start).Round(time.Second), r2>>20)
			restartPerService = append(restartPerService, float64(r2-r0)/n)
			emptyRSS = append(emptyRSS, float64(r0))
			fullRSS = append(fullRSS, float64(r1))
			perService = append(perService, float64(r1-r0)/n)
			heapPerService = append(heapPerService, (h1-h0)/n)
		}
		b.ReportMetric(mean(cores), "cores")
		b.ReportMetric(mean(emptyCores), "cores-empty")
		b.ReportMetric(mean(perService), "rss-bytes-per-service")
		b.ReportMetric(mean(fullRSS)/(1<<20), "rss-MiB")
		b.ReportMetric(mean(emptyRSS)/(1<<20), "rss-MiB-empty")
		b.ReportMetric(mean(heapPerService), "heap-bytes-per-service")
		b.ReportMetric(mean(restartPerService), "restart-rss-bytes-per-service")
		b.ReportMetric(mean(restartCores), "restart-cores")
	})
}
