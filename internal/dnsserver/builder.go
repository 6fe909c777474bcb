package dnsserver

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/reconcile"
	"github.com/meshnames/meshnames/internal/resource"
)

// Builder keeps the server's table in step with the cache. Every instance
// runs one (not only the leader): each instance answers DNS from its own
// table.
//
// It keeps a compact ServiceNames per service and, when services of a mesh
// change, rebuilds that mesh's view only, then swaps a new table in; the
// views of other meshes are shared with the previous table, which is never
// modified.
type Builder struct {
	cache  *cache.Cache
	server *Server
	opts   TableOptions
	// Debounce gathers the changes that arrive together into one rebuild.
	Debounce time.Duration
	// Built, when set, is called after each table swap (tests, metrics).
	Built func(*Table)
}

// NewBuilder returns a builder feeding server from ch.
func NewBuilder(ch *cache.Cache, server *Server, o TableOptions) *Builder {
	return &Builder{cache: ch, server: server, opts: o, Debounce: 2 * time.Millisecond}
}

var watchedKinds = []resource.Kind{resource.MeshService, resource.MeshExternalService, resource.MeshMultiZoneService, resource.Dataplane}

// Run follows the cache until ctx ends.
func (b *Builder) Run(ctx context.Context) error {
	q := reconcile.New[resource.Key]()
	defer q.Close()
	cancel := b.cache.Subscribe(func(keys []resource.Key) {
		for _, k := range keys {
			if slices.Contains(watchedKinds, k.Kind) {
				q.Add(k)
			}
		}
	})
	defer cancel()
	for {
		if synced, _ := b.cache.Status(); synced {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(10 * time.Millisecond):
		}
	}

	services := map[string]map[resource.Key]ServiceNames{} // by mesh
	dataplanes := map[resource.Key]*resource.Object{}
	t := NewTable(b.opts)
	for _, k := range watchedKinds[:3] {
		objs, _ := b.cache.List(cache.Query{Kind: k})
		for _, o := range objs {
			m := services[o.Mesh]
			if m == nil {
				m = map[resource.Key]ServiceNames{}
				services[o.Mesh] = m
			}
			m[o.Key()] = Extract(o, b.opts)
		}
	}
	dps, _ := b.cache.List(cache.Query{Kind: resource.Dataplane})
	for _, dp := range dps {
		dataplanes[dp.Key()] = dp
	}
	for mesh, m := range services {
		t.Views[mesh] = BuildView(slices.Collect(maps.Values(m)))
	}
	t.Sources = Sources(slices.Collect(maps.Values(dataplanes)))
	b.swap(t)

	for {
		keys := q.Next(ctx)
		if keys == nil {
			return nil
		}
		if b.Debounce > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(b.Debounce):
			}
			if q.Len() > 0 {
				keys = append(keys, q.Next(ctx)...)
			}
		}
		dirty := map[string]bool{}
		sourcesDirty := false
		for _, k := range keys {
			obj, ok := b.cache.Get(k)
			if k.Kind == resource.Dataplane {
				if ok {
					dataplanes[k] = obj
				} else {
					delete(dataplanes, k)
				}
				sourcesDirty = true
				continue
			}
			m := services[k.Mesh]
			if !ok {
				if _, had := m[k]; had {
					delete(m, k)
					dirty[k.Mesh] = true
				}
				continue
			}
			if m == nil {
				m = map[resource.Key]ServiceNames{}
				services[k.Mesh] = m
			}
			names := Extract(obj, b.opts)
			if prev, had := m[k]; had && sameNames(prev, names) {
				continue // a change that moves no name (a port, a label)
			}
			m[k] = names
			dirty[k.Mesh] = true
		}
		if len(dirty) == 0 && !sourcesDirty {
			continue
		}
		prev := b.server.Table()
		next := &Table{TTL: prev.TTL, Zones: prev.Zones, Views: maps.Clone(prev.Views), Sources: prev.Sources}
		for mesh := range dirty {
			if len(services[mesh]) == 0 {
				delete(next.Views, mesh)
				delete(services, mesh)
				continue
			}
			next.Views[mesh] = BuildView(slices.Collect(maps.Values(services[mesh])))
		}
		if sourcesDirty {
			next.Sources = Sources(slices.Collect(maps.Values(dataplanes)))
		}
		b.swap(next)
	}
}

func (b *Builder) swap(t *Table) {
	b.server.SetTable(t)
	if b.Built != nil {
		b.Built(t)
	}
}

// sameNames reports whether two extractions give the same records.
func sameNames(a, b ServiceNames) bool {
	if !a.Created.Equal(b.Created) || !slices.Equal(a.VIPs, b.VIPs) || len(a.Names) != len(b.Names) {
		return false
	}
	for i := range a.Names {
		x, y := a.Names[i], b.Names[i]
		if x.Name != y.Name || x.Source != y.Source || !slices.Equal(x.Addrs, y.Addrs) || !slices.Equal(x.Ports, y.Ports) {
			return false
		}
	}
	return true
}
