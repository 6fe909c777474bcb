package server

import (
	"context"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/apiserver"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/dnsserver"
	"github.com/meshnames/meshnames/internal/gui"
	"github.com/meshnames/meshnames/internal/history"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/vips"
	"github.com/meshnames/meshnames/internal/xds"
)

// newGUI builds the web GUI over the same cache, API bodies and DNS table
// as the REST API.
func (s *Server) newGUI(st store.Store, c *cache.Cache, names *dnsserver.Inspector, apiOpts apiserver.Options, proxies *xdsParts, usage *vips.Usage) *gui.Server {
	var historyOf func(ctx context.Context, vip, hostname string) (api.HistoryReport, error)
	if rec, ok := st.(store.Recorder); ok {
		// Every mesh: the GUI is refused to tokens limited to meshes.
		historyOf = func(ctx context.Context, vip, hostname string) (api.HistoryReport, error) {
			return apiserver.HistoryReport(ctx, rec, history.Query{VIP: vip, Hostname: hostname, Limit: historyLimit}, func(string) bool { return true })
		}
	}
	var streams func(mesh, name string) []api.XDSStream
	if proxies != nil {
		streams = func(mesh, name string) []api.XDSStream {
			return proxies.server.Streams(xds.Proxy{Mesh: mesh, Name: name})
		}
	}
	return gui.New(gui.Options{
		Cache: c, Store: st, Mode: s.cfg.Mode, Zone: s.cfg.Zone, Version: s.version, Log: s.log.With("component", "gui"),
		Hostnames: func(k resource.Key) (api.HostnamesReport, error) {
			return apiserver.HostnamesReport(c, s.cfg.Mode, s.cfg.Zone, k)
		},
		// The GUI pages the names itself (DNSNames): only the names not
		// answered come from the _dns body.
		DNS: func(mesh string) (api.DNSListing, error) {
			return apiserver.DNSListing(c, names.NotAnswered, mesh)
		},
		DNSNames:   names.Page,
		ServiceDNS: names.Service,
		Lookup:     names.Lookup,
		LookupAddr: names.LookupAddr,
		MatchDNS:   names.Match,
		Leader:     apiOpts.Leader,
		History:    historyOf,
		Pools:      usage.Pools,
		VIP:        usage.State,
		// The zones' insights are the API's (GET /zones/{name}/_insight).
		ZoneInsight: apiOpts.ZoneInsight,
		GlobalLink:  s.globalLink(),
		// A proxy's streams and config are the API's (GET .../_xds).
		XDS:        apiOpts.XDS,
		XDSStreams: streams,
	})
}

// vipUsage tells readers on this instance how the VIP pools are used.
func (s *Server) vipUsage(st store.Store) (*vips.Usage, error) {
	pools, err := vipPools(s.cfg.VIPs)
	if err != nil {
		return nil, err
	}
	return vips.NewUsage(st, pools, func() bool { return s.elector != nil && s.elector.Leading() }), nil
}

// globalLink reports a zone control plane's stream to its global, for the
// GUI; nil in the other modes.
func (s *Server) globalLink() func() gui.GlobalLink {
	if s.sync == nil || s.sync.zone == nil {
		return nil
	}
	z := s.sync.zone
	return func() gui.GlobalLink {
		return gui.GlobalLink{Address: s.cfg.Sync.GlobalAddress, Leading: s.elector != nil && s.elector.Leading(), Insight: z.Insight()}
	}
}

// historyLimit bounds the events of one value the GUI reads.
const historyLimit = 100
