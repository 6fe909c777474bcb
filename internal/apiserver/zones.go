package apiserver

import (
	"net/http"

	"github.com/meshnames/meshnames/internal/resource"
)

// zoneInsight answers GET /zones/{name}/_insight: the state of the zone's
// sync stream, on a global control plane.
func (s *Server) zoneInsight(w http.ResponseWriter, r *http.Request, zone string) {
	if s.opts.ZoneInsight == nil {
		writeError(w, newError(http.StatusNotFound, "Not found", "zone insights are served by a global control plane; this one is "+s.opts.Admission.Mode()))
		return
	}
	if _, ok := s.opts.Cache.Get(resource.Key{Kind: resource.Zone, Name: zone}); !ok {
		writeError(w, newError(http.StatusNotFound, "Not found", "zone "+zone+" does not exist: it has never connected"))
		return
	}
	in, err := s.opts.ZoneInsight(r.Context(), zone)
	if err != nil {
		writeError(w, s.writeFailed(err))
		return
	}
	writeJSON(w, http.StatusOK, in)
}
