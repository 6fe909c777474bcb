package gui

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
)

// This file serves the services pages: the list of every service kind,
// filtered and searched, and one service with its names, VIPs and their
// history.

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

func byPlural(p string) *resource.Descriptor {
	for _, d := range resource.Descriptors() {
		if d.Plural == p {
			return d
		}
	}
	return nil
}

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
