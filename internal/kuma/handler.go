package kuma

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/validate"
)

// Prefix is where the adapter is mounted on the API port.
const Prefix = "/kuma"

// Mount returns native with the adapter at Prefix: requests under Prefix
// are translated, every other request goes to native unchanged.
//
// maxBody bounds a request body, as api.limits.maxBodyBytes bounds the
// native API's.
func Mount(native http.Handler, maxBody int64) http.Handler {
	a := &adapter{native: native, maxBody: maxBody}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == Prefix || strings.HasPrefix(r.URL.Path, Prefix+"/") {
			a.ServeHTTP(w, r)
			return
		}
		native.ServeHTTP(w, r)
	})
}

// adapter translates Kuma requests into native ones, runs them through the
// native handler (the same authentication, admission and writes as every
// other client) and translates the answers back.
type adapter struct {
	native  http.Handler
	maxBody int64
}

func (a *adapter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.Trim(strings.TrimPrefix(r.URL.Path, Prefix), "/")
	var seg []string
	if path != "" {
		seg = strings.Split(path, "/")
	}
	switch {
	case len(seg) == 0:
		a.index(w, r)
		return
	case len(seg) == 2 && seg[0] == "zones" && seg[1] == "_overview":
		a.zonesOverview(w, r)
		return
	case len(seg) == 5 && seg[0] == "meshes" && seg[4] == "_hostnames":
		a.hostnames(w, r, seg)
		return
	}
	kind, name, ok := route(seg)
	if !ok {
		writeError(w, &Error{Status: http.StatusNotFound, Title: "Not found",
			Detail: "no such path in meshnames' Kuma adapter: " + r.URL.Path + " (see the Kuma compatibility page for what it serves)"})
		return
	}
	switch {
	case name == "" && r.Method == http.MethodGet:
		a.list(w, r, kind)
	case name == "":
		a.passError(w, a.call(r, r.Method, "/"+path, r.URL.Query(), nil), kind)
	case r.Method == http.MethodGet:
		a.get(w, r, kind, "/"+path)
	case r.Method == http.MethodPut:
		a.put(w, r, kind, "/"+path)
	default:
		// DELETE and anything else: the native answer, in Kuma's shape.
		res := a.call(r, r.Method, "/"+path, nil, nil)
		if res.status == http.StatusOK {
			writeJSON(w, http.StatusOK, struct{}{})
			return
		}
		a.passError(w, res, kind)
	}
}

// route maps the path below the prefix to a kind and a name ("" for a
// list). The paths are the native API's, which are Kuma's.
func route(seg []string) (resource.Kind, string, bool) {
	switch len(seg) {
	case 1, 2:
		d := byPlural(seg[0])
		if d == nil || (d.MeshScoped && len(seg) == 2) {
			return "", "", false
		}
		if len(seg) == 2 {
			return d.Kind, seg[1], true
		}
		return d.Kind, "", true
	case 3, 4:
		d := byPlural(seg[2])
		if seg[0] != "meshes" || d == nil || !d.MeshScoped {
			return "", "", false
		}
		if len(seg) == 4 {
			return d.Kind, seg[3], true
		}
		return d.Kind, "", true
	}
	return "", "", false
}

func byPlural(p string) *resource.Descriptor {
	for _, d := range resource.Descriptors() {
		if d.Plural == p {
			return d
		}
	}
	return nil
}

// result is a native response.
type result struct {
	status int
	header http.Header
	body   []byte
}

// recorder buffers a native response.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

// call runs one native request carrying the caller's headers (its
// credentials among them), with a JSON body when body is not nil.
func (a *adapter) call(r *http.Request, method, path string, query url.Values, body []byte, header ...string) result {
	req := r.Clone(r.Context())
	req.Method = method
	req.URL = &url.URL{Path: path, RawQuery: query.Encode()}
	req.RequestURI = ""
	for _, h := range []string{"Content-Type", "Content-Length", "Accept", "Accept-Encoding", "If-Match", "Prefer"} {
		req.Header.Del(h)
	}
	req.Header.Set("Accept", "application/json")
	req.Body, req.ContentLength = http.NoBody, 0
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := &recorder{header: http.Header{}}
	a.native.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return result{status: rec.status, header: rec.header, body: rec.body.Bytes()}
}

