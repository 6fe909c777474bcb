package gui

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// ---- overview ----

// recentChanges is how many changes the overview lists, and changeWindow
// how many revisions back it looks for them.
const (
	recentChanges = 15
	changeWindow  = 200
	// listLimit bounds the rows of a list that is not paged (names not
	// available, collisions of a generator).
	listLimit = 100
)

type overviewData struct {
	Meshes []meshCounts
	Totals meshCounts
	// NotAvailable lists the first listLimit addresses not held; their
	// holders, when another service holds the name, are in Holders.
	NotAvailable      []claimRow
	NotAvailableTotal int
	Pools             []poolRow
	PoolsErr          string
	Leader            *api.LeaderStatus
	LeaderErr         string
	Zones             zonesData
	Changes           []changeRow
	ChangesErr        string
	// Global is set on a global control plane, which runs no controllers
	// and allocates no VIPs: the zones do.
	Global bool
}

type meshCounts struct {
	Mesh string
	// Counts of MeshServices, MeshExternalServices, MeshMultiZoneServices
	// and Dataplanes.
	Counts [4]int
}

// countedKinds are the columns of meshCounts.Counts.
var countedKinds = []resource.Kind{resource.MeshService, resource.MeshExternalService, resource.MeshMultiZoneService, resource.Dataplane}

type claimRow struct {
	claim
	// Holder holds the hostname when another service does.
	Holder *resource.Key
}

type poolRow struct {
	Pool
	Free uint64
	// Widths of the bar's segments, in percent of its width (at least a
	// sliver for a count that is not zero).
	UsedWidth, QuarantinedWidth float64
}

type changeRow struct {
	Revision int64
	Key      resource.Key
	Deleted  bool
	When     time.Time
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	d := overviewData{}
	lost := s.ix.lost(listLimit)
	rev := lost.rev
	meshes, _ := s.o.Cache.List(cache.Query{Kind: resource.Mesh})
	for _, m := range meshes {
		mc := meshCounts{Mesh: m.Name}
		for i, k := range countedKinds {
			mc.Counts[i] = s.o.Cache.Count(k, m.Name)
			d.Totals.Counts[i] += mc.Counts[i]
		}
		d.Meshes = append(d.Meshes, mc)
	}
	d.NotAvailable, d.NotAvailableTotal = s.withHolders(lost.all), lost.total
	d.Global = s.o.Mode == resource.ModeGlobal
	if s.o.Pools != nil && !d.Global {
		pools, err := s.o.Pools(ctx)
		if err != nil {
			d.PoolsErr = err.Error()
		}
		for _, p := range pools {
			d.Pools = append(d.Pools, newPoolRow(p))
		}
	}
	if s.o.Leader != nil && !d.Global {
		ls, err := s.o.Leader(ctx)
		if err != nil {
			d.LeaderErr = err.Error()
		} else {
			d.Leader = &ls
		}
	}
	d.Zones = s.zonesData(ctx)
	d.Changes, d.ChangesErr = s.recent(ctx, rev)
	s.render(w, r, http.StatusOK, "overview.html", &page{Title: "Overview", Nav: "overview", Revision: rev, Live: true, Every: d.Zones.every(overviewEvery), Data: d})
}

func newPoolRow(p Pool) poolRow {
	row := poolRow{Pool: p}
	if p.Size >= p.Used+p.Quarantined {
		row.Free = p.Size - p.Used - p.Quarantined
	}
	width := func(n uint64) float64 {
		if n == 0 || p.Size == 0 {
			return 0
		}
		return max(100*float64(n)/float64(p.Size), 0.5)
	}
	row.UsedWidth, row.QuarantinedWidth = width(p.Used), width(p.Quarantined)
	return row
}

// withHolders finds, for each claim not available, the service of its
// mesh that holds the hostname, if any.
func (s *Server) withHolders(cs []claim) []claimRow {
	names := map[string]map[string]bool{}
	for _, c := range cs {
		if names[c.Key.Mesh] == nil {
			names[c.Key.Mesh] = map[string]bool{}
		}
		names[c.Key.Mesh][c.Hostname] = true
	}
	holders := map[string]map[string]resource.Key{}
	for mesh, ns := range names {
		holders[mesh] = s.holders(mesh, ns)
	}
	out := make([]claimRow, len(cs))
	for i, c := range cs {
		out[i] = claimRow{claim: c}
		if h, ok := holders[c.Key.Mesh][c.Hostname]; ok && h != c.Key {
			out[i].Holder = &h
		}
	}
	return out
}

