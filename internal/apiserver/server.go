// Package apiserver serves meshnames' REST API: Kuma-compatible resource
// paths (GET, PUT and DELETE on /meshes/{mesh}/{collection}/{name},
// /meshes/{name}, /hostnamegenerators/{name}, /zones/{name}, and paginated
// lists), health and readiness probes and Prometheus metrics. It mounts
// the web GUI (Options.GUI) at /gui/ and sends browsers from / there.
//
// Reads are served from the cache; writes go through the admission layer
// (internal/admission: defaults, validation with every violation at once,
// the rules of the mode, the system labels), which writes them to the store
// with optimistic versions, and return once the cache reflects them, so a
// client reads its own writes. errors.go holds the one mapping from store
// and admission errors to statuses.
//
// Security (docs/security.md): guard.go runs every request but the public
// ones through auth (401, 403, 429) and audits every write, in the same
// transaction as the write when there is one; tokens.go serves /tokens,
// /audit and /history.
//
// It imports admission, api, auth, audit, history, token, resource, store,
// cache, hostname and validate; nothing imports it but server. Handlers are
// safe for concurrent use.
package apiserver

import (
	"context"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/auth"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/token"
)

// Limits bound what one request may ask of the server; past each it
// answers 413 naming the setting (config api.limits).
type Limits struct {
	// MaxBodyBytes bounds a request body (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// MaxApplyBytes and MaxApplyDocuments bound one POST /_apply
	// (defaults DefaultMaxApplyBytes, DefaultMaxApplyDocuments).
	MaxApplyBytes     int64
	MaxApplyDocuments int
}

// The defaults of Limits, those of config api.limits.
const (
	DefaultMaxBodyBytes      = 1 << 20
	DefaultMaxApplyBytes     = 64 << 20
	DefaultMaxApplyDocuments = 100_000
)

// Options configures a Server.
type Options struct {
	Cache *cache.Cache
	// Admission admits and makes every write; its mode and zone are the
	// control plane's.
	Admission *admission.Admitter
	Log       *slog.Logger
	// Registry receives the API's metrics and is served on /metrics.
	Registry *prometheus.Registry
	Version  string
	// Ready reports why the server is not ready, or nil.
	Ready func() error
	// Limits bound a request; zero fields take their defaults.
	Limits Limits
	// WriteWait bounds how long a write waits for the cache to reflect it.
	WriteWait time.Duration
	// DNS lists what this instance's DNS server answers in a mesh; nil
	// when it serves no DNS.
	DNS func(mesh string) api.DNSListing
	// ServiceTags, when set (where MeshServices are synthesised from
	// Dataplanes), reports a mesh's service tags for GET
	// /meshes/{mesh}/_servicetags: what the controller decided, as this
	// instance's cache shows it (meshservices.Reporter).
	ServiceTags func(mesh string) []api.ServiceTag
	// ZoneInsight, when set (on a global control plane), reports a zone's
	// sync stream for GET /zones/{name}/_insight.
	ZoneInsight func(ctx context.Context, zone string) (api.ZoneInsight, error)
	// Preview, when set, says what hostnames and VIPs services would gain
	// or lose if objs (admitted) were written, for dry runs.
	Preview func(ctx context.Context, objs []*resource.Object) ([]api.NameChange, error)
	// XDS, when set, inspects what the proxy of a Dataplane gets, for GET
	// /meshes/{mesh}/dataplanes/{name}/_xds, or with mesh "" of a
	// ZoneIngress of this zone, for GET /zoneingresses/{name}/_xds; it
	// fails with ErrNotFound for a proxy that is not there.
	XDS func(mesh, name string) (api.XDSInspection, error)
	// Leader, when set, reports the leadership for GET /_leader.
	Leader func(ctx context.Context) (api.LeaderStatus, error)
	// GUI, when set, serves the web GUI under /gui/; GET / then redirects
	// browsers (which accept text/html) there. GUIPrompt answers a
	// browser's request for a GUI page that Auth refuses (401 or 403) with
	// a page that asks for a token.
	GUI       http.Handler
	GUIPrompt func(w http.ResponseWriter, r *http.Request, status int, reason string)
	// Security (guard.go, tokens.go). Auth, when set, authenticates,
	// rate-limits and authorizes every request but the public ones, and
	// every write is audited; without it every request is allowed. The
	// Admission's store must be AuditingStore(Store) for the entry of a
	// write to commit with it; refusals are appended to Store, and /audit
	// and /history read it.
	Auth  *auth.Guard
	Store store.Store
	// NoBackup says why Store takes no backup (it is not a
	// store.Backuper) and what to use instead; GET /_backup answers it
	// with 501. Empty: a generic advice.
	NoBackup string
	// Keys serves the token endpoints; nil answers them 404.
	Keys *token.Keys
	// SyncPin, when set, gives the pin ("sha256:<hex>") of the global's
	// sync certificate that zone tokens carry.
	SyncPin func() (string, error)
}

