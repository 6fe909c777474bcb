package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/audit"
	"github.com/meshnames/meshnames/internal/auth"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// guard runs a request's security before its handler: it classifies the
// request, has Options.Auth authenticate, rate-limit and authorize it, and
// audits every request that may write (any method but GET and HEAD),
// refused or not. Without Options.Auth it only dispatches. It returns the
// route template for metrics.
func (s *Server) guard(w http.ResponseWriter, r *http.Request) string {
	if s.opts.Auth == nil {
		return s.dispatch(w, r)
	}
	a, route := classify(r)
	if a.Class == auth.Public {
		return s.dispatch(w, r)
	}
	id, ref := s.opts.Auth.Check(r, a)
	entry := api.AuditEntry{Subject: id.Subject, Role: string(id.Role), TokenID: id.TokenID, Source: auth.Source(r),
		Verb: verbOf(r, a), Kind: a.Kind, Mesh: a.Mesh, Name: nameOf(r, a)}
	if a.Kind == resource.Mesh {
		entry.Mesh = "" // the mesh is the name
	}
	if ref != nil && s.opts.GUIPrompt != nil && route == "/gui" && acceptsHTML(r) && (ref.Status == http.StatusUnauthorized || ref.Status == http.StatusForbidden) {
		// A browser opening a GUI page: a page that asks for a token.
		if ref.Status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="meshnames"`)
		}
		s.opts.GUIPrompt(w, r, ref.Status, ref.Detail)
		return route
	}
	if ref != nil {
		s.refuse(w, ref)
		if audited(r, a) {
			entry.Result, entry.Code, entry.Reason = api.ResultRefused, ref.Status, ref.Detail
			s.appendAudit(r.Context(), entry)
		}
		return route
	}
	ctx := auth.WithIdentity(r.Context(), id)
	if !audited(r, a) {
		return s.dispatch(w, r.WithContext(ctx))
	}
	p := &pendingAudit{entry: entry}
	rec := &responseCapture{ResponseWriter: w, code: http.StatusOK}
	got := s.dispatch(rec, r.WithContext(context.WithValue(ctx, pendingKey{}, p)))
	if p.written.Load() {
		audit.Log(s.log, p.final)
		return got
	}
	entry.Code = rec.code
	switch result := rec.Header().Get(ResultHeader); {
	case result == ResultUnchanged:
		entry.Verb, entry.Result = api.VerbUpdate, api.ResultUnchanged
	case rec.code < 400:
		entry.Result = api.ResultSuccess // a write that recorded nothing of its own
	default:
		entry.Result, entry.Reason = api.ResultFailed, errorReason(rec.body)
	}
	s.appendAudit(r.Context(), entry)
	return got
}

// writes reports whether a request of method may change something.
func writes(method string) bool { return method != http.MethodGet && method != http.MethodHead }

// audited reports whether the guard audits a request: every one that may
// write, and backups, which read everything.
func audited(r *http.Request, a auth.Action) bool {
	return a.Class == auth.Backup || (writes(r.Method) && a.Class != auth.Read)
}

// appendAudit writes e on its own and logs it. The request may be gone:
// the entry is written anyway.
func (s *Server) appendAudit(ctx context.Context, e api.AuditEntry) {
	audit.Log(s.log, e)
	if s.recorder == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := audit.Append(ctx, s.opts.Store, e); err != nil {
		s.log.Error("cannot write an audit entry", "err", err, "verb", e.Verb, "kind", e.Kind, "mesh", e.Mesh, "name", e.Name)
	}
}

// refuse answers a request the guard refused.
func (s *Server) refuse(w http.ResponseWriter, ref *auth.Refusal) {
	title := map[int]string{http.StatusUnauthorized: "Unauthorized", http.StatusForbidden: "Forbidden",
		http.StatusTooManyRequests: "Too many requests"}[ref.Status]
	switch ref.Status {
	case http.StatusUnauthorized:
		v := `Bearer realm="meshnames"`
		if ref.Reason != "missing" {
			v += `, error="invalid_token", error_description=` + quoteHeader(ref.Detail)
		}
		w.Header().Set("WWW-Authenticate", v)
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", auth.RetryAfterHeader(ref.RetryAfter))
	}
	writeError(w, newError(ref.Status, title, ref.Detail))
}

func quoteHeader(s string) string {
	return `"` + strings.NewReplacer(`"`, `'`, `\`, `/`, "\n", " ", "\r", " ").Replace(s) + `"`
}

// classify maps a request to what the policy decides on, and its route
// template.
func classify(r *http.Request) (auth.Action, string) {
	a := auth.Action{Method: r.Method, Class: auth.Read}
	path := strings.Trim(r.URL.Path, "/")
	var seg []string
	if path != "" {
		seg = strings.Split(path, "/")
	}
	write := writes(r.Method)
	switch {
	case len(seg) == 0:
		a.Class = auth.Public
		return a, "/"
	case len(seg) == 1 && (seg[0] == "healthz" || seg[0] == "readyz"):
		a.Class = auth.Public
		return a, "/" + seg[0]
	case len(seg) == 1 && (seg[0] == "metrics" || seg[0] == "_leader"):
		return a, "/" + seg[0]
	case seg[0] == "gui":
		// The GUI's scripts and styles hold no data: the page that asks
		// for a token needs them. Its pages show every mesh, so a token
		// limited to meshes may not open them.
		if len(seg) > 1 && seg[1] == "static" && !write {
			a.Class = auth.Public
		} else if write {
			a.Class = auth.Other
		} else {
			a.AllMeshes = true
		}
		return a, "/gui"
	case len(seg) == 1 && seg[0] == "_backup":
		a.Class = auth.Backup
		return a, "/_backup"
	case len(seg) == 1 && seg[0] == "_apply":
		// A dry run: it writes nothing, so it is a read for every role.
		return a, "/_apply"
	case seg[0] == "tokens":
		a.Class = auth.Tokens
		if len(seg) == 1 {
			return a, "/tokens"
		}
		if seg[1] == "zone" || seg[1] == "dataplane" || seg[1] == "ingress" || seg[1] == "_rotate-key" {
			return a, "/tokens/" + seg[1]
		}
		return a, "/tokens/{id}"
	case len(seg) == 1 && seg[0] == "audit":
		a.Class = auth.Audit
		return a, "/audit"
	case len(seg) == 1 && seg[0] == "history":
		a.Class = auth.History
		return a, "/history"
	case len(seg) == 3 && seg[0] == "meshes" && (seg[2] == "_dns" || seg[2] == "_servicetags"):
		inMesh(&a, seg[1])
		if write {
			a.Class = auth.Other
		}
		return a, "/meshes/{mesh}/" + seg[2]
	case len(seg) == 5 && seg[0] == "meshes" && seg[2] == "dataplanes" && seg[4] == "_xds":
		a.Kind = resource.Dataplane
		inMesh(&a, seg[1])
		if write {
			a.Class = auth.Other
		}
		return a, "/meshes/{mesh}/dataplanes/{name}/_xds"
	case len(seg) == 3 && seg[0] == "zoneingresses" && seg[2] == "_xds":
		// An ingress routes every mesh's services: its config is every
		// mesh's.
		a.Kind, a.AllMeshes = resource.ZoneIngress, true
		if write {
			a.Class = auth.Other
		}
		return a, "/zoneingresses/{name}/_xds"
	case len(seg) == 5 && seg[4] == "_hostnames":
		if req, ok := parsePath(seg[:4]); ok {
			a.Kind = req.d.Kind
			inMesh(&a, req.mesh)
			if write {
				a.Class = auth.Other
			}
			return a, req.route + "/_hostnames"
		}
	}
	req, ok := parsePath(seg)
	if !ok {
		a.Class = auth.Other
		return a, "unknown"
	}
	a.Kind = req.d.Kind
	switch {
	case req.d.Kind == resource.Mesh:
		a.Mesh = req.name
	case req.d.MeshScoped:
		inMesh(&a, req.mesh)
	}
	if write {
		a.Class = auth.Write
	}
	return a, req.route
}

// inMesh makes a the action of a path in mesh; an empty mesh segment
// (/meshes//...) names no one mesh, so it is authorized as across every
// mesh, as a mesh-scoped list at the top (no mesh segment) is.
func inMesh(a *auth.Action, mesh string) {
	a.Mesh, a.AllMeshes = mesh, mesh == ""
}

// verbOf names what a request does, for the audit log, before it is known
// whether a PUT creates or updates.
func verbOf(r *http.Request, a auth.Action) string {
	switch {
	case a.Class == auth.Backup:
		return api.VerbBackup
	case a.Class == auth.Tokens && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/_rotate-key"):
		return api.VerbRotateKey
	case a.Class == auth.Tokens && r.Method == http.MethodPost:
		return api.VerbIssueToken
	case a.Class == auth.Tokens && r.Method == http.MethodDelete:
		return api.VerbRevokeToken
	case r.Method == http.MethodPut:
		return api.VerbPut
	}
	return strings.ToLower(r.Method)
}

// nameOf is the name an audit entry records: the resource's, or the token
// ID of a revocation.
func nameOf(r *http.Request, a auth.Action) string {
	seg := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case a.Class == auth.Tokens && len(seg) == 2 && seg[1] != "zone" && seg[1] != "_rotate-key":
		return seg[1]
	case a.Class == auth.Write && a.Kind != "":
		return seg[len(seg)-1]
	}
	return ""
}

