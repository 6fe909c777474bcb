// Package kubeapi is meshnames' small client of the Kubernetes API: it
// loads a kubeconfig file or the in-cluster configuration (through
// client-go's rest and clientcmd packages, so that every authentication
// method kubectl supports works), and speaks JSON REST to the API server:
// get, paged list, watch, create, JSON patch, merge patch and delete, with
// the API's Status errors mapped to sentinel errors.
//
// It decodes only what its callers ask for: an object is handed out as its
// raw JSON, and callers decode it into structs that hold the few fields
// they use, so that tens of thousands of watched Services cost a few
// hundred bytes each rather than a full typed copy.
//
// It imports nothing of meshnames. A Client is safe for concurrent use.
package kubeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Resource names a collection of the API: its group, version and plural
// resource name, and whether its objects live in namespaces.
type Resource struct {
	Group, Version, Resource string
	Namespaced               bool
}

// Core resources meshnames reads or writes.
var (
	Namespaces     = Resource{Version: "v1", Resource: "namespaces"}
	Services       = Resource{Version: "v1", Resource: "services", Namespaced: true}
	Pods           = Resource{Version: "v1", Resource: "pods", Namespaced: true}
	Events         = Resource{Version: "v1", Resource: "events", Namespaced: true}
	EndpointSlices = Resource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices", Namespaced: true}
	Leases         = Resource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases", Namespaced: true}
	CRDs           = Resource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// APIVersion returns the apiVersion field of the resource's objects.
func (r Resource) APIVersion() string {
	if r.Group == "" {
		return r.Version
	}
	return r.Group + "/" + r.Version
}

func (r Resource) String() string {
	if r.Group == "" {
		return r.Resource
	}
	return r.Resource + "." + r.Group
}

// path returns the URL path of the collection (name == "") or of one
// object, and of a subresource of it. ns is ignored for cluster-scoped
// resources and means every namespace when empty.
func (r Resource) path(ns, name, sub string) string {
	var b strings.Builder
	if r.Group == "" {
		b.WriteString("/api/" + r.Version)
	} else {
		b.WriteString("/apis/" + r.Group + "/" + r.Version)
	}
	if r.Namespaced && ns != "" {
		b.WriteString("/namespaces/" + url.PathEscape(ns))
	}
	b.WriteString("/" + r.Resource)
	if name != "" {
		b.WriteString("/" + url.PathEscape(name))
		if sub != "" {
			b.WriteString("/" + sub)
		}
	}
	return b.String()
}

// Config loads the client configuration: the kubeconfig file at path
// (its current context), or, when path is empty, $KUBECONFIG, then the
// in-cluster configuration of a Pod, then ~/.kube/config.
func Config(path string) (*rest.Config, error) {
	if path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
		}
		return cfg, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if len(rules.Precedence) == 0 && rules.ExplicitPath == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		if ic, icErr := rest.InClusterConfig(); icErr == nil {
			return ic, nil
		}
		return nil, fmt.Errorf("no Kubernetes configuration: no kubeconfig (%w) and not running in a Pod", err)
	}
	return cfg, nil
}

// Client talks to one API server.
type Client struct {
	http *http.Client
	base *url.URL
	// Timeout bounds each request but watches (30 s when zero).
	Timeout time.Duration
	// UserAgent is sent with every request.
	UserAgent string
}

// New returns a client for cfg. It does no I/O.
func New(cfg *rest.Config) (*Client, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	host := cfg.Host
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	base, err := url.Parse(host)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: server %q: %w", cfg.Host, err)
	}
	base.Path = strings.TrimSuffix(base.Path, "/")
	return &Client{http: hc, base: base, Timeout: 30 * time.Second, UserAgent: "meshnames"}, nil
}

// Host returns the API server's URL.
func (c *Client) Host() string { return c.base.String() }

// request is one call.
type request struct {
	method      string
	path        string
	query       url.Values
	body        []byte
	contentType string
}

func (c *Client) do(ctx context.Context, r request) (*http.Response, error) {
	u := *c.base
	u.Path += r.path
	u.RawQuery = r.query.Encode()
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %s %s: %w", ErrUnavailable, r.method, r.path, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, statusError(resp.StatusCode, b)
	}
	return resp, nil
}

// call makes a request that is not a watch and returns the response body.
func (c *Client) call(ctx context.Context, r request) ([]byte, error) {
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	resp, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := readBody(resp)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %s %s: reading the answer: %w", ErrUnavailable, r.method, r.path, err)
	}
	return b, nil
}

// exactBody is the largest declared length readBody allocates at once; a
// longer body (a large list) is read as it comes.
const exactBody = 1 << 20

