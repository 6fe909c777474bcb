package mzservice

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/resource"
)

// fromScratch computes the status of the MeshMultiZoneService obj the
// simple way: every service of every mesh, matched with the resource
// package's own selector rule, read from the objects themselves.
func fromScratch(zone string, obj *resource.Object, svcs map[resource.Key]*resource.Object) Result {
	spec := obj.Spec.(*resource.MeshMultiZoneServiceSpec)
	var members []member
	for _, s := range svcs {
		if s.Mesh != obj.Mesh || !spec.Selector.MeshService.Matches(s.Labels) {
			continue
		}
		mb := member{name: s.Name, display: s.Name, zone: zone, namespace: s.Labels[resource.LabelNamespace]}
		if v, ok := s.Labels[resource.LabelDisplayName]; ok {
			mb.display = v
		}
		if v, ok := s.Labels[resource.LabelZone]; ok {
			mb.zone = v
		}
		mb.ports = string(appendPorts(nil, s.Spec.(*resource.MeshServiceSpec).Ports))
		members = append(members, mb)
	}
	return build(obj.Mesh, selectorOf(spec), declaredPorts(spec), members)
}

// world is an engine beside the objects it was fed, and the status last seen
// of each MeshMultiZoneService.
type world struct {
	engine *Engine
	svcs   map[resource.Key]*resource.Object
	mzs    map[resource.Key]*resource.Object
	seen   map[resource.Key]Result
}

func newWorld() *world {
	return &world{engine: NewEngine("local"), svcs: map[resource.Key]*resource.Object{}, mzs: map[resource.Key]*resource.Object{}, seen: map[resource.Key]Result{}}
}

// randomOp makes one change from the choices pick returns (pick(n) is in
// [0, n)) over a small space of names, labels and ports, so that matches,
// relabels, collisions of anchors and disagreeing ports are frequent.
// serviceName picks the name of a service: s0 to s11, or one made from
// a Kubernetes Service, s0 to s3 of namespace ns1 or ns2.
func serviceName(pick func(int) int) string {
	i := pick(20)
	if i < 12 {
		return fmt.Sprintf("s%d", i)
	}
	return fmt.Sprintf("s%d.ns%d", (i-12)%4, 1+(i-12)/4)
}

func (w *world) randomOp(pick func(int) int) {
	meshes := []string{"default", "other"}
	mesh := meshes[pick(len(meshes))]
	switch pick(6) {
	case 0, 1, 2: // set a service
		name := serviceName(pick)
		display, _, _ := strings.Cut(name, ".") // a Kubernetes Service's
		labels := map[string]string{}
		for _, kv := range []struct {
			k    string
			vals []string
		}{
			{"app", []string{"a", "b", ""}},
			{"tier", []string{"x", "y"}},
			{resource.LabelZone, []string{"east", "west", "south"}},
			{resource.LabelNamespace, []string{"ns1", "ns2"}},
			{resource.LabelDisplayName, []string{name, "shared", display}},
			{resource.LabelServiceName, []string{display, "s1"}},
		} {
			if i := pick(len(kv.vals) + 1); i < len(kv.vals) {
				labels[kv.k] = kv.vals[i]
			}
		}
		var ps []string
		for _, p := range []string{"80/http", "80/tcp", "81/tcp", "81/tcp/admin", "82/grpc"} {
			if pick(3) == 0 && !slices.ContainsFunc(ps, func(q string) bool { return q[:2] == p[:2] }) {
				ps = append(ps, p)
			}
		}
		o := ms(mesh, name, labels, ps...)
		w.svcs[o.Key()] = o
		w.engine.SetService(o)
	case 3: // delete a service
		k := msKey(mesh, serviceName(pick))
		delete(w.svcs, k)
		w.engine.DeleteService(k)
	case 4: // set a MeshMultiZoneService
		name := fmt.Sprintf("m%d", pick(5))
		var sel map[string]string
		if pick(8) != 0 { // else no selector at all
			sel = map[string]string{}
			for _, kv := range []struct {
				k    string
				vals []string
			}{
				{"app", []string{"a", "b", ""}},
				{"tier", []string{"x", "y"}},
				{resource.LabelZone, []string{"east", "west"}},
				{resource.LabelDisplayName, []string{"s1", "shared"}},
				{resource.LabelNamespace, []string{"ns1", "ns2"}},
				{resource.LabelServiceName, []string{"s1"}},
			} {
				if i := pick(len(kv.vals) + 2); i < len(kv.vals) {
					sel[kv.k] = kv.vals[i]
				}
			}
		}
		var ps []string
		if pick(3) == 0 {
			ps = []string{"80/http/web", "90/tcp"}[:1+pick(2)]
		}
		o := mz(mesh, name, sel, ps...)
		w.mzs[o.Key()] = o
		w.engine.SetMultiZoneService(o)
	case 5: // delete a MeshMultiZoneService
		k := mzKey(mesh, fmt.Sprintf("m%d", pick(5)))
		delete(w.mzs, k)
		w.engine.DeleteMultiZoneService(k)
	}
}

