package apiserver

import (
	"fmt"
	"net/http"

	"github.com/meshnames/meshnames/internal/resource"
)

// checkWritable refuses writes of kinds another control plane owns, with 405.
func (s *Server) checkWritable(k resource.Kind) *Error {
	owner := resource.Owner(k, s.opts.Mode)
	if owner == "" {
		return nil
	}
	return newError(http.StatusMethodNotAllowed, "Read-only resource",
		fmt.Sprintf("%s resources are written on %s, not on this %s control plane", k, owner, s.opts.Mode))
}
