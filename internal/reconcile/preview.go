package reconcile

import (
	"context"
	"fmt"
	"slices"

	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
)

// Difference is a service whose decided status would change: Before is
// its stored status (nil for a new service), After what the cores would
// write.
type Difference struct {
	Key           resource.Key
	Before, After resource.Status
}

// Preview says what the cores would decide if the resources in changes
// were written (a dry run), without writing anything: it starts the cores
// (new ones, never a running term's) over what the cache holds now, as a
// term would, then shows them the changes and decides the status of every
// service they mark, and returns those whose decided parts differ from
// what is stored. changes must be admitted resources; their statuses are
// taken from the cache.
func Preview(ctx context.Context, env Env, cores []Core, changes []*resource.Object) ([]Difference, error) {
	for _, c := range cores {
		if err := c.Start(ctx, env); err != nil {
			return nil, fmt.Errorf("%s: start: %w", c.Name(), err)
		}
	}
	for _, k := range kindOrder {
		var watching []Core
		for _, c := range cores {
			if c.Watches(k) {
				watching = append(watching, c)
			}
		}
		if len(watching) == 0 {
			continue
		}
		env.Cache.Scan(cache.Query{Kind: k}, func(obj *resource.Object) {
			for _, c := range watching {
				c.Observe(obj.Key(), obj)
			}
		})
	}
	// What the cores would do before the changes is what is stored (or
	// what the running controllers are about to write): not ours to show.
	now := env.Now()
	for _, c := range cores {
		c.Ops(now)
		c.Dirty()
	}
	// The changed objects as the cores see them: with what is stored of
	// their status and their creation time (a new one is created now).
	changed := make(map[resource.Key]*resource.Object, len(changes))
	for _, obj := range changes {
		next := obj.Clone()
		if cur, ok := env.Cache.Get(obj.Key()); ok {
			next.Status = cur.Status
			next.CreationTime, next.Version, next.Revision = cur.CreationTime, cur.Version, cur.Revision
		} else if next.CreationTime.IsZero() {
			next.CreationTime = now
		}
		changed[next.Key()] = next
		for _, c := range cores {
			if c.Watches(next.Kind) {
				c.Observe(next.Key(), next)
			}
		}
	}
	var keys []resource.Key
	for _, c := range cores {
		c.Ops(now)
		keys = append(keys, c.Dirty()...)
	}
	slices.SortFunc(keys, compareKeys)
	keys = slices.Compact(keys)
	var out []Difference
	var d Digest
	sum := func(st resource.Status) uint64 {
		d.Reset()
		for _, c := range cores {
			c.Sum(&d, st)
		}
		return d.Sum()
	}
	for _, k := range keys {
		obj, ok := changed[k]
		if !ok {
			if obj, ok = env.Cache.Get(k); !ok {
				continue
			}
		}
		owns := false
		for _, c := range cores {
			if o := c.Owns(k.Kind); len(o.Fields) > 0 || len(o.Conditions) > 0 {
				owns = true
			}
		}
		if !owns {
			continue
		}
		after := resource.MustLookup(k.Kind).NewStatus()
		for _, c := range cores {
			if o := c.Owns(k.Kind); len(o.Fields) > 0 || len(o.Conditions) > 0 {
				c.Decide(obj, after)
			}
		}
		var before resource.Status
		if cur, ok := env.Cache.Get(k); ok {
			before = cur.Status
		}
		b := before
		if b == nil {
			b = resource.MustLookup(k.Kind).NewStatus()
		}
		if sum(b) != sum(after) {
			out = append(out, Difference{Key: k, Before: before, After: after})
		}
	}
	return out, nil
}
