package zonesync

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/meshnames/meshnames/api/zonesync/v1"

	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// BenchmarkSync_InitialSync measures the sync alone (no controllers): a
// zone that starts with n services already stored, and a second zone that
// has them once they went through the global. One op is the whole sync.
func BenchmarkSync_InitialSync(b *testing.B) {
	testHeartbeat = DefaultHeartbeat
	defer func() { testHeartbeat = 200 * time.Millisecond }()
	for _, tc := range []struct{ services, receivers int }{{1000, 1}, {10_000, 1}, {2000, 5}} {
		b.Run(fmt.Sprintf("services=%d/receivers=%d", tc.services, tc.receivers), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				global := newCP(b, "global")
				global.put(&resource.Object{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}}, resource.ModeGlobal, "")
				_, addr, pin := runGlobal(b, global)
				east := newCP(b, "east")
				seed(b, east, "east", tc.services)
				var receivers []*cp
				for i := range tc.receivers {
					receivers = append(receivers, newCP(b, fmt.Sprintf("west%d", i)))
				}
				b.StartTimer()
				start, cpu0 := time.Now(), cpuTime()
				runZone(b, east, "east", addr, writeToken(b, zoneToken(b, global, "east", pin)))
				for i, r := range receivers {
					z := fmt.Sprintf("west%d", i)
					runZone(b, r, z, addr, writeToken(b, zoneToken(b, global, z, pin)))
				}
				for _, r := range receivers {
					for r.c.Count(resource.MeshService, "default") < tc.services {
						time.Sleep(5 * time.Millisecond)
					}
				}
				b.ReportMetric(float64(tc.services*tc.receivers)/time.Since(start).Seconds(), "placements/s")
				b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(tc.services*tc.receivers), "cpu-µs/placement")
			}
		})
	}
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func seed(b *testing.B, p *cp, zone string, n int) {
	ctx := context.Background()
	ops := []store.Op{{Type: store.OpCreate, Object: &resource.Object{Kind: resource.Mesh, Name: "default",
		Labels: map[string]string{resource.LabelOrigin: resource.OriginGlobal}, Spec: &resource.MeshSpec{}}}}
	adm := admission.New(admission.Options{Mode: resource.ModeZone, Zone: zone})
	for i := range n {
		obj := meshService("default", fmt.Sprintf("svc-%06d", i), 80)
		if errs := adm.Admit(obj, admission.Writer{Source: admission.User}); len(errs) > 0 {
			b.Fatal(errs)
		}
		ops = append(ops, store.Op{Type: store.OpCreate, Object: obj, DiscardObject: true})
		if len(ops) == 1000 || i == n-1 {
			if _, err := p.st.Apply(ctx, ops...); err != nil {
				b.Fatal(err)
			}
			ops = ops[:0]
		}
	}
	if err := p.c.WaitFor(ctx, int64(n/1000+2)); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkDecodeResource decodes a synced MeshService as a receiving
// side does for every resource of an initial sync: the global validates
// on decoding (global), a zone leaves it to admission (zone).
func BenchmarkDecodeResource(b *testing.B) {
	r, err := encodeResource(&resource.Object{Kind: resource.MeshService, Mesh: "default", Name: "redis-0042",
		Labels: map[string]string{resource.LabelOrigin: resource.OriginZone, resource.LabelZone: "east", resource.LabelDisplayName: "redis-0042", resource.LabelMesh: "default"},
		Spec: &resource.MeshServiceSpec{Selector: resource.MeshServiceSelector{DataplaneTags: map[string]string{"kuma.io/service": "redis-0042"}},
			Ports: []resource.Port{{Name: "tcp", Port: 6379, TargetPort: &resource.IntOrString{Int: 6379}, AppProtocol: "tcp"}}}})
	if err != nil {
		b.Fatal(err)
	}
	for _, side := range []struct {
		name      string
		validated bool
	}{{"global", true}, {"zone", false}} {
		b.Run(side.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeResource(r, side.validated); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkInventory takes the inventories a settled federation's streams
// send (inventory.go) over 100,000 MeshServices of 10 zones: the global's,
// which every zone's stream shares per revision (one op is one
// computation; it decodes the 90% the cache froze, as a settled global's
// are), and a zone's of its own 10,000 among them (labels only).
func BenchmarkInventory(b *testing.B) {
	const zones, perZone = 10, 10_000
	ctx := context.Background()
	for _, side := range []string{"global", "zone"} {
		b.Run(side+"/services=100000", func(b *testing.B) {
			p := newCP(b, side)
			var ops []store.Op
			for z := range zones {
				for i := range perZone {
					obj := meshService("default", fmt.Sprintf("svc-%06d-z%d", i, z), 80)
					obj.Spec.Default()
					origin := resource.OriginZone
					if side == "zone" && z != 0 {
						origin = resource.OriginGlobal
					}
					obj.Labels = map[string]string{resource.LabelOrigin: origin, resource.LabelZone: fmt.Sprintf("z%d", z)}
					ops = append(ops, store.Op{Type: store.OpCreate, Object: obj, DiscardObject: true})
					if len(ops) == 1000 {
						if _, err := p.st.Apply(ctx, ops...); err != nil {
							b.Fatal(err)
						}
						ops = ops[:0]
					}
				}
			}
			if err := p.c.WaitFor(ctx, zones*perZone); err != nil {
				b.Fatal(err)
			}
			// The freezer keeps at most cache.MaxDecoded decoded: wait
			// for it, as it would compete for the cores.
			for p.c.Frozen() < zones*perZone-cache.MaxDecoded {
				time.Sleep(10 * time.Millisecond)
			}
			g := newGlobalSide("z1", p.c, resource.ExportAll, &inventories{})
			z := &zoneSide{zone: "z0", cache: p.c, out: zoneOut{exportDefault: resource.ExportAll}}
			var v inventory
			b.ResetTimer()
			for range b.N {
				if side == "global" {
					g.inventories.byZone = nil // a new revision each time
					v = g.expected()
				} else {
					v = z.expected()
				}
			}
			b.StopTimer()
			want := int64((zones - 1) * perZone)
			if side == "zone" {
				want = perZone
			}
			if v.count != want {
				b.Fatalf("%s inventory counts %d, want %d", side, v.count, want)
			}
		})
	}
}

// BenchmarkDecodeChanges decodes a batch of 1,000 synced MeshServices as
// a receiver does every batch (DecodeChanges), against proto.Unmarshal of
// the same bytes, which it replaced.
func BenchmarkDecodeChanges(b *testing.B) {
	c := &pb.Changes{Revision: 1000}
	for i := range 1000 {
		name := fmt.Sprintf("svc-%d", i)
		r, err := encodeResource(&resource.Object{Kind: resource.MeshService, Mesh: "default", Name: name + "-5c8f2a7d9e1b3c4d",
			Labels: map[string]string{resource.LabelOrigin: resource.OriginZone, resource.LabelZone: "east", resource.LabelDisplayName: name, resource.LabelMesh: "default"},
			Spec: &resource.MeshServiceSpec{Selector: resource.MeshServiceSelector{DataplaneTags: map[string]string{"kuma.io/service": name}},
				Ports: []resource.Port{{Port: 80, AppProtocol: "http"}}}})
		if err != nil {
			b.Fatal(err)
		}
		c.Put = append(c.Put, r)
	}
	raw, err := proto.Marshal(c)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("DecodeChanges", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := DecodeChanges(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("proto.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			var c pb.Changes
			if err := proto.Unmarshal(raw, &c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