// errorReason is the reason an error body gives: its title, detail and
// causes.
func errorReason(body []byte) string {
	var e Error
	if json.Unmarshal(body, &e) != nil || e.Title == "" {
		return strings.TrimSpace(string(body))
	}
	reason := e.Error()
	for i, c := range e.Causes {
		if i == 3 {
			reason += "; ..."
			break
		}
		reason += "; " + c.Field + ": " + c.Message
	}
	return reason
}

// responseCapture records the status and the start of an error body.
type responseCapture struct {
	http.ResponseWriter
	code int
	body []byte
}

const maxCapture = 2048

func (c *responseCapture) WriteHeader(code int) {
	c.code = code
	c.ResponseWriter.WriteHeader(code)
}

func (c *responseCapture) Write(b []byte) (int, error) {
	if c.code >= 400 && len(c.body) < maxCapture {
		c.body = append(c.body, b[:min(len(b), maxCapture-len(c.body))]...)
	}
	return c.ResponseWriter.Write(b)
}

// pendingAudit is the audit entry of a write in progress. auditingStore
// writes it in the same transaction as the write and marks it written;
// guard writes it on its own when the handler wrote nothing.
type pendingAudit struct {
	entry   api.AuditEntry
	final   api.AuditEntry
	written atomic.Bool
}