// check compares the engine with the computation from scratch: every
// status, and that every status that changed since the last check was
// reported dirty.
func (w *world) check(t testing.TB) {
	t.Helper()
	dirty := w.engine.TakeDirty()
	if !slices.IsSortedFunc(dirty, func(a, b resource.Key) int { return strings.Compare(a.String(), b.String()) }) || len(slices.Compact(slices.Clone(dirty))) != len(dirty) {
		t.Fatalf("TakeDirty is not sorted and unique: %v", dirty)
	}
	for _, k := range dirty {
		if _, ok := w.mzs[k]; !ok {
			t.Fatalf("TakeDirty reports %s, which does not exist", k)
		}
	}
	for _, k := range slices.Collect(maps.Keys(w.seen)) {
		if _, ok := w.mzs[k]; !ok {
			delete(w.seen, k)
		}
	}
	for k, obj := range w.mzs {
		want := fromScratch("local", obj, w.svcs)
		got, ok := w.engine.Status(k)
		if !ok {
			t.Fatalf("Status(%s): not found", k)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("Status(%s) differs from a computation from scratch (-scratch +engine):\n%s", k, d)
		}
		if prev, ok := w.seen[k]; (!ok || !cmp.Equal(prev, want)) && !slices.Contains(dirty, k) {
			t.Fatalf("the status of %s changed but it was not reported dirty (-before +after):\n%s", k, cmp.Diff(prev, want))
		}
		w.seen[k] = want
	}
	svcs, mzs := w.engine.Sizes()
	if svcs != len(w.svcs) || mzs != len(w.mzs) {
		t.Fatalf("Sizes() = %d, %d; want %d, %d", svcs, mzs, len(w.svcs), len(w.mzs))
	}
}

// TestEngine_IncrementalEqualsFromScratch applies random changes in random
// batches and checks after each batch that the core's statuses equal a
// computation from scratch and that it reported every one that changed.
func TestEngine_IncrementalEqualsFromScratch(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 0x6d7a))
			w := newWorld()
			for range 300 {
				for range 1 + r.IntN(6) {
					w.randomOp(r.IntN)
				}
				w.check(t)
			}
		})
	}
}

// FuzzEngine drives the same comparison from the fuzzer's bytes: each byte
// is one choice of randomOp, and a zero byte ends a batch.
func FuzzEngine(f *testing.F) {
	f.Add([]byte{0, 0, 1, 2, 3, 1, 2, 0, 4, 1, 1, 1, 1, 1, 0, 2, 2, 2, 2})
	f.Add([]byte("\x04\x01\x01\x02\x00\x00\x01\x01\x01\x01\x01\x01\x03\x03\x03\x00\x05\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		w := newWorld()
		for len(data) > 0 {
			end := false
			pick := func(n int) int {
				if len(data) == 0 {
					end = true
					return 0
				}
				b := data[0]
				data = data[1:]
				if b == 0 {
					end = true
				}
				return int(b) % n
			}
			for !end {
				w.randomOp(pick)
			}
			w.check(t)
		}
	})
}
