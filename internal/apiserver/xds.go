package apiserver

import (
	"errors"
	"net/http"

	"github.com/meshnames/meshnames/internal/store"
)

// xdsInspection answers GET /meshes/{mesh}/dataplanes/{name}/_xds (and,
// with mesh "", GET /zoneingresses/{name}/_xds): what the proxy of the
// Dataplane (the ZoneIngress) gets, and its streams on this instance.
func (s *Server) xdsInspection(w http.ResponseWriter, mesh, name string) {
	if s.opts.XDS == nil {
		writeError(w, newError(http.StatusNotFound, "Not found", "this control plane serves no xDS (a global serves none; xds.addr may be empty)"))
		return
	}
	in, err := s.opts.XDS(mesh, name)
	if errors.Is(err, store.ErrNotFound) {
		msg := "Dataplane " + mesh + "/" + name + " does not exist"
		if mesh == "" {
			msg = "ZoneIngress " + name + " is no ingress of this zone: it does not exist, or is another zone's (inspect it in its zone)"
		}
		writeError(w, newError(http.StatusNotFound, "Not found", msg))
		return
	}
	if err != nil {
		writeError(w, s.writeFailed(err))
		return
	}
	writeJSON(w, http.StatusOK, in)
}
