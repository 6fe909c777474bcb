package gui

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
)

// How often the pages with zone insights are fetched again: the insights
// change without a store revision (a zone going offline, its last-seen
// time), which the long poll of /gui/_wait does not see.
const (
	zonesEvery    = 2 // seconds, the zones page
	overviewEvery = 5 // seconds, the overview when it shows zones
)

// zonesData is the zones part of a page: on a global control plane its
// zones and the insight of each (Options.ZoneInsight, the body of GET
// /zones/{name}/_insight); on a zone control plane its stream to the
// global (Options.GlobalLink).
type zonesData struct {
	Mode, Zone string
	Zones      []zoneRow
	// Online, Offline and Never count the zones with an insight whose
	// stream is up, down, or never started.
	Online, Offline, Never int
	// Insights is true when the control plane keeps zone insights (a
	// global).
	Insights bool
	Link     *linkRow
	// Ingresses counts the ZoneIngresses this control plane holds.
	Ingresses int
}

// stream is a sync stream's insight, with the time the page was rendered
// for its "ago" figures.
type stream struct {
	Insight *api.ZoneInsight
	Now     time.Time
}

// linkRow is a zone control plane's stream to its global.
type linkRow struct {
	stream
	Address string
	Leading bool
}

// zoneRow is one Zone resource and, on a global, its insight.
type zoneRow struct {
	Name     string
	Enabled  bool
	Created  time.Time
	Modified time.Time
	// Insight is nil where the control plane keeps no insights, or when
	// reading it failed (Err says why).
	stream
	Err string
}

// every returns how often a page showing d should be fetched again, 0 when
// it shows no insight.
func (d zonesData) every(seconds int) int {
	if (d.Insights && len(d.Zones) > 0) || d.Link != nil {
		return seconds
	}
	return 0
}

// zonesData reads the Zones from the cache and, on a global, each one's
// insight from the same function as GET /zones/{name}/_insight.
func (s *Server) zonesData(ctx context.Context) zonesData {
	now := s.o.Now()
	d := zonesData{Mode: s.o.Mode, Zone: s.o.Zone, Insights: s.o.ZoneInsight != nil}
	objs, _ := s.o.Cache.List(cache.Query{Kind: resource.Zone})
	for _, o := range objs {
		z := zoneRow{Name: o.Name, Enabled: true, Created: o.CreationTime, Modified: o.ModificationTime, stream: stream{Now: now}}
		if spec, ok := o.Spec.(*resource.ZoneSpec); ok && spec.Enabled != nil {
			z.Enabled = *spec.Enabled
		}
		if s.o.ZoneInsight != nil {
			in, err := s.o.ZoneInsight(ctx, o.Name)
			switch {
			case err != nil:
				z.Err = err.Error()
			case in.Online:
				d.Online++
			case in.ConnectedSince.IsZero():
				d.Never++
			default:
				d.Offline++
			}
			if err == nil {
				z.Insight = &in
			}
		}
		d.Zones = append(d.Zones, z)
	}
	_, d.Ingresses = s.o.Cache.List(cache.Query{Kind: resource.ZoneIngress, Size: 1})
	if s.o.GlobalLink != nil {
		l := s.o.GlobalLink()
		d.Link = &linkRow{stream: stream{Insight: &l.Insight, Now: now}, Address: l.Address, Leading: l.Leading}
	}
	return d
}

func (s *Server) zones(w http.ResponseWriter, r *http.Request) {
	rev := s.o.Cache.Revision()
	d := s.zonesData(r.Context())
	s.render(w, r, http.StatusOK, "zones.html", &page{Title: "Zones", Nav: "zones", Revision: rev, Live: true, Every: d.every(zonesEvery), Data: d})
}

// ago says how long before now t was, in the largest whole unit ("3s ago",
// "5m ago", "2h ago", "4d ago"); "-" for no time.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "just now"
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s ago"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m ago"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h ago"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + "d ago"
}