// Server is the REST API.
type Server struct {
	opts Options
	// recorder is the record streams of Options.Store, nil when it keeps
	// none.
	recorder store.Recorder
	log      *slog.Logger
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	metrics  http.Handler
}

// New builds a Server; it does no I/O.
func New(o Options) *Server {
	if o.WriteWait == 0 {
		o.WriteWait = 5 * time.Second
	}
	if o.Ready == nil {
		o.Ready = func() error { return nil }
	}
	if o.Limits.MaxBodyBytes <= 0 {
		o.Limits.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.Limits.MaxApplyBytes <= 0 {
		o.Limits.MaxApplyBytes = DefaultMaxApplyBytes
	}
	if o.Limits.MaxApplyDocuments <= 0 {
		o.Limits.MaxApplyDocuments = DefaultMaxApplyDocuments
	}
	recorder, _ := o.Store.(store.Recorder)
	s := &Server{
		opts:     o,
		recorder: recorder,
		log:      o.Log,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshnames_api_requests_total", Help: "REST API requests by route, method and status code.",
		}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "meshnames_api_request_duration_seconds", Help: "REST API request latency by route and method.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"route", "method"}),
	}
	if o.Registry != nil {
		o.Registry.MustRegister(s.requests, s.latency)
		s.metrics = promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{})
	} else {
		s.metrics = http.NotFoundHandler()
	}
	return s
}

// Handler returns the HTTP handler of the API.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(s.serve)
}

// request is a parsed resource path.
type request struct {
	route string // bounded-cardinality template for metrics
	d     *resource.Descriptor
	mesh  string
	name  string // empty for lists
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
	route := s.guard(rec, r)
	d := time.Since(start)
	s.requests.WithLabelValues(route, r.Method, strconv.Itoa(rec.code)).Inc()
	s.latency.WithLabelValues(route, r.Method).Observe(d.Seconds())
	s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "code", rec.code, "dur", d)
}

// loadWait is how long a request waits for the cache's first load.
const loadWait = 10 * time.Second

// waitLoaded waits until the cache has loaded the store, at most loadWait.
func (s *Server) waitLoaded(ctx context.Context) bool {
	if synced, _ := s.opts.Cache.Status(); synced {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, loadWait)
	defer cancel()
	return s.opts.Cache.WaitSynced(ctx)
}

// dispatch routes the request and returns its route template.
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request) string {
	path := strings.Trim(r.URL.Path, "/")
	var seg []string
	if path != "" {
		seg = strings.Split(path, "/")
	}
	switch {
	case len(seg) == 0:
		if !allow(w, r, http.MethodGet) {
			return "/"
		}
		if s.opts.GUI != nil && acceptsHTML(r) {
			http.Redirect(w, r, "/gui/", http.StatusSeeOther)
			return "/"
		}
		s.index(w)
		return "/"
	case seg[0] == "gui" && s.opts.GUI != nil:
		s.opts.GUI.ServeHTTP(w, r)
		return "/gui"
	case len(seg) == 1 && seg[0] == "healthz":
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		return "/healthz"
	case len(seg) == 1 && seg[0] == "readyz":
		s.readyz(w)
		return "/readyz"
	case len(seg) == 1 && seg[0] == "metrics":
		s.metrics.ServeHTTP(w, r)
		return "/metrics"
	case len(seg) == 1 && seg[0] == "_leader":
		if allow(w, r, http.MethodGet) {
			s.leader(w, r)
		}
		return "/_leader"
	case len(seg) == 1 && seg[0] == "_backup":
		if allow(w, r, http.MethodGet) {
			s.backup(w, r)
		}
		return "/_backup"
	case seg[0] == "tokens" || (len(seg) == 1 && (seg[0] == "audit" || seg[0] == "history")):
		return s.security(w, r, seg)
	}
	// Everything below reads the cache: before it has loaded the store it
	// would answer that nothing exists (a mesh just created at start
	// included). Wait for it a little, then ask the client to come back.
	if !s.waitLoaded(r.Context()) {
		writeError(w, newError(http.StatusServiceUnavailable, "Service unavailable", "the server is still loading its store; retry shortly"))
		return "/loading"
	}
	if len(seg) == 1 && seg[0] == "_apply" {
		if allow(w, r, http.MethodPost) {
			s.apply(w, r)
		}
		return "/_apply"
	}
	if len(seg) == 3 && seg[0] == "meshes" && seg[2] == "_dns" {
		if allow(w, r, http.MethodGet) {
			s.dnsListing(w, seg[1])
		}
		return "/meshes/{mesh}/_dns"
	}
	if len(seg) == 3 && seg[0] == "meshes" && seg[2] == "_servicetags" {
		if allow(w, r, http.MethodGet) {
			s.serviceTags(w, seg[1])
		}
		return "/meshes/{mesh}/_servicetags"
	}
	if len(seg) == 3 && seg[0] == "zones" && seg[2] == "_insight" {
		if allow(w, r, http.MethodGet) {
			s.zoneInsight(w, r, seg[1])
		}
		return "/zones/{name}/_insight"
	}
	if len(seg) == 5 && seg[0] == "meshes" && seg[2] == "dataplanes" && seg[4] == "_xds" {
		if allow(w, r, http.MethodGet) {
			s.xdsInspection(w, seg[1], seg[3])
		}
		return "/meshes/{mesh}/dataplanes/{name}/_xds"
	}
	if len(seg) == 3 && seg[0] == "zoneingresses" && seg[2] == "_xds" {
		if allow(w, r, http.MethodGet) {
			s.xdsInspection(w, "", seg[1])
		}
		return "/zoneingresses/{name}/_xds"
	}
	if len(seg) == 5 && seg[4] == "_hostnames" {
		req, ok := parsePath(seg[:4])
		if !ok {
			writeError(w, newError(http.StatusNotFound, "Not found", "no such path: /"+path))
			return "unknown"
		}
		req.route += "/_hostnames"
		if allow(w, r, http.MethodGet) {
			s.hostnames(w, r, req)
		}
		return req.route
	}
	req, ok := parsePath(seg)
	if !ok {
		writeError(w, newError(http.StatusNotFound, "Not found", "no such path: /"+path))
		return "unknown"
	}
	if req.name == "" {
		if allow(w, r, http.MethodGet) {
			s.list(w, r, req)
		}
		return req.route
	}
	switch r.Method {
	case http.MethodGet:
		s.get(w, r, req)
	case http.MethodPut:
		s.put(w, r, req)
	case http.MethodDelete:
		s.delete(w, r, req)
	default:
		w.Header().Set("Allow", "GET, PUT, DELETE")
		writeError(w, newError(http.StatusMethodNotAllowed, "Method not allowed", r.Method+" is not supported here; use GET, PUT or DELETE"))
	}
	return req.route
}

