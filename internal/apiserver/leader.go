package apiserver

import "net/http"

// leader answers GET /_leader.
func (s *Server) leader(w http.ResponseWriter, r *http.Request) {
	if s.opts.Leader == nil {
		writeError(w, newError(http.StatusNotFound, "Not found", "this control plane runs no leader election"))
		return
	}
	ls, err := s.opts.Leader(r.Context())
	if err != nil {
		writeError(w, fromError(err))
		return
	}
	writeJSON(w, http.StatusOK, ls)
}
