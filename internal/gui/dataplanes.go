package gui

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
)

// dataplaneEvery is how often (seconds) a Dataplane page, and the list, are
// fetched again: proxies' streams change without a store revision (an ACK, a NACK, a
// proxy connecting), which the long poll of /gui/_wait does not see.
const dataplaneEvery = 2

// configShowMax bounds the config a Dataplane page shows (indented JSON):
// a proxy of a mesh with thousands of services gets megabytes, which the
// page, fetched again every few seconds, should not carry. The API gives
// it whole.
const configShowMax = 256 << 10

// subscribedShown bounds the resource names a type's row lists.
const subscribedShown = 10

// ---- the list ----

type dataplanesData struct {
	Mesh   string
	Q      string
	Meshes []option
	// Proxies is set where the rows say whether each proxy is connected.
	Proxies bool
	Rows    []dataplaneRow
	pager
}

type dataplaneRow struct {
	Key      resource.Key
	Address  string
	Inbounds []resource.Inbound
	Proxy    proxySummary
}

// proxySummary is a proxy's streams on this instance, in a few words: how
// many, their protocols, and the types whose last response was rejected
// (NACK) or waits for its ACK.
type proxySummary struct {
	Streams   int
	Protocols []string
	Nacks     []string
	Waiting   []string
}

func summarize(streams []api.XDSStream) proxySummary {
	p := proxySummary{Streams: len(streams)}
	for _, st := range streams {
		if !slices.Contains(p.Protocols, st.Protocol) {
			p.Protocols = append(p.Protocols, st.Protocol)
		}
		for _, t := range st.Types {
			if t.Nack != nil && !slices.Contains(p.Nacks, t.Type) {
				p.Nacks = append(p.Nacks, t.Type)
			}
			if t.Pending && !slices.Contains(p.Waiting, t.Type) {
				p.Waiting = append(p.Waiting, t.Type)
			}
		}
	}
	return p
}

func dataplaneRowOf(o *resource.Object) dataplaneRow {
	row := dataplaneRow{Key: o.Key()}
	if spec, ok := o.Spec.(*resource.DataplaneSpec); ok {
		row.Address, row.Inbounds = spec.Networking.Address, spec.Networking.Inbound
	}
	return row
}

// dataplanes lists the Dataplanes, PageSize a page, of one mesh or all
// (?mesh=), those whose name contains ?q= when given.
func (s *Server) dataplanes(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	d := dataplanesData{Mesh: v.Get("mesh"), Q: strings.TrimSpace(v.Get("q"))}
	n, ok := s.pageParam(w, r)
	if !ok {
		return
	}
	d.Page = n
	rev := s.o.Cache.Revision()
	offset := (d.Page - 1) * PageSize
	q := cache.Query{Kind: resource.Dataplane, Mesh: d.Mesh}
	if d.Q == "" {
		d.Total = s.o.Cache.Count(resource.Dataplane, d.Mesh)
		items, _ := s.o.Cache.List(cache.Query{Kind: resource.Dataplane, Mesh: d.Mesh, Offset: offset, Size: PageSize})
		for _, o := range items {
			d.Rows = append(d.Rows, dataplaneRowOf(o))
		}
	} else {
		var keys []resource.Key
		for _, k := range s.o.Cache.Keys(q) {
			if strings.Contains(k.Name, d.Q) {
				keys = append(keys, k)
			}
		}
		d.Total = len(keys)
		for _, k := range keys[min(offset, len(keys)):min(offset+PageSize, len(keys))] {
			if o, ok := s.o.Cache.Get(k); ok {
				d.Rows = append(d.Rows, dataplaneRowOf(o))
			}
		}
	}
	if s.o.XDSStreams != nil {
		d.Proxies = true
		for i, row := range d.Rows {
			d.Rows[i].Proxy = summarize(s.o.XDSStreams(row.Key.Mesh, row.Key.Name))
		}
	}
	d.links(offset, len(d.Rows), "dataplanes", map[string]string{"mesh": d.Mesh, "q": d.Q})
	d.Meshes = s.meshOptions(d.Mesh, "every mesh")
	every := 0
	if d.Proxies && len(d.Rows) > 0 {
		every = dataplaneEvery
	}
	s.render(w, r, http.StatusOK, "dataplanes.html", &page{Title: "Dataplanes", Nav: "dataplanes", Revision: rev, Live: true, Every: every, Data: d})
}