type pendingKey struct{}

// AuditingStore returns st for the API's admission to write through: an
// Apply whose context carries the audit entry of an API request in
// progress appends the entry in the same transaction, depending on every
// op of the batch, so that a write and its entry commit together or not at
// all. Other Applies pass through unchanged, and so does everything when
// st keeps no record streams (store.Recorder).
func AuditingStore(st store.Store) store.Store {
	if _, ok := st.(store.Recorder); !ok {
		return st
	}
	return auditingStore{Store: st}
}

type auditingStore struct{ store.Store }

func (a auditingStore) Apply(ctx context.Context, ops ...store.Op) ([]store.Result, error) {
	if len(ops) == 0 {
		return a.Store.Apply(ctx, ops...)
	}
	deps := make([]int, len(ops))
	for i := range deps {
		deps[i] = i
	}
	entry, committed := a.Accompany(ctx, ops[0].Type)
	if entry == nil {
		return a.Store.Apply(ctx, ops...)
	}
	entry[0].DependsOn = deps
	rs, err := a.Store.Apply(ctx, append(slices.Clip(ops), entry...)...)
	if err != nil {
		return rs, err
	}
	if rs[len(ops)].Err == nil {
		committed()
	}
	return rs[:len(ops)], nil
}

// Accompany returns the audit entry of the API request in progress in ctx,
// for a write whose first op is of type t, to commit with it (its
// DependsOn is the caller's to set), and the function that records that
// it committed; nothing when ctx carries no such request or its entry is
// written already. The admission layer writes it with what the
// controllers' runner creates (admission.Options.Creator).
func (a auditingStore) Accompany(ctx context.Context, t store.OpType) ([]store.Op, func()) {
	p, ok := ctx.Value(pendingKey{}).(*pendingAudit)
	if !ok || p.written.Load() {
		return nil, nil
	}
	e := p.entry
	e.Result = api.ResultSuccess
	switch t {
	case store.OpCreate:
		e.Verb, e.Code = api.VerbCreate, http.StatusCreated
	case store.OpUpdate:
		e.Verb, e.Code = api.VerbUpdate, http.StatusOK
	case store.OpDelete:
		e.Verb, e.Code = api.VerbDelete, http.StatusOK
	}
	return []store.Op{audit.Op(e)}, func() {
		p.final = e
		p.written.Store(true)
	}
}
