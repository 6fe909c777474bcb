package apiserver

import (
	"cmp"
	"net/http"
	"slices"

	"github.com/meshnames/meshnames/internal/api"
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