func (a *adapter) index(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, &Error{Status: http.StatusMethodNotAllowed, Title: "Method not allowed", Detail: r.Method + " is not supported here; use GET"})
		return
	}
	res := a.call(r, http.MethodGet, "/", nil, nil)
	var info api.Info
	if res.status != http.StatusOK || json.Unmarshal(res.body, &info) != nil {
		a.passError(w, res, "")
		return
	}
	host, _ := os.Hostname()
	// kumactl's check wants the product to be Kuma; meshnames does not
	// claim to be (use --skip-check). kumaApi says which Kuma API this is.
	writeJSON(w, http.StatusOK, Index{Hostname: host, Tagline: info.Product, Product: info.Product, Version: info.Version,
		Mode: info.Mode, Zone: info.Zone, KumaAPI: APIVersion})
}

// APIVersion is the Kuma API line the adapter speaks.
const APIVersion = "3.x"

// Index is the body of GET /kuma: the fields of Kuma's index that kumactl
// reads, with meshnames' own product and version.
type Index struct {
	Hostname string `json:"hostname"`
	Tagline  string `json:"tagline"`
	Product  string `json:"product"`
	Version  string `json:"version"`
	Mode     string `json:"mode"`
	Zone     string `json:"zone,omitempty"`
	KumaAPI  string `json:"kumaApi"`
}

// nativeList is the native list body.
type nativeList struct {
	Total int                `json:"total"`
	Items []*resource.Object `json:"items"`
	Next  *string            `json:"next"`
}

// List is the body of a Kuma list.
type List struct {
	Total int     `json:"total"`
	Items []any   `json:"items"`
	Next  *string `json:"next"`
}

func (a *adapter) list(w http.ResponseWriter, r *http.Request, kind resource.Kind) {
	nativePath := strings.TrimPrefix(r.URL.Path, Prefix)
	res := a.call(r, http.MethodGet, nativePath, r.URL.Query(), nil)
	var page nativeList
	if res.status != http.StatusOK || json.Unmarshal(res.body, &page) != nil {
		a.passError(w, res, kind)
		return
	}
	out := List{Total: page.Total, Items: make([]any, 0, len(page.Items))}
	for _, o := range page.Items {
		out.Items = append(out.Items, ToKuma(o))
	}
	out.Next = nextAt(r, page.Next)
	writeJSON(w, http.StatusOK, out)
}

// nextAt is the native next page's URL at the adapter's path.
func nextAt(r *http.Request, next *string) *string {
	if next == nil {
		return nil
	}
	u, err := url.Parse(*next)
	if err != nil {
		return nil
	}
	u.Path = r.URL.Path
	s := u.String()
	return &s
}

func (a *adapter) get(w http.ResponseWriter, r *http.Request, kind resource.Kind, path string) {
	res := a.call(r, http.MethodGet, path, nil, nil)
	var o resource.Object
	if res.status != http.StatusOK || json.Unmarshal(res.body, &o) != nil {
		a.passError(w, res, kind)
		return
	}
	writeJSON(w, http.StatusOK, ToKuma(&o))
}

// PutResult is the body of a successful Kuma PUT.
type PutResult struct {
	Warnings []string `json:"warnings"`
}

// writeAttempts bounds the retries of a write that raced with another.
const writeAttempts = 5

