package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/audit"
	"github.com/meshnames/meshnames/internal/auth"
	"github.com/meshnames/meshnames/internal/history"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/token"
	"github.com/meshnames/meshnames/internal/validate"
)

// Default validities of tokens issued through the API.
const (
	DefaultUserTokenValidity = 24 * time.Hour
	DefaultZoneTokenValidity = 8760 * time.Hour
	// DefaultDataplaneTokenValidity is how long a dataplane token lasts
	// unless the request says.
	DefaultDataplaneTokenValidity = 8760 * time.Hour
)

// security serves /tokens..., /audit and /history; the guard has
// authorized the request already.
func (s *Server) security(w http.ResponseWriter, r *http.Request, seg []string) string {
	switch {
	case seg[0] == "audit":
		if allow(w, r, http.MethodGet) {
			s.auditLog(w, r)
		}
		return "/audit"
	case seg[0] == "history":
		if allow(w, r, http.MethodGet) {
			s.history(w, r)
		}
		return "/history"
	case s.opts.Keys == nil:
		writeError(w, newError(http.StatusNotFound, "Not found", "this control plane issues no tokens"))
		return "/tokens"
	case len(seg) == 1:
		switch r.Method {
		case http.MethodGet:
			s.listTokens(w, r)
		case http.MethodPost:
			s.issueToken(w, r, userToken)
		default:
			w.Header().Set("Allow", "GET, POST")
			writeError(w, newError(http.StatusMethodNotAllowed, "Method not allowed", r.Method+" is not supported here; use GET or POST"))
		}
		return "/tokens"
	case len(seg) == 2 && seg[1] == "zone":
		if allow(w, r, http.MethodPost) {
			s.issueToken(w, r, zoneToken)
		}
		return "/tokens/zone"
	case len(seg) == 2 && seg[1] == "dataplane":
		if allow(w, r, http.MethodPost) {
			s.issueToken(w, r, dataplaneToken)
		}
		return "/tokens/dataplane"
	case len(seg) == 2 && seg[1] == "ingress":
		if allow(w, r, http.MethodPost) {
			s.issueToken(w, r, ingressToken)
		}
		return "/tokens/ingress"
	case len(seg) == 2 && seg[1] == "_rotate-key":
		if allow(w, r, http.MethodPost) {
			s.rotateKey(w, r)
		}
		return "/tokens/_rotate-key"
	case len(seg) == 2:
		switch r.Method {
		case http.MethodGet:
			s.getToken(w, r, seg[1])
		case http.MethodDelete:
			s.revokeToken(w, r, seg[1])
		default:
			w.Header().Set("Allow", "GET, DELETE")
			writeError(w, newError(http.StatusMethodNotAllowed, "Method not allowed", r.Method+" is not supported here; use GET or DELETE"))
		}
		return "/tokens/{id}"
	}
	writeError(w, newError(http.StatusNotFound, "Not found", "no such path: "+r.URL.Path))
	return "unknown"
}

// caller is the identity the guard established (loopback admin when the
// server runs without a guard).
func caller(ctx context.Context) auth.Identity {
	if id, ok := auth.IdentityFrom(ctx); ok {
		return id
	}
	return auth.Identity{Subject: auth.LoopbackSubject, Role: token.RoleAdmin}
}

// markAudited tells the guard the request's audit entry was written with
// its write.
func markAudited(ctx context.Context, e api.AuditEntry) {
	if p, ok := ctx.Value(pendingKey{}).(*pendingAudit); ok {
		p.final = e
		p.written.Store(true)
	}
}

// auditEntry is the entry of the request in progress, verb and result set.
func auditEntry(ctx context.Context, verb, name, reason string, code int) api.AuditEntry {
	e := api.AuditEntry{Verb: verb, Name: name, Result: api.ResultSuccess, Code: code, Reason: reason}
	if p, ok := ctx.Value(pendingKey{}).(*pendingAudit); ok {
		e.Subject, e.Role, e.TokenID, e.Source = p.entry.Subject, p.entry.Role, p.entry.TokenID, p.entry.Source
	}
	return e
}

func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, v any) *Error {
	body, e := s.readBody(w, r)
	if e != nil {
		return e
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &Error{Status: http.StatusBadRequest, Title: "Invalid request", Causes: validate.Errors{{Field: "body", Message: err.Error()}}}
	}
	return nil
}

// The kinds of token the API issues, each at its own path.
type tokenKind int

const (
	userToken      tokenKind = iota // POST /tokens
	zoneToken                       // POST /tokens/zone
	dataplaneToken                  // POST /tokens/dataplane
	ingressToken                    // POST /tokens/ingress
)

