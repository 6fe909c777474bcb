package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/validate"
)

// List paging limits (Kuma's).
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// Result header values of a PUT, so that clients can report what happened.
const (
	ResultHeader    = "Meshnames-Result"
	ResultCreated   = "created"
	ResultUpdated   = "updated"
	ResultUnchanged = "unchanged"
)

func (r request) key() resource.Key {
	return resource.Key{Kind: r.d.Kind, Mesh: r.mesh, Name: r.name}
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, req request) {
	obj, ok := s.opts.Cache.Get(req.key())
	if !ok {
		writeError(w, notFound(req.key()))
		return
	}
	w.Header().Set("ETag", etag(obj.Version))
	writeObject(w, r, http.StatusOK, obj)
}

func notFound(k resource.Key) *Error {
	return newError(http.StatusNotFound, "Not found", k.String()+" does not exist")
}

func etag(version int64) string { return `"` + strconv.FormatInt(version, 10) + `"` }

// ListPage is the body of a list response.
type ListPage struct {
	Total int                `json:"total"`
	Items []*resource.Object `json:"items"`
	Next  *string            `json:"next"`
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, req request) {
	q, errs := parseListQuery(r.URL.Query())
	if len(errs) > 0 {
		writeError(w, &Error{Status: http.StatusBadRequest, Title: "Invalid query", Causes: errs})
		return
	}
	q.Kind, q.Mesh = req.d.Kind, req.mesh
	if req.mesh != "" {
		// An empty list would say the mesh holds nothing; it does not exist.
		if _, ok := s.opts.Cache.Get(resource.Key{Kind: resource.Mesh, Name: req.mesh}); !ok {
			writeError(w, notFound(resource.Key{Kind: resource.Mesh, Name: req.mesh}))
			return
		}
	}
	// The page is written around the items' encodings, which the cache
	// appends from its own entries: through json.Marshal every item's
	// encoding would be scanned and compacted again, over copies of the
	// cache's objects (frozen ones decoded only to be encoded again).
	page, total := s.opts.Cache.Page(q)
	b := append(make([]byte, 0, 64+512*page.Len()), `{"total":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	b, err := page.AppendJSON(append(b, `,"items":[`...))
	if err != nil {
		s.log.Error("cannot encode a list page", "path", r.URL.Path, "err", err) // a bug: the cache encoded it before
		writeError(w, asError(err))
		return
	}
	b = append(b, `],"next":`...)
	if n := page.Len(); q.Offset+n < total {
		next, _ := json.Marshal(nextURL(r, q.Offset+n, q.Size)) // a string always encodes
		b = append(b, next...)
	} else {
		b = append(b, `null`...)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(b, "}\n"...))
}

func parseListQuery(v url.Values) (cache.Query, validate.Errors) {
	var errs validate.Errors
	q := cache.Query{Size: DefaultPageSize}
	if s := v.Get("size"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPageSize {
			errs.Addf("size", "must be an integer from 1 to %d, got %q", MaxPageSize, s)
		} else {
			q.Size = n
		}
	}
	if s := v.Get("offset"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			errs.Addf("offset", "must be a non-negative integer, got %q", s)
		} else {
			q.Offset = n
		}
	}
	// Kuma's name filter: names that contain the value.
	q.NameContains = v.Get("name")
	for param, values := range v {
		if !strings.HasPrefix(param, "filter[") {
			continue
		}
		key, ok := strings.CutPrefix(strings.TrimSuffix(param, "]"), "filter[labels.")
		if !ok || !strings.HasSuffix(param, "]") || key == "" {
			errs.Addf(validate.Path(param), "filters are only supported on labels: filter[labels.KEY]=VALUE")
			continue
		}
		if q.Labels == nil {
			q.Labels = map[string]string{}
		}
		q.Labels[key] = values[0]
	}
	return q, errs
}

func nextURL(r *http.Request, offset, size int) string {
	q := r.URL.Query()
	q.Set("offset", strconv.Itoa(offset))
	q.Set("size", strconv.Itoa(size))
	u := url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path, RawQuery: q.Encode()}
	if r.TLS != nil {
		u.Scheme = "https"
	}
	return u.String()
}

func (s *Server) put(w http.ResponseWriter, r *http.Request, req request) {
	ifMatch, e := s.writePrelude(r, req)
	if e != nil {
		writeError(w, e)
		return
	}
	body, e := s.readBody(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	obj, decodeErrs := resource.DecodePartial(body)
	if obj == nil {
		writeError(w, invalid(decodeErrs))
		return
	}
	// Every problem of the document in one answer: what did not decode
	// (an unknown field, a wrong type) together with the rules the rest
	// breaks, except those under a field that did not decode. A document
	// of another kind than the path's is not checked further.
	errs := matchPath(obj, req)
	if obj.Kind == req.d.Kind {
		errs.Append(s.opts.Admission.Check(obj, s.writer(r), admission.PutOptions{}))
	}
	if errs = validate.Merge(decodeErrs, errs); len(errs) > 0 {
		writeError(w, invalid(errs))
		return
	}
	out, err := s.opts.Admission.Put(r.Context(), obj, s.writer(r), admission.PutOptions{IfMatch: ifMatch, Admitted: true})
	if err != nil {
		writeError(w, s.writeFailed(err))
		return
	}
	stored := out.Object
	if out.Result != admission.Unchanged {
		s.waitCache(r.Context(), stored.Revision)
	}
	for _, warning := range resource.Warnings(stored) {
		w.Header().Add("Warning", `299 - `+strconv.Quote(warning))
	}
	w.Header().Set(ResultHeader, string(out.Result))
	w.Header().Set("ETag", etag(stored.Version))
	status := http.StatusOK
	if out.Result == admission.Created {
		status = http.StatusCreated
	}
	if preferMinimal(r) {
		// RFC 7240: the client needs only the outcome (apply of thousands
		// of documents), so the stored object is not encoded.
		w.Header().Set("Preference-Applied", "return=minimal")
		w.WriteHeader(status)
		return
	}
	if !acceptsYAML(r) {
		// What the cache holds of this very write, from the store's
		// encoding: the stored object is not encoded again.
		if b, ok, err := s.opts.Cache.AppendJSONAt(make([]byte, 0, 1024), stored.Key(), stored.Revision); ok && err == nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write(append(b, '\n'))
			return
		}
	}
	writeObject(w, r, status, stored)
}

// writePrelude checks what PUT and DELETE share: that users of this
// control plane write the kind, and the If-Match header.
func (s *Server) writePrelude(r *http.Request, req request) (int64, *Error) {
	if owner := admission.Owner(req.d.Kind, s.opts.Admission.Mode()); owner != "" {
		return 0, newError(http.StatusMethodNotAllowed, "Read-only resource",
			fmt.Sprintf("%s resources are written on %s, not on this %s control plane", req.d.Kind, owner, s.opts.Admission.Mode()))
	}
	return parseIfMatch(r)
}

// writer is who makes request r: a user of the API.
func (s *Server) writer(r *http.Request) admission.Writer {
	return admission.Writer{Source: admission.User, Subject: r.RemoteAddr}
}

// matchPath checks that the document belongs at the request's path, and
// takes its name and mesh from the path when the document leaves them out.
func matchPath(obj *resource.Object, req request) validate.Errors {
	var errs validate.Errors
	if obj.Kind != req.d.Kind {
		errs.Addf("type", "must be %s to match the path /%s", req.d.Kind, req.d.Plural)
		return errs
	}
	if obj.Name == "" {
		obj.Name = req.name
	} else if obj.Name != req.name {
		errs.Addf("name", "must match the name in the path (%q), got %q", req.name, obj.Name)
	}
	if req.d.MeshScoped {
		if obj.Mesh == "" {
			obj.Mesh = req.mesh
		} else if obj.Mesh != req.mesh {
			errs.Addf("mesh", "must match the mesh in the path (%q), got %q", req.mesh, obj.Mesh)
		}
	}
	return errs
}

// writeFailed maps an error of a write to a response, logging what the
// user cannot act on.
func (s *Server) writeFailed(err error) *Error {
	e := fromError(err)
	if e.Status >= 500 {
		s.log.Error("store write failed", "err", err)
	}
	return e
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request, req request) {
	ifMatch, e := s.writePrelude(r, req)
	if e != nil {
		writeError(w, e)
		return
	}
	rev, err := s.opts.Admission.Delete(r.Context(), req.key(), s.writer(r), ifMatch)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, notFound(req.key()))
		return
	}
	if err != nil {
		writeError(w, s.writeFailed(err))
		return
	}
	s.waitCache(r.Context(), rev)
	writeJSON(w, http.StatusOK, struct{}{})
}

func preferMinimal(r *http.Request) bool {
	for _, v := range r.Header.Values("Prefer") {
		for _, p := range strings.Split(v, ",") {
			if strings.TrimSpace(p) == "return=minimal" {
				return true
			}
		}
	}
	return false
}

func parseIfMatch(r *http.Request) (int64, *Error) {
	h := r.Header.Get("If-Match")
	if h == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(strings.Trim(strings.TrimPrefix(h, "W/"), `"`), 10, 64)
	if err != nil || v < 1 {
		return 0, &Error{Status: http.StatusBadRequest, Title: "Invalid header", Causes: validate.Errors{{Field: "If-Match", Message: "must be a version from an ETag, such as \"3\""}}}
	}
	return v, nil
}

var yamlTypes = map[string]bool{"application/yaml": true, "application/x-yaml": true, "text/yaml": true, "text/x-yaml": true}

// readBody enforces the content type and the size limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *Error) {
	return readBodyLimit(w, r, s.opts.Limits.MaxBodyBytes, "api.limits.maxBodyBytes")
}