// put translates a Kuma document and writes it through the native PUT.
// Before writing it reads what is stored: a resource holding what Kuma's
// shape cannot carry is refused, because the write would remove it, and
// the native PUT names the version read (If-Match), so that such a field
// added in between is not lost either.
func (a *adapter) put(w http.ResponseWriter, r *http.Request, kind resource.Kind, path string) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, &Error{Status: http.StatusRequestEntityTooLarge, Title: "Body too large", Detail: fmt.Sprintf("the request body exceeds the limit of %d bytes (api.limits.maxBodyBytes)", a.maxBody)})
			return
		}
		writeError(w, &Error{Status: http.StatusBadRequest, Title: "Invalid body", Detail: "cannot read the request body: " + err.Error()})
		return
	}
	obj, errs := FromKuma(kind, body)
	if len(errs) > 0 {
		if obj != nil {
			errs = withNative(errs, a.violations(r, kind, path, obj))
		}
		writeError(w, invalid(errs))
		return
	}
	doc, err := json.Marshal(obj)
	if err != nil {
		writeError(w, &Error{Status: http.StatusInternalServerError, Title: "Internal error", Detail: err.Error()})
		return
	}
	for range writeAttempts {
		cur := a.call(r, http.MethodGet, path, nil, nil)
		ifMatch := []string{}
		switch cur.status {
		case http.StatusNotFound:
			// Nothing stored: nothing to lose. A resource created in
			// between makes the native PUT an update, which the next
			// attempt would have refused only if the creator wrote
			// native-only fields; If-Match cannot name "absent", so this
			// window stays, as narrow as one request.
		case http.StatusOK:
			var stored resource.Object
			if json.Unmarshal(cur.body, &stored) != nil {
				a.passError(w, cur, kind)
				return
			}
			if omitted := Omitted(&stored); len(omitted) > 0 {
				writeError(w, wouldLose(stored.Key(), omitted))
				return
			}
			ifMatch = []string{"If-Match", cur.header.Get("ETag")}
		default:
			a.passError(w, cur, kind)
			return
		}
		res := a.call(r, http.MethodPut, path, nil, doc, append(ifMatch, "Prefer", "return=minimal")...)
		if res.status == http.StatusConflict && len(ifMatch) > 0 {
			continue // changed since we read it: read again
		}
		if res.status != http.StatusOK && res.status != http.StatusCreated {
			a.passError(w, res, kind)
			return
		}
		out := PutResult{Warnings: []string{}}
		for _, h := range res.header.Values("Warning") {
			out.Warnings = append(out.Warnings, kumaWarning(kind, warningText(h)))
		}
		writeJSON(w, res.status, out)
		return
	}
	writeError(w, &Error{Status: http.StatusConflict, Title: "Conflict", Detail: path + " is being modified concurrently; try again"})
}

// violations returns the rules of the native write path that obj, a
// document translated as far as it could be, breaks, at their paths in
// the Kuma document of kind: the native dry run (POST /_apply?dryRun=true)
// admits it as the PUT to path would and writes nothing. None when the
// dry run cannot answer (the caller may not even read).
func (a *adapter) violations(r *http.Request, kind resource.Kind, path string, obj *resource.Object) validate.Errors {
	c := *obj
	seg := strings.Split(strings.Trim(path, "/"), "/")
	c.Name = cmp.Or(c.Name, seg[len(seg)-1])
	if resource.MustLookup(kind).MeshScoped && len(seg) == 4 {
		c.Mesh = cmp.Or(c.Mesh, seg[1])
	}
	body, err := json.Marshal(api.ApplyRequest{Items: []*resource.Object{&c}})
	if err != nil {
		return nil
	}
	res := a.call(r, http.MethodPost, "/_apply", url.Values{"dryRun": {"true"}}, body)
	var report api.ApplyReport
	if res.status != http.StatusOK || json.Unmarshal(res.body, &report) != nil || len(report.Items) != 1 {
		return nil
	}
	causes := report.Items[0].Causes
	for i := range causes {
		causes[i].Field = KumaPath(kind, causes[i].Field)
	}
	return causes
}

// withNative returns the translation's problems followed by the native
// rules broken that concern no field the translation refused, nothing
// under one and nothing above one: what the refused field's absence from
// the translation causes (a required section missing) is not reported
// beside the refusal.
func withNative(translation, native validate.Errors) validate.Errors {
	out := translation
	for _, n := range native {
		related := false
		for _, t := range translation {
			if t.Field == "" || within(n.Field, t.Field) || within(t.Field, n.Field) {
				related = true
				break
			}
		}
		if !related {
			out = append(out, n)
		}
	}
	return out
}

// within reports whether the field path p is at or under the path q.
func within(p, q string) bool {
	rest, ok := strings.CutPrefix(p, q)
	return ok && (rest == "" || rest[0] == '.' || rest[0] == '[')
}

// wouldLose is the refusal of a write that would remove native-only fields.
func wouldLose(k resource.Key, omitted []Omission) *Error {
	var errs validate.Errors
	for _, o := range omitted {
		errs.Addf(validate.Path(o.Field), "is set on the stored %s and Kuma's shape cannot carry it (%s), so this write would remove it; change this resource through the native API (PUT %s)", k.Kind, o.Reason, NativePath(k))
	}
	e := invalid(errs)
	e.Detail = "the stored resource holds fields that Kuma's shape cannot carry; nothing was written"
	return e
}

