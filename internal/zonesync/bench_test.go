package zonesync

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// BenchmarkSync_InitialSync measures the sync alone (no controllers): a
// zone that starts with n services already stored, and a second zone that
// has them once they went through the global. One op is the whole sync.
func BenchmarkSync_InitialSync(b *testing.B) {
	testHeartbeat = DefaultHeartbeat
	defer func() { testHeartbeat = 200 * time.Millisecond }()
	for _, n := range []int{1000, 10_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				global := newCP(b, "global")
				global.put(&resource.Object{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}}, resource.ModeGlobal, "")
				_, addr, pin := runGlobal(b, global)
				east := newCP(b, "east")
				seed(b, east, "east", n)
				west := newCP(b, "west")
				b.StartTimer()
				start := time.Now()
				runZone(b, east, "east", addr, writeToken(b, zoneToken(b, global, "east", pin)))
				runZone(b, west, "west", addr, writeToken(b, zoneToken(b, global, "west", pin)))
				for west.c.Count(resource.MeshService, "default") < n {
					time.Sleep(5 * time.Millisecond)
				}
				b.ReportMetric(float64(n)/time.Since(start).Seconds(), "services/s")
			}
		})
	}
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
