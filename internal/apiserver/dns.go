package apiserver

import (
	"cmp"
	"net/http"
	"slices"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
)

// dnsListing answers GET /meshes/{mesh}/_dns.
func (s *Server) dnsListing(w http.ResponseWriter, mesh string) {
	if _, ok := s.opts.Cache.Get(resource.Key{Kind: resource.Mesh, Name: mesh}); !ok {
		writeError(w, notFound(resource.Key{Kind: resource.Mesh, Name: mesh}))
		return
	}
	if s.opts.DNS == nil {
		writeError(w, newError(http.StatusNotFound, "Not found", "this control plane serves no DNS"))
		return
	}
	l := s.opts.DNS(mesh)
	l.Mesh = mesh
	// What the table cannot know: names held by no one yet.
	for _, k := range []resource.Kind{resource.MeshService, resource.MeshExternalService, resource.MeshMultiZoneService} {
		objs, _ := s.opts.Cache.List(cache.Query{Kind: k, Mesh: mesh})
		for _, o := range objs {
			st, ok := o.Status.(resource.ServiceStatusOf)
			if !ok || st == nil {
				continue
			}
			svc := st.Service()
			for _, a := range svc.Addresses {
				source := "hostname"
				if a.Origin.Kind == resource.OriginInternalVIP {
					source = "internalVIP"
				}
				switch {
				case a.Hostname == "":
				case a.Status != resource.AddressAvailable:
					l.NotAnswered = append(l.NotAnswered, api.DNSNotAnswer{Name: a.Hostname + ".", Kind: o.Kind, Service: o.Name, Source: source, Reason: a.Reason})
				case len(svc.VIPs) == 0:
					l.NotAnswered = append(l.NotAnswered, api.DNSNotAnswer{Name: a.Hostname + ".", Kind: o.Kind, Service: o.Name, Source: source, Reason: "the service has no VIP yet"})
				}
			}
		}
	}
	slices.SortFunc(l.Names, func(a, b api.DNSName) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(l.NotAnswered, func(a, b api.DNSNotAnswer) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Service, b.Service))
	})
	if l.Names == nil {
		l.Names = []api.DNSName{}
	}
	if l.NotAnswered == nil {
		l.NotAnswered = []api.DNSNotAnswer{}
	}
	writeJSON(w, http.StatusOK, l)
}
