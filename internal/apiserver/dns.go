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

// DNSListing is the body of GET /meshes/{mesh}/_dns, as the API answers it
// (the GUI shows the same): what table (Options.DNS) answers in the mesh
// and what it does not, with the reason, in order. The error is an *Error
// (404 when the mesh does not exist or there is no DNS).
func DNSListing(c *cache.Cache, table func(mesh string) api.DNSListing, mesh string) (api.DNSListing, error) {
	if _, ok := c.Get(resource.Key{Kind: resource.Mesh, Name: mesh}); !ok {
		return api.DNSListing{}, notFound(resource.Key{Kind: resource.Mesh, Name: mesh})
	}
	if table == nil {
		return api.DNSListing{}, newError(http.StatusNotFound, "Not found", "this control plane serves no DNS")
	}
	l := table(mesh)
	l.Mesh = mesh
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
