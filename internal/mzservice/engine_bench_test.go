package mzservice

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/resource"
)

// The inputs of the benchmarks: 100,000 MeshServices in 10 zones and 100
// namespaces of mesh default, named svc-<i>, labelled app: app-<i/100>, so
// that each of 1,000 apps has 100 services spread over the 10 zones. Every
// service has port 6379/tcp (named main); one in seven also 9121/http, so
// the computed ports of most apps leave a port out. MeshMultiZoneService
// mzs-<j> selects app-<j>; odd ones declare their port.
const (
	benchServices = 100_000
	benchApps     = 1_000
)

func benchService(i int, app string) *resource.Object {
	name := fmt.Sprintf("svc-%d", i)
	labels := map[string]string{
		resource.LabelDisplayName: name,
		resource.LabelZone:        fmt.Sprintf("zone-%d", i%10),
		resource.LabelOrigin:      resource.OriginZone,
		resource.LabelMesh:        "default",
		resource.LabelNamespace:   fmt.Sprintf("ns-%d", i%100),
		"app":                     app,
	}
	ports := []string{"6379/tcp/main"}
	if i%7 == 0 {
		ports = append(ports, "9121/http/metrics")
	}
	return ms("default", name, labels, ports...)
}

func benchInputs() (svcs, mzss []*resource.Object) {
	svcs = make([]*resource.Object, benchServices)
	for i := range svcs {
		svcs[i] = benchService(i, fmt.Sprintf("app-%d", i/(benchServices/benchApps)))
	}
	mzss = make([]*resource.Object, benchApps)
	for j := range mzss {
		var ps []string
		if j%2 == 1 {
			ps = []string{"6379/tcp/main"}
		}
		mzss[j] = mz("default", fmt.Sprintf("mzs-%d", j), map[string]string{"app": fmt.Sprintf("app-%d", j)}, ps...)
	}
	return svcs, mzss
}

// load feeds a new engine with every input and computes every status, as a
// controller's first pass does.
func load(svcs, mzss []*resource.Object) *Engine {
	c := NewEngine("local")
	for _, s := range svcs {
		c.SetService(s)
	}
	for _, m := range mzss {
		c.SetMultiZoneService(m)
	}
	for _, k := range c.TakeDirty() {
		c.Status(k)
	}
	return c
}

// changes sets objs in turn, one per iteration, and computes the status
// of every MeshMultiZoneService the change marks dirty, as the controller
// does before writing them. It reports the dirty statuses per change and
// the process's CPU time per change (cpu-ns/op, garbage collection
// included), which a busy machine does not inflate as it does ns/op.
func changes(b *testing.B, c *Engine, objs ...*resource.Object) {
	dirty := 0
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for i := range b.N {
		if o := objs[i%len(objs)]; o.Kind == resource.MeshService {
			c.SetService(o)
		} else {
			c.SetMultiZoneService(o)
		}
		for _, k := range c.TakeDirty() {
			c.Status(k)
			dirty++
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(dirty)/float64(b.N), "dirty/op")
}

// BenchmarkEngine_OneServiceRelabelled_100k measures the engine's work for one
// change: svc-0 moves between app-0 and app-1 (100 services each), and the
// statuses of the two MeshMultiZoneServices it leaves and joins are
// computed.
func BenchmarkEngine_OneServiceRelabelled_100k(b *testing.B) {
	svcs, mzss := benchInputs()
	changes(b, load(svcs, mzss), benchService(0, "app-1"), benchService(0, "app-0"))
}

// BenchmarkEngine_UnmatchedServiceChange_100k measures a change of a service
// no MeshMultiZoneService selects (a new label value), the common case.
func BenchmarkEngine_UnmatchedServiceChange_100k(b *testing.B) {
	svcs, mzss := benchInputs()
	svcs[0] = benchService(0, "none-2")
	changes(b, load(svcs, mzss), benchService(0, "none-1"), benchService(0, "none-2"))
}

// BenchmarkEngine_SelectorChange_100k measures a MeshMultiZoneService whose
// selector changes between app-5 and app-6: it is matched against every
// service of the mesh.
func BenchmarkEngine_SelectorChange_100k(b *testing.B) {
	svcs, mzss := benchInputs()
	changes(b, load(svcs, mzss),
		mz("default", "mzs-5", map[string]string{"app": "app-6"}),
		mz("default", "mzs-5", map[string]string{"app": "app-5"}))
}

// BenchmarkEngine_Load_100k measures a first pass: 100,000 services and
// 1,000 MeshMultiZoneServices fed to a new engine and every status
// computed. It reports the heap the engine keeps, per service.
func BenchmarkEngine_Load_100k(b *testing.B) {
	svcs, mzss := benchInputs()
	var heap float64
	var cpu time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		before := liveHeap()
		b.StartTimer()
		start := cpuTime()
		c := load(svcs, mzss)
		cpu += cpuTime() - start
		b.StopTimer()
		heap = float64(liveHeap()-before) / benchServices
		runtime.KeepAlive(c)
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(heap, "heapB/service")
}

// liveHeap returns the bytes of the live heap.
func liveHeap() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
