package apiserver

import (
	"net/http"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/resource"
)

// serviceTags answers GET /meshes/{mesh}/_servicetags: what the leader's
// controller decided, as this instance's cache shows it (Options.
// ServiceTags), so any instance can answer.
func (s *Server) serviceTags(w http.ResponseWriter, mesh string) {
	if _, ok := s.opts.Cache.Get(resource.Key{Kind: resource.Mesh, Name: mesh}); !ok {
		writeError(w, notFound(resource.Key{Kind: resource.Mesh, Name: mesh}))
		return
	}
	if s.opts.ServiceTags == nil {
		writeError(w, newError(http.StatusNotFound, "Not found", "this control plane does not synthesise MeshServices (it runs in global mode)"))
		return
	}
	r := api.ServiceTagsReport{Mesh: mesh, Tags: s.opts.ServiceTags(mesh)}
	if r.Tags == nil {
		r.Tags = []api.ServiceTag{}
	}
	writeJSON(w, http.StatusOK, r)
}
