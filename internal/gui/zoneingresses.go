package gui

import (
	"cmp"
	"net/http"
	"slices"
	"time"

	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
)

// ingressRow is one ZoneIngress: where it listens, where other zones
// reach it, and whose it is.
type ingressRow struct {
	Name, Zone string
	Listens    string
	// Advertised is where other zones reach it, "" when that is where it
	// listens.
	Advertised string
	// Synced is true for another zone's ingress, which reached this
	// control plane through the sync.
	Synced  bool
	Created time.Time
}

type ingressesData struct {
	Mode, Zone string
	Rows       []ingressRow
}

// ingressRows reads the ZoneIngresses from the cache, of every zone (by
// zone, then name).
func (s *Server) ingressRows() []ingressRow {
	objs, _ := s.o.Cache.List(cache.Query{Kind: resource.ZoneIngress})
	var rows []ingressRow
	for _, o := range objs {
		n := o.Spec.(*resource.ZoneIngressSpec).Networking
		rows = append(rows, ingressRow{Name: o.Name, Zone: o.Labels[resource.LabelZone],
			Listens:    resource.HostPort(n.Address, n.Port),
			Advertised: resource.HostPort(n.AdvertisedAddress, n.AdvertisedPort),
			Synced:     s.o.Mode == resource.ModeGlobal || o.Labels[resource.LabelOrigin] == resource.OriginGlobal,
			Created:    o.CreationTime})
	}
	slices.SortFunc(rows, func(a, b ingressRow) int { return cmp.Or(cmp.Compare(a.Zone, b.Zone), cmp.Compare(a.Name, b.Name)) })
	return rows
}

func (s *Server) zoneIngresses(w http.ResponseWriter, r *http.Request) {
	rev := s.o.Cache.Revision()
	d := ingressesData{Mode: s.o.Mode, Zone: s.o.Zone, Rows: s.ingressRows()}
	s.render(w, r, http.StatusOK, "zoneingresses.html", &page{Title: "Zone ingresses", Nav: "zones", Revision: rev, Live: true, Data: d})
}
