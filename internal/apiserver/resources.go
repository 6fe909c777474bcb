package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

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
	items, total := s.opts.Cache.List(q)
	page := ListPage{Total: total, Items: items}
	if page.Items == nil {
		page.Items = []*resource.Object{}
	}
	if q.Offset+len(items) < total {
		next := nextURL(r, q.Offset+len(items), q.Size)
		page.Next = &next
	}
	writeJSON(w, http.StatusOK, page)
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

// writePrelude checks what PUT and DELETE share: that this control plane
// writes the kind, and the If-Match header. It answers the request itself
// when they fail.
func (s *Server) writePrelude(w http.ResponseWriter, r *http.Request, req request) (ifMatch int64, ok bool) {
	e := s.checkWritable(req.d.Kind)
	if e == nil {
		ifMatch, e = parseIfMatch(r)
	}
	if e != nil {
		writeError(w, e)
		return 0, false
	}
	return ifMatch, true
}

func (s *Server) put(w http.ResponseWriter, r *http.Request, req request) {
	ifMatch, ok := s.writePrelude(w, r, req)
	if !ok {
		return
	}
	body, e := readBody(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	obj, decodeErrs := resource.DecodePartial(body)
	if obj == nil {
		writeError(w, invalid(decodeErrs))
		return
	}
	if errs := validate.Merge(decodeErrs, s.admit(obj, req)); len(errs) > 0 {
		writeError(w, invalid(errs))
		return
	}
	stored, result, e := s.write(r, obj, ifMatch)
	if e != nil {
		writeError(w, e)
		return
	}
	for _, warning := range resource.Warnings(stored) {
		w.Header().Add("Warning", `299 - `+strconv.Quote(warning))
	}
	w.Header().Set(ResultHeader, result)
	w.Header().Set("ETag", etag(stored.Version))
	status := http.StatusOK
	if result == ResultCreated {
		status = http.StatusCreated
	}
	if preferMinimal(r) {
		// RFC 7240: the client needs only the outcome (apply of thousands
		// of documents), so the stored object is not encoded.
		w.Header().Set("Preference-Applied", "return=minimal")
		w.WriteHeader(status)
		return
	}
	writeObject(w, r, status, stored)
}

// admit checks that the document belongs at this path, applies defaults and
// system labels, and validates the result, returning every violation.
func (s *Server) admit(obj *resource.Object, req request) validate.Errors {
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
	obj.Spec.Default()
	errs.Append(resource.Validate(obj))
	errs.Append(resource.Admit(obj, s.opts.Mode, s.opts.Zone))
	if req.d.MeshScoped && obj.Mesh == req.mesh && validate.DNS1123Subdomain(req.mesh) == "" {
		if _, ok := s.opts.Cache.Get(resource.Key{Kind: resource.Mesh, Name: req.mesh}); !ok {
			errs.Addf("mesh", "mesh %q does not exist; create it first (PUT /meshes/%s)", req.mesh, req.mesh)
		}
	}
	return errs
}

// write creates or updates obj. Without If-Match a concurrent change is
// retried (the last writer wins, as a PUT promises); with If-Match it is a
// conflict.
func (s *Server) write(r *http.Request, obj *resource.Object, ifMatch int64) (*resource.Object, string, *Error) {
	ctx := r.Context()
	for attempt := range 10 {
		cur, err := s.current(ctx, obj, attempt == 0 && ifMatch == 0)
		switch {
		case errors.Is(err, store.ErrNotFound):
			if ifMatch != 0 {
				return nil, "", newError(http.StatusConflict, "Conflict", fmt.Sprintf("%s does not exist, but If-Match names version %d", obj.Key(), ifMatch))
			}
			created, err := store.Create(ctx, s.opts.Store, obj)
			if errors.Is(err, store.ErrAlreadyExists) {
				continue
			}
			if err != nil {
				return nil, "", s.storeError(err)
			}
			s.waitCache(ctx, created.Revision)
			return created, ResultCreated, nil
		case err != nil:
			return nil, "", s.storeError(err)
		}
		if ifMatch != 0 && cur.Version != ifMatch {
			return nil, "", versionConflict(obj.Key(), ifMatch, cur.Version)
		}
		if sameIntent(cur, obj) {
			return cur, ResultUnchanged, nil
		}
		obj.Version = cur.Version
		updated, err := store.Update(ctx, s.opts.Store, obj)
		if errors.Is(err, store.ErrConflict) && ifMatch == 0 {
			continue
		}
		if err != nil {
			return nil, "", s.storeError(err)
		}
		s.waitCache(ctx, updated.Revision)
		return updated, ResultUpdated, nil
	}
	return nil, "", newError(http.StatusConflict, "Conflict", obj.Key().String()+" is being modified concurrently; try again")
}

// current returns the stored resource obj would replace. When cached is
// true it may answer from the cache instead of reading the store: the write
// that follows checks the version (or that the key is free), so a stale
// cache costs one retry, never a lost write. The one answer the cache may
// not give is "unchanged": that would drop a PUT if another instance had
// changed the resource, so it is confirmed with the store.
func (s *Server) current(ctx context.Context, obj *resource.Object, cached bool) (*resource.Object, error) {
	if cached {
		c, ok := s.opts.Cache.Get(obj.Key())
		if !ok {
			return nil, store.ErrNotFound
		}
		if !sameIntent(c, obj) {
			return c, nil
		}
	}
	return s.opts.Store.Get(ctx, obj.Key())
}

func versionConflict(k resource.Key, want, got int64) *Error {
	return newError(http.StatusConflict, "Conflict", fmt.Sprintf("%s is at version %d, but If-Match names version %d", k, got, want))
}

func (s *Server) storeError(err error) *Error {
	e := fromStore(err)
	if e.Status >= 500 {
		s.log.Error("store write failed", "err", err)
	}
	return e
}

// sameIntent reports whether a write would change nothing the user controls.
func sameIntent(cur, next *resource.Object) bool {
	if !maps.Equal(cur.Labels, next.Labels) {
		return false
	}
	a, err1 := json.Marshal(cur.Spec)
	b, err2 := json.Marshal(next.Spec)
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request, req request) {
	ifMatch, ok := s.writePrelude(w, r, req)
	if !ok {
		return
	}
	if req.d.Kind == resource.Mesh {
		if e := s.checkMeshEmpty(req.name); e != nil {
			writeError(w, e)
			return
		}
	}
	rev, err := store.Delete(r.Context(), s.opts.Store, req.key(), ifMatch)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, notFound(req.key()))
		return
	case errors.Is(err, store.ErrConflict):
		cur, _ := s.opts.Store.Get(r.Context(), req.key())
		var got int64
		if cur != nil {
			got = cur.Version
		}
		writeError(w, versionConflict(req.key(), ifMatch, got))
		return
	case err != nil:
		writeError(w, s.storeError(err))
		return
	}
	s.waitCache(r.Context(), rev)
	writeJSON(w, http.StatusOK, struct{}{})
}