func (s *Server) issueToken(w http.ResponseWriter, r *http.Request, kind tokenKind) {
	var req api.TokenRequest
	if e := s.decodeJSON(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	c, errs := s.tokenClaims(req, kind)
	if len(errs) > 0 {
		writeError(w, &Error{Status: http.StatusBadRequest, Title: "Invalid request", Detail: "the request breaks the rules listed in causes", Causes: errs})
		return
	}
	if kind == zoneToken {
		if s.opts.Admission.Mode() != "global" {
			writeError(w, newError(http.StatusConflict, "Conflict",
				fmt.Sprintf("zone tokens are issued by the global control plane (--mode global); this one runs in %s mode", s.opts.Admission.Mode())))
			return
		}
		if s.opts.SyncPin != nil {
			pin, err := s.opts.SyncPin()
			if err != nil {
				s.log.Error("cannot read the sync certificate's pin", "err", err)
				writeError(w, newError(http.StatusServiceUnavailable, "Service unavailable", "the global cannot read its sync certificate: "+err.Error()))
				return
			}
			c.SyncPin = pin
		} else {
			w.Header().Add("Warning", `299 - "the global has no sync certificate yet; the token carries no pin, so the zone needs --global-ca-file to verify the global"`)
		}
	}
	id := caller(r.Context())
	c.ID = token.NewID()
	verb := api.VerbIssueToken
	e := auditEntry(r.Context(), verb, c.ID, tokenSummary(c), http.StatusCreated)
	raw, signed, err := s.opts.Keys.Issue(r.Context(), c, id.Subject, audit.Op(e, 0))
	if err != nil && raw == "" {
		s.log.Error("cannot issue a token", "err", err)
		writeError(w, fromError(err))
		return
	}
	if err != nil {
		s.log.Error("the token was issued but its audit entry was not written", "err", err, "token", signed.ID)
	} else {
		markAudited(r.Context(), e)
	}
	writeJSON(w, http.StatusCreated, api.TokenResponse{Token: raw, Info: api.TokenInfo{
		ID: signed.ID, Subject: signed.Subject, Role: string(signed.Role), Meshes: signed.Meshes, Zone: signed.Zone,
		IssuedAt: signed.IssuedAt, ExpiresAt: signed.ExpiresAt, IssuedBy: id.Subject, KeyID: s.opts.Keys.CurrentKey(),
	}})
}

func tokenSummary(c token.Claims) string {
	s := fmt.Sprintf("for %s (%s", c.Subject, c.Role)
	if len(c.Meshes) > 0 {
		s += ", meshes " + strings.Join(c.Meshes, ",")
	}
	return s + "), expires " + c.ExpiresAt.Format(time.RFC3339)
}

// tokenClaims checks a token request, every problem with its field, and
// returns the claims to sign.
func (s *Server) tokenClaims(req api.TokenRequest, kind tokenKind) (token.Claims, validate.Errors) {
	var errs validate.Errors
	c := token.Claims{IssuedAt: time.Now()}
	validity := DefaultUserTokenValidity
	switch kind {
	case dataplaneToken:
		validity = DefaultDataplaneTokenValidity
		errs.Check("mesh", validate.DNS1123Subdomain(req.Mesh))
		errs.Check("name", validate.DNS1123Subdomain(req.Name))
		for _, f := range []struct{ name, v string }{{"role", req.Role}, {"zone", req.Zone}} {
			if f.v != "" {
				errs.Addf(validate.Path(f.name), "must be empty for a dataplane token")
			}
		}
		if len(req.Meshes) > 0 {
			errs.Add("meshes", "must be empty for a dataplane token: mesh names its one mesh")
		}
		c.Subject, c.Role, c.Meshes = req.Name, token.RoleDataplane, []string{req.Mesh}
	case ingressToken:
		validity = DefaultDataplaneTokenValidity
		errs.Check("name", validate.DNS1123Subdomain(req.Name))
		for _, f := range []struct{ name, v string }{{"role", req.Role}, {"zone", req.Zone}, {"mesh", req.Mesh}} {
			if f.v != "" {
				errs.Addf(validate.Path(f.name), "must be empty for an ingress token")
			}
		}
		if len(req.Meshes) > 0 {
			errs.Add("meshes", "must be empty for an ingress token: a ZoneIngress serves every mesh")
		}
		c.Subject, c.Role = req.Name, token.RoleIngress
	case zoneToken:
		validity = DefaultZoneTokenValidity
		errs.Check("zone", validate.DNS1123Label(req.Zone))
		for _, f := range []struct{ name, v string }{{"name", req.Name}, {"role", req.Role}} {
			if f.v != "" {
				errs.Addf(validate.Path(f.name), "must be empty for a zone token")
			}
		}
		if len(req.Meshes) > 0 {
			errs.Add("meshes", "must be empty for a zone token: a zone syncs every mesh")
		}
		c.Subject, c.Role, c.Zone = "zone/"+req.Zone, token.RoleZone, req.Zone
	default:
		switch {
		case req.Name == "":
			errs.Add("name", "must name who holds the token, such as alice")
		case len(req.Name) > validate.MaxSubdomainLength || strings.ContainsFunc(req.Name, func(r rune) bool { return !unicode.IsPrint(r) }):
			errs.Addf("name", "must be 1 to %d printable characters", validate.MaxSubdomainLength)
		}
		role := token.Role(req.Role)
		if !slices.Contains(token.UserRoles(), role) {
			var names []string
			for _, r := range token.UserRoles() {
				names = append(names, string(r))
			}
			errs.Addf("role", "must be one of %s, got %q (zone tokens: POST /tokens/zone)", strings.Join(names, ", "), req.Role)
		}
		if req.Zone != "" {
			errs.Add("zone", "must be empty for a user token (zone tokens: POST /tokens/zone)")
		}
		c.Subject, c.Role, c.Meshes = req.Name, role, req.Meshes
	}
	if req.ValidFor != "" {
		d, err := time.ParseDuration(req.ValidFor)
		switch {
		case err != nil:
			errs.Addf("validFor", "must be a duration such as \"24h\", got %q", req.ValidFor)
		case d <= 0 || d > token.MaxValidity:
			errs.Addf("validFor", "must be positive and at most %s, got %s", token.MaxValidity, d)
		default:
			validity = d
		}
	}
	c.ExpiresAt = c.IssuedAt.Add(validity)
	if len(errs) == 0 {
		c.ID = "check" // Validate wants an ID; Issue gives the real one
		for _, v := range c.Validate() {
			field := v.Field
			if field == "subject" {
				field = "name"
			}
			errs.Add(validate.Path(field), v.Message)
		}
	}
	return c, errs
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) {
	list, err := s.opts.Keys.List(r.Context())
	if err != nil {
		writeError(w, s.writeFailed(err))
		return
	}
	writeJSON(w, http.StatusOK, api.TokenList{Items: list}) // List never returns nil
}

func (s *Server) getToken(w http.ResponseWriter, r *http.Request, id string) {
	list, err := s.opts.Keys.List(r.Context())
	if err != nil {
		writeError(w, s.writeFailed(err))
		return
	}
	for _, i := range list {
		if i.ID == id {
			writeJSON(w, http.StatusOK, i)
			return
		}
	}
	writeError(w, newError(http.StatusNotFound, "Not found", "no token "+id+" was issued here (or it expired more than a day ago)"))
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request, id string) {
	e := auditEntry(r.Context(), api.VerbRevokeToken, id, "", http.StatusOK)
	if cur, err := s.opts.Keys.Lookup(r.Context(), id); err == nil {
		e.Reason = "for " + cur.Subject + " (" + cur.Role + ")"
		if !cur.RevokedAt.IsZero() {
			e.Reason += ", already revoked"
		}
	}
	rec, err := s.opts.Keys.Revoke(r.Context(), id, caller(r.Context()).Subject, time.Now(), audit.Op(e, 0))
	switch {
	case errors.Is(err, token.ErrNotIssued):
		writeError(w, newError(http.StatusNotFound, "Not found", "no token "+id+" was issued here (or it expired more than a day ago)"))
		return
	case err != nil && rec.ID == "":
		writeError(w, s.writeFailed(err))
		return
	case err != nil:
		s.log.Error("the token was revoked but its audit entry was not written", "err", err, "token", id)
	default:
		markAudited(r.Context(), e)
	}
	writeJSON(w, http.StatusOK, rec)
}

func (s *Server) rotateKey(w http.ResponseWriter, r *http.Request) {
	kid, err := s.opts.Keys.Rotate(r.Context())
	if err != nil {
		writeError(w, s.writeFailed(err))
		return
	}
	e := auditEntry(r.Context(), api.VerbRotateKey, kid, "signing key "+kid+" signs from now on", http.StatusOK)
	if err := audit.Append(r.Context(), s.opts.Store, e); err != nil {
		s.log.Error("cannot write an audit entry", "err", err)
	} else {
		markAudited(r.Context(), e)
	}
	writeJSON(w, http.StatusOK, api.KeyRotation{KeyID: kid})
}

// parseSince reads a since/until parameter: RFC 3339, or a duration
// before now ("1h").
func parseSince(v string, now time.Time) (time.Time, bool) {
	if v == "" {
		return time.Time{}, true
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, true
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), true
	}
	return time.Time{}, false
}

