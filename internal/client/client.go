// Package client is the Go client of the meshnames REST API, used by the
// command line and by tests. It speaks JSON and turns error responses into
// *APIError values that keep the server's field-level causes.
//
// It imports api, resource and validate only (not apiserver: the bodies of
// the API's own endpoints are the api package's types, shared with the
// server). A Client is safe for concurrent use.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/validate"
)

// DefaultServer is the address `meshnames serve` listens on by default.
const DefaultServer = "http://127.0.0.1:5681"

// Client talks to one meshnames server.
type Client struct {
	base  *url.URL
	http  *http.Client
	token string
	// maxWait bounds how long a request waits, in all, for the Retry-After
	// of 429 answers before it gives up.
	maxWait time.Duration
}

// Option configures New.
type Option func(*options)

type options struct {
	token  string
	caPEM  []byte
	noWait bool
}

// WithToken makes the client send Authorization: Bearer token.
func WithToken(token string) Option { return func(o *options) { o.token = token } }

// WithCA makes the client trust the PEM certificates in pem (besides the
// system's) for an https:// server.
func WithCA(pem []byte) Option { return func(o *options) { o.caPEM = pem } }

// WithoutRetry makes a 429 answer an error at once instead of a wait for
// its Retry-After.
func WithoutRetry() Option { return func(o *options) { o.noWait = true } }

// New returns a client for the server at base (http://host:port or
// https://host:port).
func New(base string, opts ...Option) (*Client, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("invalid server address %q: want a URL such as %s", base, DefaultServer)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	// Keep enough idle connections for the concurrency apply uses; the
	// default of 2 per host makes concurrent requests dial anew each time.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	if len(o.caPEM) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(o.caPEM) {
			return nil, fmt.Errorf("the CA file holds no PEM certificate")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	c := &Client{base: u, http: &http.Client{Timeout: 60 * time.Second, Transport: tr}, token: o.token, maxWait: time.Minute}
	if o.noWait {
		c.maxWait = 0
	}
	return c, nil
}

// Server returns the server address.
func (c *Client) Server() string { return c.base.String() }

// APIError is an error response from the server.
type APIError struct {
	Status int                  `json:"status"`
	Title  string               `json:"title"`
	Detail string               `json:"detail"`
	Causes []validate.Violation `json:"causes"`
}

func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString(e.Title)
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	for _, c := range e.Causes {
		fmt.Fprintf(&b, "\n  %s: %s", c.Field, c.Message)
	}
	return b.String()
}

// IsUnauthorized reports whether err is a 401 from the server: no token,
// or one it does not accept.
func IsUnauthorized(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Status == http.StatusUnauthorized
}

// IsNotFound reports whether err is a 404 from the server.
func IsNotFound(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// UnreachableError means no server answered at the address.
type UnreachableError struct {
	Server string
	Err    error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the meshnames server at %s: %v\n(is `meshnames serve` running there? point the client elsewhere with --server URL or MESHNAMES_SERVER)", e.Server, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

func (c *Client) path(d *resource.Descriptor, mesh, name string) string {
	var p string
	if d.MeshScoped {
		p = "/meshes/" + url.PathEscape(mesh) + "/" + d.Plural
	} else {
		p = "/" + d.Plural
	}
	if name != "" {
		p += "/" + url.PathEscape(name)
	}
	return p
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request; a 429 answer is retried after its Retry-After while
// the waits add up to less than maxWait.
func (c *Client) do(ctx context.Context, method, pathAndQuery string, body []byte, header http.Header) (*response, error) {
	waited := time.Duration(0)
	for {
		r, err := c.once(ctx, method, pathAndQuery, body, header)
		if r == nil || r.status != http.StatusTooManyRequests {
			return r, err
		}
		wait := time.Second
		if s, perr := strconv.Atoi(r.header.Get("Retry-After")); perr == nil && s > 0 {
			wait = time.Duration(s) * time.Second
		}
		if waited+wait > c.maxWait {
			return r, err
		}
		waited += wait
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return r, err
		case <-t.C:
		}
	}
}

func (c *Client) once(ctx context.Context, method, pathAndQuery string, body []byte, header http.Header) (*response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	resp, err := c.send(ctx, c.http, method, pathAndQuery, rd, header)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("read response from %s: %w", c.Server(), err)
	}
	r := &response{status: resp.StatusCode, header: resp.Header, body: b}
	if resp.StatusCode >= 400 {
		return r, apiError(resp.StatusCode, b)
	}
	return r, nil
}

// send sends a request with the client's token through hc, and returns
// the response for the caller to read and close.
func (c *Client) send(ctx context.Context, hc *http.Client, method, pathAndQuery string, body io.Reader, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+pathAndQuery, body)
	if err != nil {
		return nil, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		var ne net.Error
		var oe *net.OpError
		if errors.As(err, &oe) || (errors.As(err, &ne) && !ne.Timeout()) {
			return nil, &UnreachableError{Server: c.Server(), Err: err}
		}
		return nil, err
	}
	return resp, nil
}

