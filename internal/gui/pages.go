package gui

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
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

// ---- services ----

type servicesData struct {
	Kind  string // plural, empty for every service kind
	Mesh  string
	Q     string
	Kinds []option
	// Meshes to filter by.
	Meshes []option
	Rows   []serviceRow
	pager
}

type option struct {
	Value, Label string
	Selected     bool
}

type serviceRow struct {
	Key       resource.Key
	Addresses []resource.Address
	VIPs      []resource.VIP
	Zone      string
	Export    string
}

func rowOf(o *resource.Object) serviceRow {
	row := serviceRow{Key: o.Key(), Zone: o.Labels[resource.LabelZone], Export: exportMode(o)}
	if st, ok := o.Status.(resource.ServiceStatusOf); ok && st != nil {
		row.Addresses, row.VIPs = st.Service().Addresses, st.Service().VIPs
	}
	return row
}

// exportMode is a MeshService's spec.export.mode, else its
// kuma.io/export-mode label; empty when neither is set.
func exportMode(o *resource.Object) string {
	if spec, ok := o.Spec.(*resource.MeshServiceSpec); ok && spec.Export != nil {
		return spec.Export.Mode
	}
	return o.Labels[resource.LabelExportMode]
}

func (s *Server) services(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	d := servicesData{Kind: v.Get("kind"), Mesh: v.Get("mesh"), Q: strings.TrimSpace(v.Get("q"))}
	kinds := serviceKinds
	if d.Kind != "" {
		desc := byPlural(d.Kind)
		if desc == nil || !desc.ServiceKind {
			s.badRequest(w, r, "kind: must be one of meshservices, meshexternalservices, meshmultizoneservices, got "+strconv.Quote(d.Kind))
			return
		}
		kinds = []resource.Kind{desc.Kind}
	}
	n, ok := s.pageParam(w, r)
	if !ok {
		return
	}
	d.Page = n
	offset := (d.Page - 1) * PageSize
	q := parseQuery(d.Q)
	var rev int64
	if q.empty() {
		rev = s.o.Cache.Revision()
		d.Rows, d.Total = s.listPage(kinds, d.Mesh, offset)
	} else {
		var keys []resource.Key
		keys, d.Total, rev = s.ix.search(kinds, d.Mesh, q, s.o.MatchDNS, offset, PageSize)
		for _, k := range keys {
			if o, ok := s.o.Cache.Get(k); ok {
				d.Rows = append(d.Rows, rowOf(o))
			}
		}
	}
	d.links(offset, len(d.Rows), "services", map[string]string{"kind": d.Kind, "mesh": d.Mesh, "q": d.Q})
	d.Kinds = []option{{Value: "", Label: "every kind", Selected: d.Kind == ""}}
	for _, k := range serviceKinds {
		p := resource.MustLookup(k).Plural
		d.Kinds = append(d.Kinds, option{Value: p, Label: string(k), Selected: d.Kind == p})
	}
	d.Meshes = s.meshOptions(d.Mesh, "every mesh")
	s.render(w, r, http.StatusOK, "services.html", &page{Title: "Services", Nav: "services", Revision: rev, Live: true, Data: d})
}

// listPage reads a page of services straight from the cache, without the
// index: the kinds one after the other, each ordered by mesh and name.
func (s *Server) listPage(kinds []resource.Kind, mesh string, offset int) ([]serviceRow, int) {
	var rows []serviceRow
	total := 0
	for _, k := range kinds {
		n := s.o.Cache.Count(k, mesh)
		if want := PageSize - len(rows); want > 0 && offset < total+n {
			items, _ := s.o.Cache.List(cache.Query{Kind: k, Mesh: mesh, Offset: max(offset-total, 0), Size: want})
			for _, o := range items {
				rows = append(rows, rowOf(o))
			}
		}
		total += n
	}
	return rows, total
}

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

func byPlural(p string) *resource.Descriptor {
	for _, d := range resource.Descriptors() {
		if d.Plural == p {
			return d
		}
	}
	return nil
}

// ---- one service ----