// readBodyLimit is readBody with a limit of its own, named by setting.
func readBodyLimit(w http.ResponseWriter, r *http.Request, limit int64, setting string) ([]byte, *Error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !yamlTypes[mt]) {
			return nil, newError(http.StatusUnsupportedMediaType, "Unsupported content type",
				fmt.Sprintf("content type %q is not supported; send application/json or application/yaml", ct))
		}
	}
	if r.ContentLength > limit {
		return nil, TooLarge(limit, setting)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, TooLarge(limit, setting)
		}
		return nil, newError(http.StatusBadRequest, "Invalid body", "cannot read the request body: "+err.Error())
	}
	return body, nil
}

// TooLarge is the answer to a body over limit bytes, naming the setting
// that sets it (shared with the Kuma adapter).
func TooLarge(limit int64, setting string) *Error {
	return newError(http.StatusRequestEntityTooLarge, "Body too large",
		fmt.Sprintf("the request body exceeds the limit of %d bytes (%s)", limit, setting))
}

// acceptsYAML reports whether r asks for YAML.
func acceptsYAML(r *http.Request) bool {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Accept"))
	return yamlTypes[mt]
}

// writeObject answers in YAML when the client asks for it, else JSON.
func writeObject(w http.ResponseWriter, r *http.Request, status int, obj *resource.Object) {
	if acceptsYAML(r) {
		b, err := resource.EncodeYAML(obj)
		if err == nil {
			w.Header().Set("Content-Type", "application/yaml")
			w.WriteHeader(status)
			_, _ = w.Write(b)
			return
		}
	}
	// The object's own encoding, written as it is: through json.Marshal
	// it would be scanned and compacted again (a tenth of a create's
	// response).
	b, err := obj.MarshalJSON()
	if err != nil {
		writeJSON(w, status, obj) // the same error, answered as writeJSON does
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