// apiError is the error of an answer with status >= 400 and body b.
func apiError(status int, b []byte) *APIError {
	e := &APIError{Status: status}
	if json.Unmarshal(b, e) != nil || e.Title == "" {
		e.Title = http.StatusText(status)
		e.Detail = strings.TrimSpace(string(b))
	}
	e.Status = status
	return e
}

// Info returns the server's version, mode and zone.
func (c *Client) Info(ctx context.Context) (*api.Info, error) {
	r, err := c.do(ctx, http.MethodGet, "/", nil, nil)
	if err != nil {
		return nil, err
	}
	var i api.Info
	if err := json.Unmarshal(r.body, &i); err != nil {
		return nil, fmt.Errorf("decode server info: %w", err)
	}
	return &i, nil
}

// Get returns one resource.
func (c *Client) Get(ctx context.Context, d *resource.Descriptor, mesh, name string) (*resource.Object, error) {
	r, err := c.do(ctx, http.MethodGet, c.path(d, mesh, name), nil, nil)
	if err != nil {
		return nil, err
	}
	return decodeObject(r.body)
}

func decodeObject(b []byte) (*resource.Object, error) {
	var o resource.Object
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, fmt.Errorf("decode resource: %w", err)
	}
	return &o, nil
}

// ListOptions selects a page of a list.
type ListOptions struct {
	Labels map[string]string
	Offset int
	Size   int
}

// Page is one page of a list.
type Page struct {
	Total int
	Items []*resource.Object
	Next  string
}

