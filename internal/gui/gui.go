// Package gui serves meshnames' web GUI at /gui/ on the API port: pages
// rendered on the server with html/template from the same cache the REST
// API reads and from the API's own bodies (the _hostnames and _dns
// inspections, the leader status), plain CSS, and htmx (vendored under
// static/, see static/NOTICE.md) for navigation, search as you type and
// live updates. It is read-only.
//
// Pages: the overview (/gui/), the services (/gui/services, with ?kind=,
// ?mesh=, ?q= and ?page=), one service (/gui/services/{kind}/{mesh}/{name}),
// the HostnameGenerators (/gui/generators), DNS (/gui/dns), "who is this?"
// (/gui/search?q=), the zones (/gui/zones: on a global each zone's sync
// stream, from the same insight GET /zones/{name}/_insight answers; on a
// zone its own stream to the global), the Dataplanes (/gui/dataplanes) and
// one Dataplane (/gui/dataplanes/{mesh}/{name}: its proxy's ADS streams on
// this instance and config, from the same inspection GET .../_xds
// answers). A page stays current without a reload: its script long-polls
// /gui/_wait, which answers once the cache's revision passes the page's,
// and then fetches the page again; the pages with zone insights or a
// proxy's streams, which change without a revision, are also fetched
// every few seconds.
//
// Searching by hostname or VIP uses the DNS server's table, and an index
// of the few services the table does not show whole (index.go): those with
// names not available, and those without VIPs.
//
// It imports api, resource, cache and store only; the functions of Options
// give it what other parts compute (inspections, the DNS table, pools,
// leadership). Handlers are safe for concurrent use; Run keeps the index
// current.
package gui

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

//go:embed templates static
var files embed.FS

// Prefix is the path the GUI is served under.
const Prefix = "/gui/"

// PageSize is how many services a page of the services list shows.
const PageSize = 50

// waitMax bounds one long poll of /gui/_wait.
const waitMax = 25 * time.Second

// Options configures a Server. Cache is required; a nil function leaves
// its part of the GUI out.
type Options struct {
	Cache *cache.Cache
	// Store gives the overview's recent changes (its change feed).
	Store   store.Store
	Mode    string
	Zone    string
	Version string
	Log     *slog.Logger
	// Hostnames is the body of GET /meshes/{mesh}/{kind}/{name}/_hostnames.
	Hostnames func(k resource.Key) (api.HostnamesReport, error)
	// DNS is the body of GET /meshes/{mesh}/_dns; its names may be left
	// out (DNSNames pages them), the GUI shows its names not answered.
	DNS func(mesh string) (api.DNSListing, error)
	// DNSNames returns the names [offset, offset+limit) of the _dns
	// listing of mesh, in its order, among those whose name, service or
	// addresses contain q, and how many there are.
	DNSNames func(mesh, q string, offset, limit int) ([]api.DNSName, int)
	// ServiceDNS lists the names the DNS server answers for one service,
	// and those of its names it does not answer, with the reason.
	ServiceDNS func(k resource.Key) api.DNSListing
	// Lookup returns the DNS server's records of a name in every mesh;
	// LookupAddr those of the name a VIP points to (PTR).
	Lookup     func(name string) []DNSMatch
	LookupAddr func(ip netip.Addr) []DNSMatch
	// MatchDNS calls fn with each service that has a DNS name, or an
	// address, containing word (lower case).
	MatchDNS func(word string, fn func(resource.Key))
	// History is the body of GET /history?vip= or ?hostname= (give one):
	// who held the value from when to when.
	History func(ctx context.Context, vip, hostname string) (api.HistoryReport, error)
	// Leader is the body of GET /_leader.
	Leader func(ctx context.Context) (api.LeaderStatus, error)
	// Pools reports the VIP pools' usage; VIP tells whether an address is
	// allocated or in quarantine.
	Pools func(ctx context.Context) ([]Pool, error)
	VIP   func(ctx context.Context, ip netip.Addr) (VIPState, error)
	// ZoneInsight is the body of GET /zones/{name}/_insight, set on a
	// global control plane: the state of a zone's sync stream.
	ZoneInsight func(ctx context.Context, zone string) (api.ZoneInsight, error)
	// GlobalLink, set on a zone control plane, reports its own stream to
	// the global.
	GlobalLink func() GlobalLink
	// XDS is the body of GET /meshes/{mesh}/dataplanes/{name}/_xds: what
	// the proxy of a Dataplane gets and its ADS streams on this instance;
	// nil where no xDS is served (a global, or xds.addr empty).
	XDS func(mesh, name string) (api.XDSInspection, error)
	// XDSStreams returns the streams of a Dataplane's proxy on this
	// instance, as XDS does, without its config (for the Dataplanes list).
	XDSStreams func(mesh, name string) []api.XDSStream
	// Now is the clock of the "ago" figures (time.Now when nil).
	Now func() time.Time
}

// GlobalLink is a zone control plane's stream to its global, as this
// instance sees it.
type GlobalLink struct {
	// Address is the global's sync address.
	Address string
	// Leading is false on an instance that does not lead its zone: only
	// the leader runs the stream, so Insight says nothing there.
	Leading bool
	// Insight is the stream from the zone's side: Sent is the zone's feed
	// sent to the global (Acked: stored by it), Received the global's feed
	// stored here, Instance the global instance, Version this zone's
	// version, Refused the global's resources this zone refused.
	Insight api.ZoneInsight
}