// warningText extracts the text of a `299 - "text"` Warning header.
func warningText(h string) string {
	if i := strings.IndexByte(h, '"'); i >= 0 {
		if s, err := strconv.Unquote(h[i:]); err == nil {
			return s
		}
	}
	return h
}

// kumaWarning puts a warning's leading field path ("spec.x: advice") at
// its place in the Kuma document.
func kumaWarning(kind resource.Kind, w string) string {
	if field, rest, ok := strings.Cut(w, ": "); ok && strings.HasPrefix(field, "spec") {
		return KumaPath(kind, field) + ": " + rest
	}
	return w
}

// passError answers with a native error, its field paths translated to
// the Kuma document of kind.
func (a *adapter) passError(w http.ResponseWriter, res result, kind resource.Kind) {
	var e Error
	if json.Unmarshal(res.body, &e) != nil || e.Title == "" {
		e = Error{Title: http.StatusText(res.status), Detail: strings.TrimSpace(string(res.body))}
	}
	e.Status = cmp.Or(res.status, http.StatusInternalServerError)
	if kind != "" {
		for i := range e.Causes {
			e.Causes[i].Field = KumaPath(kind, e.Causes[i].Field)
		}
	}
	if ra := res.header.Get("Retry-After"); ra != "" {
		w.Header().Set("Retry-After", ra)
	}
	writeError(w, &e)
}

// Error is an error body: the native API's, in Kuma's shape.
type Error = api.Error

func invalid(errs validate.Errors) *Error {
	return &Error{Status: http.StatusBadRequest, Title: "Invalid resource", Detail: "the resource breaks the rules listed in invalid_parameters", Causes: errs}
}

func writeError(w http.ResponseWriter, e *Error) {
	writeJSON(w, e.Status, e.WithKumaFields())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"type":"/std-errors","status":500,"title":"Internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// Hostnames is Kuma's _hostnames body: every name the generators give the
// service, with the zones it is given in.
type Hostnames struct {
	Total int            `json:"total"`
	Items []HostnameItem `json:"items"`
}

// HostnameItem is one name.
type HostnameItem struct {
	Hostname string     `json:"hostname"`
	Zones    []ZoneName `json:"zones"`
}

// ZoneName names a zone.
type ZoneName struct {
	Name string `json:"name"`
}

// hostnames answers Kuma's _hostnames from the native inspection: the
// names that render, each in the service's zone.
func (a *adapter) hostnames(w http.ResponseWriter, r *http.Request, seg []string) {
	kind, _, ok := route(seg[:4])
	if !ok {
		writeError(w, &Error{Status: http.StatusNotFound, Title: "Not found", Detail: "no such path: " + r.URL.Path})
		return
	}
	svcPath := "/" + strings.Join(seg[:4], "/")
	svc := a.call(r, http.MethodGet, svcPath, nil, nil)
	var o resource.Object
	if svc.status != http.StatusOK || json.Unmarshal(svc.body, &o) != nil {
		a.passError(w, svc, kind)
		return
	}
	res := a.call(r, http.MethodGet, svcPath+"/_hostnames", nil, nil)
	var report api.HostnamesReport
	if res.status != http.StatusOK || json.Unmarshal(res.body, &report) != nil {
		a.passError(w, res, kind)
		return
	}
	zone := o.Labels[resource.LabelZone]
	out := Hostnames{Items: []HostnameItem{}}
	for _, it := range report.Items {
		if !it.Selects || it.Hostname == "" || slices.ContainsFunc(out.Items, func(h HostnameItem) bool { return h.Hostname == it.Hostname }) {
			continue
		}
		item := HostnameItem{Hostname: it.Hostname, Zones: []ZoneName{}}
		if zone != "" {
			item.Zones = append(item.Zones, ZoneName{Name: zone})
		}
		out.Items = append(out.Items, item)
	}
	slices.SortFunc(out.Items, func(a, b HostnameItem) int { return cmp.Compare(a.Hostname, b.Hostname) })
	out.Total = len(out.Items)
	writeJSON(w, http.StatusOK, out)
}
