package hostname

import (
	"fmt"
	"testing"
	"time"
)

// The benchmarks of issue 3: a full computation for 100,000 services and 10
// generators (goal under 1 s), one service change at 100,000 services (goal
// under 1 ms) and one generator change. Each op includes what the
// controller does after the change: TakeDirty and Addresses of every dirty
// service.

const (
	benchServices = 100_000
	benchMeshes   = 10
)

// benchSet returns 10 MeshService generators with distinct templates, most
// selecting every service, and n MeshServices across 10 meshes, so that no
// two claims collide. Of the 10 generators 6 select every service, so
// 100,000 services get 760,000 names.
func benchSet(n int) ([]Generator, []Service) {
	gens := make([]Generator, 10)
	for i := range gens {
		gens[i] = Generator{
			Name:     fmt.Sprintf("gen-%d", i),
			Kind:     kindMS,
			Template: mustTemplate(fmt.Sprintf(`{{ .DisplayName }}.g%d.svc.mesh.local`, i)),
			Local:    i%2 == 0,
			Created:  at(i),
		}
	}
	gens[1].MatchLabels = map[string]string{"team": "a"}
	gens[2].MatchLabels = map[string]string{"app": "web"}
	gens[3].MatchLabels = map[string]string{"kuma.io/origin": "zone"}
	gens[4].MatchLabels = map[string]string{"app": "api", "team": "b"}

	apps := []string{"web", "api", "db", "cache", "queue"}
	teams := []string{"a", "b", "c"}
	svcs := make([]Service, n)
	for i := range svcs {
		labels := map[string]string{
			"app":            apps[i%len(apps)],
			"team":           teams[(i/len(apps))%len(teams)],
			"kuma.io/origin": "zone",
		}
		if i%2 == 0 {
			labels["kuma.io/display-name"] = fmt.Sprintf("display-%06d", i)
		}
		svcs[i] = Service{
			Key:     ServiceKey{Kind: kindMS, Mesh: fmt.Sprintf("mesh-%d", i%benchMeshes), Name: fmt.Sprintf("svc-%06d", i)},
			Labels:  labels,
			Created: t0.Add(time.Duration(i) * time.Second),
		}
	}
	return gens, svcs
}

func benchEngine(gens []Generator, svcs []Service) *Engine {
	e := NewEngine("zone-1")
	for _, g := range gens {
		e.SetGenerator(g)
	}
	for _, s := range svcs {
		e.SetService(s)
	}
	return e
}

// drain does the controller's part after a change and returns how many
// services were dirty.
func drain(b *testing.B, e *Engine) int {
	dirty := e.TakeDirty()
	for _, k := range dirty {
		if _, ok := e.Addresses(k); !ok {
			b.Fatalf("Addresses(%s): unknown", k)
		}
	}
	return len(dirty)
}

func BenchmarkEngine_FullCompute_100kx10(b *testing.B) {
	gens, svcs := benchSet(benchServices)
	b.ReportAllocs()
	var build, read time.Duration
	ops := 0
	for b.Loop() {
		start := time.Now()
		e := benchEngine(gens, svcs)
		built := time.Now()
		if n := drain(b, e); n != benchServices {
			b.Fatalf("%d dirty services, want %d", n, benchServices)
		}
		build += built.Sub(start)
		read += time.Since(built)
		ops++
	}
	// The split between setting everything and reading every status back.
	b.ReportMetric(float64(build.Milliseconds())/float64(ops), "set-ms/op")
	b.ReportMetric(float64(read.Milliseconds())/float64(ops), "read-ms/op")
}

func BenchmarkEngine_OneServiceChange_100k(b *testing.B) {
	gens, svcs := benchSet(benchServices)
	e := benchEngine(gens, svcs)
	drain(b, e)
	// Two display names per service; each op flips one service to the
	// other, which re-renders all its names.
	names := make([][2]string, len(svcs))
	for i := range names {
		names[i] = [2]string{fmt.Sprintf("first-%06d", i), fmt.Sprintf("second-%06d", i)}
	}
	flipped := make([]bool, len(svcs))
	dirty := 0
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		i := (n * 7919) % len(svcs) // spread over meshes and the map
		n++
		flipped[i] = !flipped[i]
		v := names[i][0]
		if flipped[i] {
			v = names[i][1]
		}
		// The engine keeps a copy, so editing the map in place is safe.
		svcs[i].Labels["kuma.io/display-name"] = v
		e.SetService(svcs[i])
		dirty += drain(b, e)
	}
	b.ReportMetric(float64(dirty)/float64(n), "dirty/op")
}

func BenchmarkEngine_GeneratorChange_100k(b *testing.B) {
	gens, svcs := benchSet(benchServices)
	e := benchEngine(gens, svcs)
	drain(b, e)
	// gen-5 selects every service.
	templates := [2]*Template{
		mustTemplate(`{{ .DisplayName }}.g5.svc.mesh.local`),
		mustTemplate(`{{ .DisplayName }}.g5-changed.svc.mesh.local`),
	}
	g := gens[5]
	dirty := 0
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n++
		g.Template = templates[n%2]
		e.SetGenerator(g)
		dirty += drain(b, e)
	}
	b.ReportMetric(float64(dirty)/float64(n), "dirty/op")
}

// BenchmarkEngine_OneServiceChange_Crowded_100k adds to the set above a
// generator that gives every service of a mesh one of 15 names
// (app.team.shared.mesh.local), so that each such name has about 670
// claimants, and flips the app label of one service per op: the service
// leaves one crowded name for another. Unless it held the name, no other
// claimant's address changes, and none should be reported dirty.
func BenchmarkEngine_OneServiceChange_Crowded_100k(b *testing.B) {
	gens, svcs := benchSet(benchServices)
	gens = append(gens, Generator{
		Name:     "crowded",
		Kind:     kindMS,
		Template: mustTemplate(`{{ label "app" }}.{{ label "team" }}.shared.mesh.local`),
		Created:  at(20),
	})
	e := benchEngine(gens, svcs)
	drain(b, e)
	orig := make([]string, len(svcs))
	for i := range svcs {
		orig[i] = svcs[i].Labels["app"]
	}
	dirty := 0
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		i := (n * 7919) % len(svcs)
		n++
		if svcs[i].Labels["app"] == orig[i] {
			svcs[i].Labels["app"] = "other"
		} else {
			svcs[i].Labels["app"] = orig[i]
		}
		e.SetService(svcs[i])
		dirty += drain(b, e)
	}
	b.ReportMetric(float64(dirty)/float64(n), "dirty/op")
}