type serviceData struct {
	Obj    *resource.Object
	Labels []keyValue
	Status *resource.ServiceStatus
	// Holders of the hostnames the service wants and does not hold.
	Holders map[string]*resource.Key
	// Hostnames is the _hostnames inspection.
	Hostnames    *api.HostnamesReport
	HostnamesErr string
	DNS          *api.DNSListing
	Ports        []resource.Port
	Matches      []resource.ExternalMatch
	Destination  *resource.ExternalDestination
	// MultiZone is set for a MeshMultiZoneService.
	MultiZone *multiZoneData
	// History is who held the service's hostnames and VIPs, when the
	// store keeps a history.
	History *historyData
	YAML    string
}

// historyData is the history of some hostnames and VIPs.
type historyData struct {
	Holders []api.HistoryHolding
	Err     string
	// Truncated: a value has more events than were read.
	Truncated bool
}

// historyValues bounds the hostnames and VIPs whose history one page
// reads.
const historyValues = 10

// history reads the history of the VIPs and hostnames given, at most
// historyValues of them; nil when the store keeps none.
func (s *Server) history(ctx context.Context, vips, hostnames []string) *historyData {
	if s.o.History == nil {
		return nil
	}
	h := &historyData{}
	n := 0
	read := func(vip, hostname string) {
		if n++; n > historyValues {
			return
		}
		rep, err := s.o.History(ctx, vip, hostname)
		if err != nil {
			h.Err = err.Error()
			return
		}
		h.Holders = append(h.Holders, rep.Holders...)
		h.Truncated = h.Truncated || rep.Truncated
	}
	for _, v := range vips {
		read(v, "")
	}
	for _, host := range hostnames {
		read("", host)
	}
	return h
}

type multiZoneData struct {
	Selector     map[string]string
	MeshServices []matchedService
	Zones        []resource.ZoneRef
	Ports        []resource.Port
}

type matchedService struct {
	resource.MeshServiceRef
	// Search finds the MeshService (a synced one's name has a hash).
	Search string
}

type keyValue struct{ Key, Value string }

