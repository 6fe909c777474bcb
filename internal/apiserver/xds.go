package apiserver

import (
	"errors"
	"net/http"

	"github.com/meshnames/meshnames/internal/store"
)

// xdsInspection answers GET /meshes/{mesh}/dataplanes/{name}/_xds: what
// the Dataplane's proxy gets, and its streams on this instance.
func (s *Server) xdsInspection(w http.ResponseWriter, mesh, name string) {
	if s.opts.XDS == nil {
		writeError(w, newError(http.StatusNotFound, "Not found", "this control plane serves no xDS (a global serves none; xds.addr may be empty)"))
		return
	}
	in, err := s.opts.XDS(mesh, name)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, newError(http.StatusNotFound, "Not found", "Dataplane "+mesh+"/"+name+" does not exist"))
		return
	}
	if err != nil {
		writeError(w, s.writeFailed(err))
		return
	}
	writeJSON(w, http.StatusOK, in)
}
