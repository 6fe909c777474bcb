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
	l, err := DNSListing(s.opts.Cache, s.opts.DNS, mesh)
	if err != nil {
		writeError(w, asError(err))
		return
	}
	writeJSON(w, http.StatusOK, l)
}

// DNSListing is the body of GET /meshes/{mesh}/_dns, as the API answers it:
// what table (Options.DNS) answers in the mesh, and the names of its
// services that are not answered, with the reason. The error is an *Error
// (404 when the mesh does not exist or there is no DNS).
func DNSListing(c *cache.Cache, table func(mesh string) api.DNSListing, mesh string) (api.DNSListing, error) {
	var svcs []*resource.Object
	for _, k := range []resource.Kind{resource.MeshService, resource.MeshExternalService, resource.MeshMultiZoneService} {
		objs, _ := c.List(cache.Query{Kind: k, Mesh: mesh})
		svcs = append(svcs, objs...)
	}
	return DNSListingOf(c, table, mesh, svcs)
}

// DNSListingOf is DNSListing with the names not answered taken from svcs
// only, services of the mesh: a caller that knows which services may have
// such names (the GUI) passes those, instead of every service.
func DNSListingOf(c *cache.Cache, table func(mesh string) api.DNSListing, mesh string, svcs []*resource.Object) (api.DNSListing, error) {
	if _, ok := c.Get(resource.Key{Kind: resource.Mesh, Name: mesh}); !ok {
		return api.DNSListing{}, notFound(resource.Key{Kind: resource.Mesh, Name: mesh})
	}
	if table == nil {
		return api.DNSListing{}, newError(http.StatusNotFound, "Not found", "this control plane serves no DNS")
	}
	l := table(mesh)
	l.Mesh = mesh
	// What the table cannot know: names held by no one yet.
	for _, o := range svcs {
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
	return l, nil
}