// List returns one page of resources of kind d in mesh.
func (c *Client) List(ctx context.Context, d *resource.Descriptor, mesh string, o ListOptions) (*Page, error) {
	q := url.Values{}
	if o.Size > 0 {
		q.Set("size", strconv.Itoa(o.Size))
	}
	if o.Offset > 0 {
		q.Set("offset", strconv.Itoa(o.Offset))
	}
	for k, v := range o.Labels {
		q.Set("filter[labels."+k+"]", v)
	}
	p := c.path(d, mesh, "")
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	r, err := c.do(ctx, http.MethodGet, p, nil, nil)
	if err != nil {
		return nil, err
	}
	var page struct {
		Total int               `json:"total"`
		Items []json.RawMessage `json:"items"`
		Next  *string           `json:"next"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil {
		return nil, fmt.Errorf("decode list: %w", err)
	}
	out := &Page{Total: page.Total}
	if page.Next != nil {
		out.Next = *page.Next
	}
	for _, raw := range page.Items {
		o, err := decodeObject(raw)
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, o)
	}
	return out, nil
}

// ListAll follows the pages of a list to its end.
func (c *Client) ListAll(ctx context.Context, d *resource.Descriptor, mesh string, labels map[string]string) ([]*resource.Object, error) {
	var all []*resource.Object
	o := ListOptions{Labels: labels, Size: 1000}
	for {
		p, err := c.List(ctx, d, mesh, o)
		if err != nil {
			return nil, err
		}
		all = append(all, p.Items...)
		if p.Next == "" || len(p.Items) == 0 {
			return all, nil
		}
		o.Offset += len(p.Items)
	}
}

// PutResult says what a PUT did.
type PutResult struct {
	// Object is the stored resource; nil with PutOptions.Minimal.
	Object *resource.Object
	// Result is created, updated or unchanged.
	Result   string
	Version  int64
	Warnings []string
}

// PutOptions tunes Put.
type PutOptions struct {
	// IfMatch, when not 0, makes the write conditional on the stored version.
	IfMatch int64
	// Minimal asks the server not to send the stored object back
	// (Prefer: return=minimal), for callers that only need the outcome.
	Minimal bool
}

// Put creates or updates obj.
func (c *Client) Put(ctx context.Context, obj *resource.Object, o PutOptions) (*PutResult, error) {
	d, ok := resource.Lookup(obj.Kind)
	if !ok {
		return nil, fmt.Errorf("unknown kind %q", obj.Kind)
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	h := http.Header{"Content-Type": {"application/json"}}
	if o.IfMatch != 0 {
		h.Set("If-Match", strconv.Quote(strconv.FormatInt(o.IfMatch, 10)))
	}
	if o.Minimal {
		h.Set("Prefer", "return=minimal")
	}
	r, err := c.do(ctx, http.MethodPut, c.path(d, obj.Mesh, obj.Name), body, h)
	if err != nil {
		return nil, err
	}
	res := &PutResult{Result: r.header.Get("Meshnames-Result")}
	res.Version, _ = strconv.ParseInt(strings.Trim(r.header.Get("ETag"), `"`), 10, 64)
	if !o.Minimal || len(r.body) > 0 {
		if res.Object, err = decodeObject(r.body); err != nil {
			return nil, err
		}
	}
	for _, w := range r.header.Values("Warning") {
		res.Warnings = append(res.Warnings, parseWarning(w))
	}
	return res, nil
}

// parseWarning extracts the text of a `299 - "text"` Warning header.
func parseWarning(h string) string {
	if i := strings.IndexByte(h, '"'); i >= 0 {
		if s, err := strconv.Unquote(h[i:]); err == nil {
			return s
		}
	}
	return h
}

// Delete removes a resource.
func (c *Client) Delete(ctx context.Context, d *resource.Descriptor, mesh, name string) error {
	_, err := c.do(ctx, http.MethodDelete, c.path(d, mesh, name), nil, nil)
	return err
}

// Hostnames returns what every HostnameGenerator makes of one service.
func (c *Client) Hostnames(ctx context.Context, d *resource.Descriptor, mesh, name string) ([]api.HostnameOutcome, error) {
	r, err := c.do(ctx, http.MethodGet, c.path(d, mesh, name)+"/_hostnames", nil, nil)
	if err != nil {
		return nil, err
	}
	var report api.HostnamesReport
	if err := json.Unmarshal(r.body, &report); err != nil {
		return nil, fmt.Errorf("decode hostnames: %w", err)
	}
	return report.Items, nil
}

// XDS inspects what the proxy of a Dataplane gets from the xDS control
// plane, and its streams on the instance that answers.
func (c *Client) XDS(ctx context.Context, mesh, name string) (*api.XDSInspection, error) {
	return c.xds(ctx, "/meshes/"+url.PathEscape(mesh)+"/dataplanes/"+url.PathEscape(name)+"/_xds")
}

// XDSIngress inspects what the proxy of a ZoneIngress of the server's
// zone gets, and its streams on the instance that answers.
func (c *Client) XDSIngress(ctx context.Context, name string) (*api.XDSInspection, error) {
	return c.xds(ctx, "/zoneingresses/"+url.PathEscape(name)+"/_xds")
}

func (c *Client) xds(ctx context.Context, path string) (*api.XDSInspection, error) {
	r, err := c.do(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return nil, err
	}
	var in api.XDSInspection
	if err := json.Unmarshal(r.body, &in); err != nil {
		return nil, fmt.Errorf("decode xDS inspection: %w", err)
	}
	return &in, nil
}

// DNS returns the names the server's DNS answers in mesh, and those it
// does not answer with the reason.
func (c *Client) DNS(ctx context.Context, mesh string) (*api.DNSListing, error) {
	r, err := c.do(ctx, http.MethodGet, "/meshes/"+url.PathEscape(mesh)+"/_dns", nil, nil)
	if err != nil {
		return nil, err
	}
	var l api.DNSListing
	if err := json.Unmarshal(r.body, &l); err != nil {
		return nil, fmt.Errorf("decode DNS listing: %w", err)
	}
	return &l, nil
}

// ServiceTags returns the kuma.io/service tags of mesh's Dataplanes with the
// MeshService each has, or why it has none.
func (c *Client) ServiceTags(ctx context.Context, mesh string) (*api.ServiceTagsReport, error) {
	r, err := c.do(ctx, http.MethodGet, "/meshes/"+url.PathEscape(mesh)+"/_servicetags", nil, nil)
	if err != nil {
		return nil, err
	}
	var l api.ServiceTagsReport
	if err := json.Unmarshal(r.body, &l); err != nil {
		return nil, fmt.Errorf("decode service tags: %w", err)
	}
	return &l, nil
}

// Leader returns the leadership as the server sees it.
func (c *Client) Leader(ctx context.Context) (*api.LeaderStatus, error) {
	r, err := c.do(ctx, http.MethodGet, "/_leader", nil, nil)
	if err != nil {
		return nil, err
	}
	var l api.LeaderStatus
	if err := json.Unmarshal(r.body, &l); err != nil {
		return nil, fmt.Errorf("decode leader: %w", err)
	}
	return &l, nil
}

// Check asks the server what writing objs would do, without writing
// (POST /_apply?dryRun=true): one result per object, in order, and, when
// every object passes, the hostnames and VIPs services would gain or lose.
func (c *Client) Check(ctx context.Context, objs []*resource.Object) (*api.ApplyReport, error) {
	body, err := json.Marshal(api.ApplyRequest{Items: objs})
	if err != nil {
		return nil, err
	}
	r, err := c.do(ctx, http.MethodPost, "/_apply?dryRun=true", body, http.Header{"Content-Type": {"application/json"}})
	if err != nil {
		return nil, err
	}
	var rep api.ApplyReport
	if err := json.Unmarshal(r.body, &rep); err != nil {
		return nil, fmt.Errorf("reading the server's check: %w", err)
	}
	if len(rep.Items) != len(objs) {
		return nil, fmt.Errorf("the server checked %d resources of %d", len(rep.Items), len(objs))
	}
	return &rep, nil
}

// ZoneInsight returns the state of a zone's sync stream, from a global
// control plane.
func (c *Client) ZoneInsight(ctx context.Context, zone string) (*api.ZoneInsight, error) {
	r, err := c.do(ctx, http.MethodGet, "/zones/"+url.PathEscape(zone)+"/_insight", nil, nil)
	if err != nil {
		return nil, err
	}
	var in api.ZoneInsight
	if err := json.Unmarshal(r.body, &in); err != nil {
		return nil, fmt.Errorf("decode zone insight: %w", err)
	}
	return &in, nil
}
