package apiserver

import (
	"net/http"
	"time"
)

// LeaderStatus is the body of GET /_leader: who leads (runs the
// controllers) and whether this instance does.
type LeaderStatus struct {
	// Election is "lease" (instances sharing PostgreSQL elect a leader with
	// a lease) or "local" (the embedded store's single process leads).
	Election string `json:"election"`
	// Holder is the instance that holds the lease (empty when none has
	// yet), Term the lease's term, which increases with every change of
	// holder, and ExpiresAt when the lease runs out unless renewed, by the
	// database's clock. A lease that has run out has no leader until
	// another instance takes it.
	Holder    string    `json:"holder,omitempty"`
	Term      int64     `json:"term,omitempty"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	// Self identifies this instance; Leading says whether it leads now.
	Self    string `json:"self"`
	Leading bool   `json:"leading"`
}

// leader answers GET /_leader.
func (s *Server) leader(w http.ResponseWriter, r *http.Request) {
	if s.opts.Leader == nil {
		writeError(w, newError(http.StatusNotFound, "Not found", "this control plane runs no leader election"))
		return
	}
	ls, err := s.opts.Leader(r.Context())
	if err != nil {
		writeError(w, fromStore(err))
		return
	}
	writeJSON(w, http.StatusOK, ls)
}