// holders returns the service of mesh that holds each hostname of names:
// the one the DNS server answers it for, else one that holds it without
// a VIP (which the index keeps).
func (s *Server) holders(mesh string, names map[string]bool) map[string]resource.Key {
	if len(names) == 0 {
		return map[string]resource.Key{}
	}
	out := s.ix.heldOffTable(mesh, names)
	if s.o.Lookup == nil {
		return out
	}
	for name := range names {
		if _, ok := out[name]; ok {
			continue
		}
		for _, m := range s.o.Lookup(name + ".") {
			if m.Mesh == mesh && (m.Name.Source == sourceHostname || m.Name.Source == sourceInternalVIP) {
				out[name] = resource.Key{Kind: m.Name.Kind, Mesh: mesh, Name: m.Name.Service}
			}
		}
	}
	return out
}

// Sources of DNS names that come from status.addresses (see
// api.DNSName.Source).
const (
	sourceHostname    = "hostname"
	sourceInternalVIP = "internalVIP"
)

// recent reads the last changes from the store's change feed, newest
// first. The feed keeps the last change of each resource, so a resource
// changed often appears once.
func (s *Server) recent(ctx context.Context, rev int64) ([]changeRow, string) {
	if s.o.Store == nil {
		return nil, ""
	}
	evs, err := s.o.Store.Changes(ctx, max(rev-changeWindow, 0), 0)
	if errors.Is(err, store.ErrCompacted) {
		return nil, "the change feed has been compacted past the last changes"
	}
	if err != nil {
		return nil, "cannot read the change feed: " + err.Error()
	}
	var out []changeRow
	for i := len(evs) - 1; i >= 0 && len(out) < recentChanges; i-- {
		e := evs[i]
		row := changeRow{Revision: e.Revision, Key: e.Key, Deleted: e.Type == store.EventDelete}
		if e.Object != nil {
			row.When = e.Object.ModificationTime
		}
		out = append(out, row)
	}
	return out, ""
}

// ---- shared by the pages ----

// option is one choice of a filter's select box.
type option struct {
	Value, Label string
	Selected     bool
}

// meshOptions are the choices of a mesh filter: no mesh, labelled all
// (when all is not empty), then each mesh; selected is chosen.
func (s *Server) meshOptions(selected, all string) []option {
	meshes := s.o.Cache.Keys(cache.Query{Kind: resource.Mesh})
	var out []option
	if all != "" {
		out = append(out, option{Value: "", Label: all, Selected: selected == ""})
	}
	for _, m := range meshes {
		out = append(out, option{Value: m.Name, Label: m.Name, Selected: m.Name == selected})
	}
	return out
}

type keyValue struct{ Key, Value string }

// sortedLabels are the labels m in the order of their keys.
func sortedLabels(m map[string]string) []keyValue {
	out := make([]keyValue, 0, len(m))
	for k, v := range m {
		out = append(out, keyValue{k, v})
	}
	slices.SortFunc(out, func(a, b keyValue) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

// renderMissing answers for a resource that does not exist (or no longer
// does): 404, still live, so that the page shows the resource if it comes.
func (s *Server) renderMissing(w http.ResponseWriter, r *http.Request, nav string, k resource.Key, rev int64) {
	msg := k.String() + " does not exist."
	s.render(w, r, http.StatusNotFound, "error.html", &page{Title: "Not found", Nav: nav, Revision: rev, Live: true, Data: errorData{Message: msg}})
}

// ---- generators ----

type generatorRow struct {
	Name     string
	Labels   []keyValue
	Kind     resource.Kind
	Selector map[string]string
	Template string
	Created  time.Time
	// Err says why the generator cannot be used.
	Err string
	// Selects counts the services it selects, in every mesh; Lost lists
	// (up to listLimit of LostTotal) the names it rendered that are not
	// available.
	Selects   int
	Lost      []claimRow
	LostTotal int
}

func (s *Server) generators(w http.ResponseWriter, r *http.Request) {
	lost := s.ix.lost(listLimit)
	objs, _ := s.o.Cache.List(cache.Query{Kind: resource.HostnameGenerator})
	var rows []generatorRow
	for _, o := range objs {
		row := generatorRow{Name: o.Name, Labels: sortedLabels(o.Labels), Created: o.CreationTime, LostTotal: lost.lostCount[o.Name]}
		if spec, ok := o.Spec.(*resource.HostnameGeneratorSpec); ok {
			row.Template = spec.Template
			kind, sel := spec.Selector.Target()
			row.Kind = kind
			if sel != nil {
				row.Selector = sel.MatchLabels
			}
			if kind != "" {
				// The engine's rule: every label of matchLabels, which the
				// cache matches without decoding a resource.
				_, row.Selects = s.o.Cache.List(cache.Query{Kind: kind, Labels: row.Selector, Size: 1})
			}
		}
		if _, err := resource.HostnameGeneratorOf(o); err != nil {
			row.Err = err.Error()
		}
		row.Lost = s.withHolders(lost.lostBy[o.Name])
		rows = append(rows, row)
	}
	s.render(w, r, http.StatusOK, "generators.html", &page{Title: "HostnameGenerators", Nav: "generators", Revision: lost.rev, Live: true, Data: rows})
}