// auditLog answers GET /audit.
func (s *Server) auditLog(w http.ResponseWriter, r *http.Request) {
	if s.recorder == nil {
		writeError(w, newError(http.StatusNotFound, "Not found", "this control plane's store keeps no audit log"))
		return
	}
	v := r.URL.Query()
	var errs validate.Errors
	q := audit.Query{Mesh: v.Get("mesh"), Name: v.Get("name"), Subject: v.Get("subject"), Limit: 100}
	if k := v.Get("kind"); k != "" {
		if d := byKindOrPlural(k); d != nil {
			q.Kind = d.Kind
		} else {
			errs.Addf("kind", "unknown kind %q", k)
		}
	}
	now := time.Now()
	var ok bool
	if q.Since, ok = parseSince(v.Get("since"), now); !ok {
		errs.Addf("since", "must be an RFC 3339 time or a duration before now such as 1h, got %q", v.Get("since"))
	}
	if q.Until, ok = parseSince(v.Get("until"), now); !ok {
		errs.Addf("until", "must be an RFC 3339 time or a duration before now such as 1h, got %q", v.Get("until"))
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > store.MaxRecordLimit {
			errs.Addf("limit", "must be an integer from 1 to %d, got %q", store.MaxRecordLimit, l)
		} else {
			q.Limit = n
		}
	}
	if b := v.Get("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n < 1 {
			errs.Addf("before", "must be the seq of an entry, got %q", b)
		} else {
			q.Before = n
		}
	}
	if len(errs) > 0 {
		writeError(w, &Error{Status: http.StatusBadRequest, Title: "Invalid query", Causes: errs})
		return
	}
	entries, err := audit.Find(r.Context(), s.recorder, q)
	if err != nil {
		writeError(w, s.writeFailed(err))
		return
	}
	page := api.AuditPage{Items: entries}
	if page.Items == nil {
		page.Items = []api.AuditEntry{}
	}
	if len(entries) == q.Limit {
		next := r.URL.Query()
		next.Set("before", strconv.FormatInt(entries[len(entries)-1].Seq, 10))
		page.Next = (&url.URL{Path: r.URL.Path, RawQuery: next.Encode()}).String()
	}
	writeJSON(w, http.StatusOK, page)
}