// readBody reads a response's body. The API server declares the length of
// an object's answer, which is read into one allocation of that size;
// io.ReadAll grows a buffer through several (126 MB of allocation in the
// first naming of 10,000 Services, by BenchmarkKubeLiveHeap's heap
// profile), all of it work for the collector.
func readBody(resp *http.Response) ([]byte, error) {
	if n := resp.ContentLength; n >= 0 && n <= exactBody {
		b := make([]byte, n)
		if _, err := io.ReadFull(resp.Body, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	return io.ReadAll(resp.Body)
}

func decodeInto(b []byte, out any) error {
	if out == nil {
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = b
		return nil
	}
	return json.Unmarshal(b, out)
}

// Get reads one object into out (a struct, or *json.RawMessage for the
// raw JSON).
func (c *Client) Get(ctx context.Context, r Resource, ns, name string, out any) error {
	b, err := c.call(ctx, request{method: http.MethodGet, path: r.path(ns, name, "")})
	if err != nil {
		return err
	}
	return decodeInto(b, out)
}

// Create creates body (marshalled as JSON unless it is []byte) and reads
// the stored object into out.
func (c *Client) Create(ctx context.Context, r Resource, ns string, body, out any) error {
	data, err := marshal(body)
	if err != nil {
		return err
	}
	b, err := c.call(ctx, request{method: http.MethodPost, path: r.path(ns, "", ""), body: data, contentType: "application/json"})
	if err != nil {
		return err
	}
	return decodeInto(b, out)
}

// Update replaces an object (or its subresource sub, such as "status").
// A resourceVersion in body's metadata makes it conditional.
func (c *Client) Update(ctx context.Context, r Resource, ns, name, sub string, body, out any) error {
	data, err := marshal(body)
	if err != nil {
		return err
	}
	b, err := c.call(ctx, request{method: http.MethodPut, path: r.path(ns, name, sub), body: data, contentType: "application/json"})
	if err != nil {
		return err
	}
	return decodeInto(b, out)
}

// Patch types.
const (
	JSONPatch  = "application/json-patch+json"
	MergePatch = "application/merge-patch+json"
)

// PatchOp is one operation of a JSON patch (RFC 6902).
type PatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// Patch patches an object (or its subresource sub) with a patch of type
// typ and reads the result into out. A JSON patch that adds
// /metadata/resourceVersion makes the write conditional on it.
func (c *Client) Patch(ctx context.Context, r Resource, ns, name, sub, typ string, patch, out any) error {
	data, err := marshal(patch)
	if err != nil {
		return err
	}
	b, err := c.call(ctx, request{method: http.MethodPatch, path: r.path(ns, name, sub), body: data, contentType: typ})
	if err != nil {
		return err
	}
	return decodeInto(b, out)
}

// Preconditions make a delete conditional.
type Preconditions struct {
	ResourceVersion string `json:"resourceVersion,omitempty"`
	UID             string `json:"uid,omitempty"`
}

// Delete deletes an object; with preconditions, only the version or
// incarnation they name.
func (c *Client) Delete(ctx context.Context, r Resource, ns, name string, pre Preconditions) error {
	opts := map[string]any{"apiVersion": "v1", "kind": "DeleteOptions"}
	if pre != (Preconditions{}) {
		opts["preconditions"] = pre
	}
	data, _ := json.Marshal(opts)
	_, err := c.call(ctx, request{method: http.MethodDelete, path: r.path(ns, name, ""), body: data, contentType: "application/json"})
	return err
}

func marshal(v any) ([]byte, error) {
	switch t := v.(type) {
	case []byte:
		return t, nil
	case json.RawMessage:
		return t, nil
	}
	return json.Marshal(v)
}

// ListOptions narrow a list or a watch.
type ListOptions struct {
	LabelSelector string
	FieldSelector string
	// Limit is the page size of List (500 when zero).
	Limit int
	// Once makes List read only the first page.
	Once bool
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	if o.LabelSelector != "" {
		q.Set("labelSelector", o.LabelSelector)
	}
	if o.FieldSelector != "" {
		q.Set("fieldSelector", o.FieldSelector)
	}
	return q
}

// List reads every object of r in namespace ns (every namespace when
// empty), page by page, calling item with the raw JSON of each, and returns
// the resourceVersion of the list: a watch from it sees every later change.
// The list is a consistent read of the whole collection.
func (c *Client) List(ctx context.Context, r Resource, ns string, o ListOptions, item func(json.RawMessage) error) (string, error) {
	limit := o.Limit
	if limit <= 0 {
		limit = 500
	}
	cont := ""
	for {
		q := o.query()
		q.Set("limit", strconv.Itoa(limit))
		if cont != "" {
			q.Set("continue", cont)
		}
		b, err := c.call(ctx, request{method: http.MethodGet, path: r.path(ns, "", ""), query: q})
		if err != nil {
			return "", err
		}
		var page struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
				Continue        string `json:"continue"`
			} `json:"metadata"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return "", fmt.Errorf("list %s: %w", r, err)
		}
		for _, it := range page.Items {
			if err := item(it); err != nil {
				return "", err
			}
		}
		if page.Metadata.Continue == "" || o.Once {
			return page.Metadata.ResourceVersion, nil
		}
		cont = page.Metadata.Continue
	}
}

// Serves reports whether the API server serves collection r, from its
// discovery document of r's group and version: false when it does not
// know the group (an API whose CRDs are not installed).
func (c *Client) Serves(ctx context.Context, r Resource) (bool, error) {
	var list struct {
		Resources []struct {
			Name string `json:"name"`
		} `json:"resources"`
	}
	err := c.Get(ctx, Resource{Group: r.Group, Version: r.Version}, "", "", &list)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, it := range list.Resources {
		if it.Name == r.Resource {
			return true, nil
		}
	}
	return false, nil
}
