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
// It keeps a compact ServiceNames per service and an index of every claim
// on every name per mesh. A change updates only the names, reverse names
// and ancestors of the services it touches, in a new view that shares
// every untouched shard with the previous one, and swaps a new table in;
// no table is ever modified once published.
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

// ServiceKinds are the kinds whose names the table answers.
var ServiceKinds = []resource.Kind{resource.MeshService, resource.MeshExternalService, resource.MeshMultiZoneService}

var watchedKinds = append(slices.Clone(ServiceKinds), resource.Dataplane)

// Run follows the cache until ctx ends.
func (b *Builder) Run(ctx context.Context) error {
	if b.opts.Global {
		// A global answers no service names (GlobalAnswersNoNames): its
		// table stays empty, and indexing a federation's services (a
		// quarter of a global's CPU in an initial sync of ten zones)
		// would build nothing it answers.
		b.swap(NewTable(b.opts))
		<-ctx.Done()
		return nil
	}
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
	if !b.cache.WaitSynced(ctx) {
		return nil
	}

	meshes := map[string]*meshIndex{}
	sources := newSourceIndex()
	t := NewTable(b.opts)
	initial := map[string]map[resource.Key]*ServiceNames{}
	for _, k := range ServiceKinds {
		b.cache.Scan(cache.Query{Kind: k}, func(o *resource.Object) {
			if initial[o.Mesh] == nil {
				initial[o.Mesh] = map[resource.Key]*ServiceNames{}
			}
			names := Extract(o, b.opts)
			initial[o.Mesh][o.Key()] = &names
		})
	}
	for mesh, changes := range initial {
		ix := newMeshIndex()
		meshes[mesh] = ix
		t.Views[mesh] = ix.apply(changes)
	}
	dpChanges := map[resource.Key]*resource.Object{}
	b.cache.Scan(cache.Query{Kind: resource.Dataplane}, func(dp *resource.Object) {
		dpChanges[dp.Key()] = dp
	})
	t.Sources = sources.apply(dpChanges)
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
		dirty := map[string]map[resource.Key]*ServiceNames{}
		dpChanges := map[resource.Key]*resource.Object{}
		for _, k := range keys {
			obj, ok := b.cache.Peek(k) // read only
			if k.Kind == resource.Dataplane {
				dpChanges[k] = obj // nil when deleted
				continue
			}
			ix := meshes[k.Mesh]
			var names *ServiceNames
			if ok {
				n := Extract(obj, b.opts)
				names = &n
			}
			var prev *ServiceNames
			if ix != nil {
				prev = ix.svcs[keyIn(k)]
			}
			switch {
			case prev == nil && names == nil:
				continue
			case prev != nil && names != nil && sameNames(*prev, *names):
				continue // a change that moves no name (a port, a label)
			}
			if dirty[k.Mesh] == nil {
				dirty[k.Mesh] = make(map[resource.Key]*ServiceNames, len(keys))
			}
			dirty[k.Mesh][k] = names
		}
		if len(dirty) == 0 && len(dpChanges) == 0 {
			continue
		}
		prev := b.server.Table()
		next := &Table{TTL: prev.TTL, Zones: prev.Zones, Views: maps.Clone(prev.Views), Sources: prev.Sources}
		for mesh, changes := range dirty {
			ix := meshes[mesh]
			if ix == nil {
				ix = newMeshIndex()
				meshes[mesh] = ix
			}
			next.Views[mesh] = ix.apply(changes)
			if len(ix.svcs) == 0 {
				delete(next.Views, mesh)
				delete(meshes, mesh)
			}
		}
		if len(dpChanges) > 0 {
			next.Sources = sources.apply(dpChanges)
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
	if a.Created != b.Created || !slices.Equal(a.VIPs, b.VIPs) || !slices.Equal(a.Ports, b.Ports) || len(a.Names) != len(b.Names) || !slices.Equal(a.Refused(), b.Refused()) {
		return false
	}
	for i := range a.Names {
		x, y := &a.Names[i], &b.Names[i]
		if x.Name != y.Name || x.src != y.src || !slices.Equal(a.AddrsOf(x), b.AddrsOf(y)) {
			return false
		}
	}
	return true
}