func sortedLabels(m map[string]string) []keyValue {
	out := make([]keyValue, 0, len(m))
	for k, v := range m {
		out = append(out, keyValue{k, v})
	}
	slices.SortFunc(out, func(a, b keyValue) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

func (s *Server) service(w http.ResponseWriter, r *http.Request, plural, mesh, name string) {
	desc := byPlural(plural)
	if desc == nil || !desc.ServiceKind {
		s.notFound(w, r, "There is no service kind "+strconv.Quote(plural)+": use meshservices, meshexternalservices or meshmultizoneservices.")
		return
	}
	rev := s.o.Cache.Revision()
	k := resource.Key{Kind: desc.Kind, Mesh: mesh, Name: name}
	obj, ok := s.o.Cache.Get(k)
	if !ok {
		s.renderMissing(w, r, "services", k, rev)
		return
	}
	d := serviceData{Obj: obj, Labels: sortedLabels(obj.Labels), Holders: map[string]*resource.Key{}}
	if st, ok := obj.Status.(resource.ServiceStatusOf); ok && st != nil {
		d.Status = st.Service()
	}
	lost := map[string]bool{}
	if d.Status != nil {
		for _, a := range d.Status.Addresses {
			if a.Status != resource.AddressAvailable {
				lost[a.Hostname] = true
			}
		}
	}
	if s.o.Hostnames != nil {
		rep, err := s.o.Hostnames(k)
		if err != nil {
			d.HostnamesErr = err.Error()
		} else {
			d.Hostnames = &rep
			for _, it := range rep.Items {
				if it.Selects && it.Status == resource.AddressNotAvailable && it.Hostname != "" {
					lost[it.Hostname] = true
				}
			}
		}
	}
	for h, holder := range s.holders(mesh, lost) {
		if holder != k {
			d.Holders[h] = &holder
		}
	}
	if s.o.ServiceDNS != nil {
		l := s.o.ServiceDNS(k)
		d.DNS = &l
	}
	switch spec := obj.Spec.(type) {
	case *resource.MeshServiceSpec:
		d.Ports = spec.Ports
	case *resource.MeshExternalServiceSpec:
		d.Matches, d.Destination = spec.Match, spec.Destination
	case *resource.MeshMultiZoneServiceSpec:
		mz := &multiZoneData{Ports: spec.Ports}
		if spec.Selector.MeshService != nil {
			mz.Selector = spec.Selector.MeshService.MatchLabels
		}
		if st, ok := obj.Status.(*resource.MultiZoneServiceStatus); ok && st != nil {
			mz.Zones = st.Zones
			if len(st.Ports) > 0 {
				mz.Ports = st.Ports
			}
			for _, ref := range st.MeshServices {
				terms := []string{resource.LabelDisplayName + "=" + ref.Name}
				if ref.Zone != "" {
					terms = append(terms, resource.LabelZone+"="+ref.Zone)
				}
				if ref.Namespace != "" {
					terms = append(terms, resource.LabelNamespace+"="+ref.Namespace)
				}
				search := Prefix + "services?" + url.Values{"kind": {"meshservices"}, "mesh": {ref.Mesh}, "q": {strings.Join(terms, " ")}}.Encode()
				mz.MeshServices = append(mz.MeshServices, matchedService{MeshServiceRef: ref, Search: search})
			}
		}
		d.MultiZone = mz
	}
	if d.Status != nil {
		var vips, hosts []string
		for _, v := range d.Status.VIPs {
			vips = append(vips, v.IP)
		}
		for _, a := range d.Status.Addresses {
			hosts = append(hosts, a.Hostname)
		}
		d.History = s.history(r.Context(), vips, hosts)
	}
	if y, err := resource.EncodeYAML(obj); err == nil {
		d.YAML = string(y)
	}
	title := string(obj.Kind) + " " + obj.Mesh + "/" + obj.Name
	s.render(w, r, http.StatusOK, "service.html", &page{Title: title, Nav: "services", Revision: rev, Live: true, Data: d})
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

// ---- DNS ----

// dnsPageSize is how many answered names a page of the DNS listing shows.
const dnsPageSize = 100

type dnsData struct {
	Mesh   string
	Q      string
	Meshes []option
	Err    string
	// Names is the page of answered names; Total counts those the search
	// selects.
	Names       []api.DNSName
	Total       int
	From, To    int
	Prev, Next  string
	NotAnswered []api.DNSNotAnswer
	Available   bool
}

func (s *Server) dns(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	d := dnsData{Mesh: v.Get("mesh"), Q: strings.ToLower(strings.TrimSpace(v.Get("q"))), Available: s.o.DNS != nil}
	rev := s.o.Cache.Revision()
	if d.Mesh == "" {
		if ms := s.o.Cache.Keys(cache.Query{Kind: resource.Mesh}); len(ms) > 0 {
			d.Mesh = ms[0].Name
			for _, m := range ms {
				if m.Name == "default" {
					d.Mesh = m.Name
				}
			}
		}
	}
	pageNo, ok := s.pageParam(w, r)
	if !ok {
		return
	}
	if _, ok := s.o.Cache.Get(resource.Key{Kind: resource.Mesh, Name: d.Mesh}); d.Mesh != "" && !ok {
		s.render(w, r, http.StatusNotFound, "error.html", &page{Title: "Not found", Nav: "dns", Revision: rev, Live: true,
			Data: errorData{Message: "mesh: there is no mesh " + strconv.Quote(d.Mesh) + "."}})
		return
	}
	d.Meshes = s.meshOptions(d.Mesh, "")
	if s.o.DNS != nil && d.Mesh != "" {
		l, err := s.o.DNS(d.Mesh)
		if err != nil {
			d.Err = err.Error()
		}
		from := (pageNo - 1) * dnsPageSize
		if s.o.DNSNames != nil {
			d.Names, d.Total = s.o.DNSNames(d.Mesh, d.Q, from, dnsPageSize)
		}
		if len(d.Names) > 0 {
			d.From, d.To = from+1, from+len(d.Names)
		}
		params := map[string]string{"mesh": d.Mesh, "q": d.Q}
		if pageNo > 1 {
			d.Prev = pageLink("dns", params, pageNo-1)
		}
		if from+dnsPageSize < d.Total {
			d.Next = pageLink("dns", params, pageNo+1)
		}
		for _, n := range l.NotAnswered {
			if d.Q == "" || strings.Contains(n.Name, d.Q) || strings.Contains(n.Service, d.Q) {
				d.NotAnswered = append(d.NotAnswered, n)
			}
		}
	}
	s.render(w, r, http.StatusOK, "dns.html", &page{Title: "DNS", Nav: "dns", Revision: rev, Live: true, Data: d})
}

// ---- who is this? ----

type searchData struct {
	Q string
	// IP is set when Q is an address.
	IP     bool
	VIP    *VIPState
	VIPErr string
	// ByVIP are the services that have the address in status.vips.
	ByVIP   []resource.Key
	Claims  []claimRow
	Records []DNSMatch
	Suggest []resource.Key
	// History is who held the address or hostname over time.
	History *historyData
	// More is set when there were more suggestions than shown.
	More     bool
	Searched bool
}

// suggestLimit bounds the suggestions of a search that found nothing.
const suggestLimit = 20

func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	d := searchData{Q: q}
	rev := s.o.Cache.Revision()
	if q != "" {
		d.Searched = true
		if ip, err := netip.ParseAddr(q); err == nil {
			ip = ip.Unmap()
			d.IP, d.Q = true, ip.String()
			d.ByVIP = s.byVIP(ip)
			d.History = s.history(r.Context(), []string{d.Q}, nil)
			if s.o.VIP != nil {
				st, err := s.o.VIP(r.Context(), ip)
				if err != nil {
					d.VIPErr = err.Error()
				} else {
					d.VIP = &st
				}
			}
		} else {
			name := strings.TrimSuffix(strings.ToLower(q), ".")
			d.Q = name
			if s.o.Lookup != nil {
				d.Records = s.o.Lookup(name + ".")
			}
			d.Claims = s.withHolders(s.claims(name, d.Records))
			d.History = s.history(r.Context(), nil, []string{name})
		}
		if len(d.ByVIP) == 0 && len(d.Claims) == 0 && len(d.Records) == 0 && (d.History == nil || len(d.History.Holders) == 0) {
			d.Suggest, d.More = s.suggest(strings.ToLower(strings.TrimSuffix(q, ".")))
		}
	}
	s.render(w, r, http.StatusOK, "search.html", &page{Title: "Who is this?", Nav: "search", Revision: rev, Live: true, Data: d})
}

// byVIP returns the services that have ip in status.vips: the one the DNS
// server's reverse name points to in each mesh, and those the index keeps.
func (s *Server) byVIP(ip netip.Addr) []resource.Key {
	keys := s.ix.byVIP(ip)
	if s.o.LookupAddr != nil {
		for _, m := range s.o.LookupAddr(ip) {
			keys = append(keys, resource.Key{Kind: m.Name.Kind, Mesh: m.Mesh, Name: m.Name.Service})
		}
	}
	slices.SortFunc(keys, compareKeys)
	return slices.Compact(keys)
}

// claims returns every service's address for the hostname: those the DNS
// server answers (records, read back from the service's status), and those
// the index keeps; the holders first.
func (s *Server) claims(name string, records []DNSMatch) []claim {
	out := s.ix.offTable(name)
	for _, m := range records {
		if m.Name.Source != sourceHostname && m.Name.Source != sourceInternalVIP {
			continue
		}
		k := resource.Key{Kind: m.Name.Kind, Mesh: m.Mesh, Name: m.Name.Service}
		if slices.ContainsFunc(out, func(c claim) bool { return c.Key == k }) {
			continue
		}
		o, ok := s.o.Cache.Get(k)
		if !ok {
			continue
		}
		if st, ok := o.Status.(resource.ServiceStatusOf); ok && st != nil {
			for _, a := range st.Service().Addresses {
				if a.Hostname == name {
					c := claim{Key: k, Hostname: name, Available: a.Status == resource.AddressAvailable, Reason: a.Reason}
					if a.Origin.Kind == resource.OriginHostnameGenerator {
						c.Generator = a.Origin.Name
					}
					out = append(out, c)
				}
			}
		}
	}
	slices.SortFunc(out, compareClaims)
	return out
}

// suggest returns the first services whose name, DNS names, hostnames or
// VIPs contain w, and whether there are more.
func (s *Server) suggest(w string) ([]resource.Key, bool) {
	found := map[resource.Key]bool{}
	for _, kind := range serviceKinds {
		for _, k := range s.o.Cache.Keys(cache.Query{Kind: kind}) {
			if strings.Contains(k.Name, w) {
				found[k] = true
			}
		}
	}
	if s.o.MatchDNS != nil {
		s.o.MatchDNS(w, func(k resource.Key) { found[k] = true })
	}
	for _, k := range s.ix.matching(w) {
		found[k] = true
	}
	keys := slices.SortedFunc(maps.Keys(found), compareKeys)
	return keys[:min(len(keys), suggestLimit)], len(keys) > suggestLimit
}
