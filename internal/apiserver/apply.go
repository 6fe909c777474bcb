package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/validate"
)

// apply answers POST /_apply?dryRun=true: it admits every item as a PUT
// would, through the same admission layer, and reports for each what its
// write would do or why it cannot be made, writing nothing. Meshes defined
// by the batch count as existing for the items that follow, so a file can
// create a mesh and what it holds. When every item passes, it adds the
// hostnames and VIPs that services would gain or lose, as the controllers
// would decide them (Options.Preview).
func (s *Server) apply(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("dryRun") != "true" {
		writeError(w, &Error{Status: http.StatusBadRequest, Title: "Invalid query",
			Causes: validate.Errors{{Field: "dryRun", Message: "must be true: POST /_apply only checks; write each resource with PUT"}}})
		return
	}
	body, e := readBodyLimit(w, r, s.opts.Limits.MaxApplyBytes, "api.limits.maxApplyBytes")
	if e != nil {
		writeError(w, e)
		return
	}
	var req api.ApplyRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, newError(http.StatusBadRequest, "Invalid body", "the body must be JSON {\"items\": [resources]}: "+err.Error()))
		return
	}
	if n, limit := len(req.Items), s.opts.Limits.MaxApplyDocuments; n > limit {
		writeError(w, newError(http.StatusRequestEntityTooLarge, "Too many documents",
			fmt.Sprintf("the request holds %d documents, over the limit of %d (api.limits.maxApplyDocuments): apply them in parts", n, limit)))
		return
	}
	defined := map[string]bool{}
	for _, obj := range req.Items {
		if obj != nil && obj.Kind == resource.Mesh {
			defined[obj.Name] = true
		}
	}
	report := api.ApplyReport{Items: make([]api.ApplyResult, len(req.Items))}
	var admitted []*resource.Object
	for i, obj := range req.Items {
		res := &report.Items[i]
		if obj == nil || obj.Spec == nil {
			res.Causes = validate.Errors{{Field: "spec", Message: "must be set"}}
			report.Problems++
			continue
		}
		if owner := admission.Owner(obj.Kind, s.opts.Admission.Mode()); owner != "" {
			res.Error = fmt.Sprintf("%s resources are written on %s, not on this %s control plane", obj.Kind, owner, s.opts.Admission.Mode())
			report.Problems++
			continue
		}
		result, err := s.opts.Admission.Plan(r.Context(), obj, s.writer(r), admission.PutOptions{MeshesDefined: defined})
		switch errs, invalid := validate.From(err); {
		case err == nil:
			res.Result = string(result)
			if result != admission.Unchanged {
				admitted = append(admitted, obj)
				res.Object = obj
			}
		case invalid:
			res.Causes = errs
			report.Problems++
		default:
			e := s.writeFailed(err)
			if e.Status >= 500 {
				writeError(w, e)
				return
			}
			res.Error = e.Detail
			report.Problems++
		}
	}
	if report.Problems == 0 && len(admitted) > 0 && s.opts.Preview != nil {
		changes, err := s.opts.Preview(r.Context(), admitted)
		if err != nil {
			writeError(w, s.writeFailed(err))
			return
		}
		report.Changes = changes
	}
	writeJSON(w, http.StatusOK, report)
}