// checkMeshEmpty refuses to delete a mesh that still holds resources: a
// deletion that silently took every service with it would be a disaster.
func (s *Server) checkMeshEmpty(mesh string) *Error {
	var held []string
	for _, d := range resource.Descriptors() {
		if !d.MeshScoped {
			continue
		}
		if n := s.opts.Cache.Count(d.Kind, mesh); n > 0 {
			held = append(held, fmt.Sprintf("%d %s", n, d.Kind))
		}
	}
	if len(held) == 0 {
		return nil
	}
	return newError(http.StatusConflict, "Conflict", fmt.Sprintf("mesh %q still holds %s; delete them first", mesh, strings.Join(held, ", ")))
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
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, *Error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !yamlTypes[mt]) {
			return nil, newError(http.StatusUnsupportedMediaType, "Unsupported content type",
				fmt.Sprintf("content type %q is not supported; send application/json or application/yaml", ct))
		}
	}
	if r.ContentLength > MaxBodyBytes {
		return nil, tooLarge()
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge()
		}
		return nil, newError(http.StatusBadRequest, "Invalid body", "cannot read the request body: "+err.Error())
	}
	return body, nil
}

func tooLarge() *Error {
	return newError(http.StatusRequestEntityTooLarge, "Body too large", fmt.Sprintf("the request body exceeds %d bytes", MaxBodyBytes))
}

// writeObject answers in YAML when the client asks for it, else JSON.
func writeObject(w http.ResponseWriter, r *http.Request, status int, obj *resource.Object) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Accept")); yamlTypes[mt] {
		b, err := resource.EncodeYAML(obj)
		if err == nil {
			w.Header().Set("Content-Type", "application/yaml")
			w.WriteHeader(status)
			_, _ = w.Write(b)
			return
		}
	}
	writeJSON(w, status, obj)
}