func byKindOrPlural(k string) *resource.Descriptor {
	for _, d := range resource.Descriptors() {
		if strings.EqualFold(k, string(d.Kind)) || k == d.Plural || k == d.ShortName {
			return d
		}
	}
	return nil
}

// history answers GET /history?vip=IP or ?hostname=NAME. A token limited
// to meshes sees the events of its meshes only.
func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	if s.recorder == nil {
		writeError(w, newError(http.StatusNotFound, "Not found", "this control plane's store keeps no history"))
		return
	}
	v := r.URL.Query()
	q := history.Query{VIP: v.Get("vip"), Hostname: v.Get("hostname")}
	var errs validate.Errors
	if (q.VIP == "") == (q.Hostname == "") {
		errs.Add("vip", "give exactly one of vip=IP and hostname=NAME")
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n >= store.MaxRecordLimit {
			errs.Addf("limit", "must be an integer from 1 to %d, got %q", store.MaxRecordLimit-1, l)
		} else {
			q.Limit = n
		}
	}
	var ok bool
	if q.Since, ok = parseSince(v.Get("since"), time.Now()); !ok {
		errs.Addf("since", "must be an RFC 3339 time or a duration before now such as 24h, got %q", v.Get("since"))
	}
	if len(errs) > 0 {
		writeError(w, &Error{Status: http.StatusBadRequest, Title: "Invalid query", Causes: errs})
		return
	}
	report, err := HistoryReport(r.Context(), s.recorder, q, caller(r.Context()).AllowsMesh)
	if err != nil {
		writeError(w, s.writeFailed(err))
		return
	}
	writeJSON(w, http.StatusOK, report)
}

// HistoryReport is the body of GET /history (the GUI shows the same): who
// held q's VIP or hostname from when to when, among the events of the
// meshes allowed.
func HistoryReport(ctx context.Context, rec store.Recorder, q history.Query, allowed func(mesh string) bool) (api.HistoryReport, error) {
	events, truncated, err := history.Find(ctx, rec, q)
	if err != nil {
		return api.HistoryReport{}, err
	}
	visible := events[:0]
	for _, e := range events {
		if allowed(e.Mesh) {
			visible = append(visible, e)
		}
	}
	report := api.HistoryReport{VIP: q.VIP, Hostname: q.Hostname, Holders: history.Holdings(visible), Events: visible, Truncated: truncated}
	if report.Events == nil {
		report.Events = []api.HistoryEvent{}
	}
	return report, nil
}