// pageParam reads ?page= (1 when absent); on a bad one it answers 400 and
// returns false.
func (s *Server) pageParam(w http.ResponseWriter, r *http.Request) (int, bool) {
	p := r.URL.Query().Get("page")
	if p == "" {
		return 1, true
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 {
		s.badRequest(w, r, "page: must be a page number from 1, got "+strconv.Quote(p))
		return 0, false
	}
	return n, true
}

// pager is where a list page of PageSize rows stands: rows From-To of
// Total, page Page of Pages, and the links to the pages before and after.
type pager struct {
	Total int
	From  int
	To    int
	Page  int
	Pages int
	Prev  string
	Next  string
}

// links sets the figures and links of a page with Page and Total set,
// showing rows from offset, under path with the filters of params.
func (p *pager) links(offset, rows int, path string, params map[string]string) {
	p.Pages = max((p.Total+PageSize-1)/PageSize, 1)
	if rows > 0 {
		p.From, p.To = offset+1, offset+rows
	}
	if p.Page > 1 {
		p.Prev = pageLink(path, params, min(p.Page-1, p.Pages))
	}
	if p.Page < p.Pages {
		p.Next = pageLink(path, params, p.Page+1)
	}
}

// pageLink is the GUI path of page number n of a list, with the filters
// of params that are set.
func pageLink(path string, params map[string]string, n int) string {
	u := url.Values{}
	for k, val := range params {
		if val != "" {
			u.Set(k, val)
		}
	}
	if n > 1 {
		u.Set("page", strconv.Itoa(n))
	}
	if len(u) == 0 {
		return Prefix + path
	}
	return Prefix + path + "?" + u.Encode()
}

// ---- one Dataplane ----

type dataplaneData struct {
	Obj        *resource.Object
	Labels     []keyValue
	Networking resource.DataplaneNetworking
	// Now is the clock of the "ago" figures.
	Now time.Time
	// Served is false where this control plane serves no xDS.
	Served bool
	XDS    *api.XDSInspection
	XDSErr string
	// Streams are XDS.Streams, for the page.
	Streams []streamRow
	// Nacks are the NACKs of every stream, shown first.
	Nacks []nackRow
	// Clusters, Endpoints and Listeners count the config's resources;
	// Config is the config as indented JSON, its first configShowMax
	// bytes when Truncated (of Size).
	Clusters, Endpoints, Listeners int
	Config                         string
	Size                           int
	Truncated                      bool
	YAML                           string
}

type streamRow struct {
	api.XDSStream
	// N numbers the stream from 1, of Of.
	N, Of int
	Types []typeRow
}

type typeRow struct {
	api.XDSTypeState
	// Shown are the first subscribedShown names; More counts the others.
	Shown []string
	More  int
}

type nackRow struct {
	Type   string
	Stream int
	api.XDSNack
}

// dataplane shows one Dataplane and its proxy: the ADS streams on this
// instance, with the notes and config of the _xds inspection.
func (s *Server) dataplane(w http.ResponseWriter, r *http.Request, mesh, name string) {
	rev := s.o.Cache.Revision()
	k := resource.Key{Kind: resource.Dataplane, Mesh: mesh, Name: name}
	obj, ok := s.o.Cache.Get(k)
	if !ok {
		s.renderMissing(w, r, "dataplanes", k, rev)
		return
	}
	d := dataplaneData{Obj: obj, Labels: sortedLabels(obj.Labels), Now: s.o.Now(), Served: s.o.XDS != nil}
	if spec, ok := obj.Spec.(*resource.DataplaneSpec); ok {
		d.Networking = spec.Networking
	}
	if s.o.XDS != nil {
		in, err := s.o.XDS(mesh, name)
		if err != nil {
			d.XDSErr = err.Error()
		} else {
			d.XDS = &in
			d.streams(in.Streams)
			d.config(in.Config)
		}
	}
	if y, err := resource.EncodeYAML(obj); err == nil {
		d.YAML = string(y)
	}
	every := 0
	if d.Served {
		every = dataplaneEvery
	}
	s.render(w, r, http.StatusOK, "dataplane.html", &page{Title: "Dataplane " + mesh + "/" + name, Nav: "dataplanes", Revision: rev, Live: true, Every: every, Data: d})
}

func (d *dataplaneData) streams(streams []api.XDSStream) {
	for i, st := range streams {
		row := streamRow{XDSStream: st, N: i + 1, Of: len(streams)}
		for _, t := range st.Types {
			tr := typeRow{XDSTypeState: t, Shown: t.Names[:min(len(t.Names), subscribedShown)], More: max(len(t.Names)-subscribedShown, 0)}
			row.Types = append(row.Types, tr)
			if t.Nack != nil {
				d.Nacks = append(d.Nacks, nackRow{Type: t.Type, Stream: row.N, XDSNack: *t.Nack})
			}
		}
		d.Streams = append(d.Streams, row)
	}
}

// config counts the resources of a config dump and indents it.
func (d *dataplaneData) config(raw json.RawMessage) {
	var dump struct {
		Configs []struct {
			Clusters  []json.RawMessage `json:"dynamicActiveClusters"`
			Endpoints []json.RawMessage `json:"dynamicEndpointConfigs"`
			Listeners []json.RawMessage `json:"dynamicListeners"`
		} `json:"configs"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &dump) != nil {
		return
	}
	for _, c := range dump.Configs {
		d.Clusters += len(c.Clusters)
		d.Endpoints += len(c.Endpoints)
		d.Listeners += len(c.Listeners)
	}
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return
	}
	d.Size = b.Len()
	out := b.Bytes()
	if len(out) > configShowMax {
		out = out[:bytes.LastIndexByte(out[:configShowMax], '\n')+1]
		d.Truncated = true
	}
	d.Config = string(out)
}

// protocolName says what an ADS stream's protocol is.
func protocolName(p string) string {
	switch p {
	case "sotw":
		return "state of the world (sotw)"
	case "delta":
		return "incremental (delta)"
	}
	return p
}