// DNSMatch is one mesh's records of a name (dnsserver.Inspector).
type DNSMatch = api.DNSMatch

// Pool is the usage of one VIP pool (vips.Usage).
type Pool = api.VIPPool

// VIPState is what the VIP pools know of one address (vips.Usage).
type VIPState = api.VIPState

// Server serves the GUI.
type Server struct {
	o     Options
	log   *slog.Logger
	ix    *index
	pages map[string]*template.Template
	files http.Handler
}

// New returns a Server; it does no I/O.
func New(o Options) *Server {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	static, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // embedded at build time
	}
	return &Server{
		o:     o,
		log:   o.Log,
		ix:    newIndex(o.Cache),
		pages: parsePages(),
		files: http.StripPrefix(Prefix+"static/", http.FileServerFS(static)),
	}
}

// Run builds the index and keeps it current until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	s.ix.run(ctx)
	return nil
}

// Handler returns the handler of every path under Prefix.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serve) }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the GUI is read-only: use GET", http.StatusMethodNotAllowed)
		return
	}
	if strings.HasPrefix(rest, "static/") {
		w.Header().Set("Cache-Control", "no-cache") // revalidated: a new binary may bring new files
		s.files.ServeHTTP(w, r)
		return
	}
	if rest == "_wait" {
		s.wait(w, r)
		return
	}
	if !s.loaded(r.Context()) {
		w.Header().Set("Retry-After", "1")
		s.render(w, r, http.StatusServiceUnavailable, "error.html", &page{Title: "Loading", Data: errorData{
			Message: "The control plane is still loading its store. This page reloads itself shortly."}})
		return
	}
	seg := strings.Split(strings.TrimSuffix(rest, "/"), "/")
	switch {
	case rest == "":
		s.overview(w, r)
	case seg[0] == "services" && len(seg) == 1:
		s.services(w, r)
	case seg[0] == "services" && len(seg) == 4:
		s.service(w, r, seg[1], seg[2], seg[3])
	case rest == "generators":
		s.generators(w, r)
	case rest == "dns":
		s.dns(w, r)
	case rest == "search":
		s.search(w, r)
	case rest == "zones":
		s.zones(w, r)
	case rest == "zoneingresses":
		s.zoneIngresses(w, r)
	case seg[0] == "dataplanes" && len(seg) == 1:
		s.dataplanes(w, r)
	case seg[0] == "dataplanes" && len(seg) == 3:
		s.dataplane(w, r, seg[1], seg[2])
	default:
		s.notFound(w, r, "There is no page at "+r.URL.Path+".")
	}
}

// loaded waits a little for the cache's first load.
func (s *Server) loaded(ctx context.Context) bool {
	if synced, _ := s.o.Cache.Status(); synced {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return s.o.Cache.WaitSynced(ctx)
}

// wait answers GET /gui/_wait?rev=N once the cache reflects a revision
// after N, or after waitMax, with the cache's revision.
func (s *Server) wait(w http.ResponseWriter, r *http.Request) {
	rev, err := strconv.ParseInt(r.URL.Query().Get("rev"), 10, 64)
	if err != nil || rev < 0 {
		http.Error(w, "rev: must be a revision, a non-negative integer", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), waitMax)
	defer cancel()
	_ = s.o.Cache.WaitFor(ctx, rev+1) // a timeout answers the same revision
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	fmt.Fprintf(w, "{\"revision\":%d}\n", s.o.Cache.Revision())
}

// page is what the layout renders around a page's content.
type page struct {
	Title string
	// Nav names the menu entry of the page.
	Nav      string
	Mode     string
	Zone     string
	Version  string
	Revision int64
	// Live is false for pages that must not refresh themselves (errors).
	Live bool
	// Every, when set, has the page fetched again every so many seconds,
	// for figures that change without a store revision (zone insights).
	Every int
	Data  any
}

type errorData struct {
	Message string
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, p *page) {
	p.Mode, p.Zone, p.Version = s.o.Mode, s.o.Zone, s.o.Version
	if p.Mode == resource.ModeGlobal {
		p.Zone = "" // a global is no zone, whatever its zone setting says
	}
	var b bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&b, "layout", p); err != nil {
		s.log.Error("rendering a GUI page", "page", name, "err", err)
		http.Error(w, "cannot render the page; see the control plane's log", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	h.Set("Referrer-Policy", "same-origin")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b.Bytes())
	}
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request, msg string) {
	s.render(w, r, http.StatusNotFound, "error.html", &page{Title: "Not found", Data: errorData{Message: msg}})
}

func (s *Server) badRequest(w http.ResponseWriter, r *http.Request, msg string) {
	s.render(w, r, http.StatusBadRequest, "error.html", &page{Title: "Bad request", Data: errorData{Message: msg}})
}

// TokenPrompt answers a browser's request for a GUI page that the API's
// authentication refused, with status (401: no valid token; 403: a token
// that may not see it) and the reason: a page that asks for a token, keeps
// it in the tab's sessionStorage and loads the page again with it
// (Authorization: Bearer). Its script and style are public.
func TokenPrompt(w http.ResponseWriter, r *http.Request, status int, reason string) {
	var b bytes.Buffer
	p := &page{Title: "Token required", Data: errorData{Message: reason}}
	if err := promptPage.ExecuteTemplate(&b, "layout", p); err != nil {
		http.Error(w, reason, status)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

var promptPage = parsePage("prompt.html")