func allow(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method {
		return true
	}
	w.Header().Set("Allow", method)
	writeError(w, newError(http.StatusMethodNotAllowed, "Method not allowed", r.Method+" is not supported here; use "+method))
	return false
}

// parsePath maps path segments to a kind, mesh and name.
func parsePath(seg []string) (request, bool) {
	switch len(seg) {
	case 1, 2:
		d := byPlural(seg[0])
		if d == nil {
			return request{}, false
		}
		if len(seg) == 1 {
			// A mesh-scoped kind's collection at the top lists every
			// mesh (Kuma's cross-mesh lists).
			return request{route: "/" + d.Plural, d: d}, true
		}
		if d.MeshScoped {
			return request{}, false
		}
		return request{route: "/" + d.Plural + "/{name}", d: d, name: seg[1]}, true
	case 3, 4:
		if seg[0] != "meshes" {
			return request{}, false
		}
		d := byPlural(seg[2])
		if d == nil || !d.MeshScoped {
			return request{}, false
		}
		if len(seg) == 3 {
			return request{route: "/meshes/{mesh}/" + d.Plural, d: d, mesh: seg[1]}, true
		}
		return request{route: "/meshes/{mesh}/" + d.Plural + "/{name}", d: d, mesh: seg[1], name: seg[3]}, true
	}
	return request{}, false
}

func byPlural(p string) *resource.Descriptor {
	for _, d := range resource.Descriptors() {
		if d.Plural == p {
			return d
		}
	}
	return nil
}

// acceptsHTML tells a browser's navigation (Accept: text/html, ...) from
// an API client, which asks for JSON or anything (curl's */*).
func acceptsHTML(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			if mt, _, _ := mime.ParseMediaType(strings.TrimSpace(part)); mt == "text/html" {
				return true
			}
		}
	}
	return false
}

func (s *Server) index(w http.ResponseWriter) {
	writeJSON(w, http.StatusOK, api.Info{Product: "meshnames", Version: s.opts.Version, Mode: s.opts.Admission.Mode(), Zone: s.opts.Admission.Zone()})
}

func (s *Server) readyz(w http.ResponseWriter) {
	if err := s.opts.Ready(); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// waitCache waits until the cache reflects rev, so that the client reads its
// own write. A timeout is not an error: the write is durable either way.
func (s *Server) waitCache(ctx context.Context, rev int64) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.WriteWait)
	defer cancel()
	if err := s.opts.Cache.WaitFor(ctx, rev); err != nil && ctx.Err() != nil {
		s.log.Warn("write acknowledged before the cache caught up", "revision", rev, "err", err)
	}
}
