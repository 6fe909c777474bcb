package kuma

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/resource"
)

// ZoneOverview is one item of Kuma's /zones/_overview: a Zone and the
// state of its sync stream. Its Meshnames field says where the whole
// insight is and what of it Kuma's shape leaves out; it is absent where
// the control plane keeps no insights (a zone or standalone control
// plane).
type ZoneOverview struct {
	Meta
	Zone        ZoneSpec    `json:"zone"`
	ZoneInsight ZoneInsight `json:"zoneInsight"`
}

// ZoneSpec is a Zone's spec in an overview.
type ZoneSpec struct {
	Enabled *bool `json:"enabled,omitempty"`
}

// ZoneInsight is Kuma's zone insight: the zone's KDS subscriptions, the
// last one the current (or last) stream, and its last health check.
// meshnames keeps one stream per zone, so there is at most one
// subscription.
type ZoneInsight struct {
	Subscriptions []KDSSubscription `json:"subscriptions,omitempty"`
	HealthCheck   *HealthCheck      `json:"healthCheck,omitempty"`
}

// KDSSubscription is one stream of a zone to the global. Kuma shows a zone
// online while its last subscription has no disconnectTime.
type KDSSubscription struct {
	// ID is unique per stream: the global instance and the stream's
	// number there.
	ID               string     `json:"id"`
	GlobalInstanceID string     `json:"globalInstanceId"`
	ConnectTime      time.Time  `json:"connectTime"`
	DisconnectTime   *time.Time `json:"disconnectTime,omitempty"`
	Status           KDSStatus  `json:"status"`
	Version          *Version   `json:"version,omitempty"`
	// AuthTokenProvided is true: every meshnames stream is authenticated
	// by a zone token.
	AuthTokenProvided bool `json:"authTokenProvided"`
}

// KDSStatus is a subscription's status. Kuma's counts of KDS responses
// (total, stat) are not given: meshnames counts resources and bytes, not
// responses, and does not give its counts another meaning.
type KDSStatus struct {
	LastUpdateTime *time.Time `json:"lastUpdateTime,omitempty"`
	Total          struct{}   `json:"total"`
}

// Version is the zone control plane's version, under kumaCp as Kuma has
// it.
type Version struct {
	KumaCP KumaCPVersion `json:"kumaCp"`
}

// KumaCPVersion is a control plane's version.
type KumaCPVersion struct {
	Version string `json:"version"`
}

// HealthCheck is when the global last heard from the zone.
type HealthCheck struct {
	Time time.Time `json:"time"`
}

// insightOmitted are the native insight's fields Kuma's zone insight has
// no place for.
var insightOmitted = []Omission{
	{Field: "sent", Reason: "Kuma counts KDS responses; the revisions, resources, bytes and full states sent to the zone have no place in its subscription"},
	{Field: "received", Reason: "Kuma's subscription has no counts of what the zone sent"},
	{Field: "refused", Reason: "Kuma's subscription has no count of what the global refused from the zone"},
	{Field: "lastError", Reason: "Kuma's subscription has no error"},
	{Field: "streams", Reason: "meshnames keeps the current or last stream, not each one"},
}

// ToKumaInsight returns the native insight of a zone (GET
// /zones/{name}/_insight) in Kuma's shape: one subscription for the
// current or last stream, none when the zone never connected. While the
// zone is offline the subscription's disconnectTime is when the global
// last heard from it.
func ToKumaInsight(in api.ZoneInsight) ZoneInsight {
	if in.ConnectedSince.IsZero() {
		return ZoneInsight{}
	}
	sub := KDSSubscription{
		ID:               in.Instance + "/" + strconv.FormatInt(in.Streams, 10),
		GlobalInstanceID: in.Instance,
		ConnectTime:      in.ConnectedSince.UTC(),
		Status:           KDSStatus{LastUpdateTime: timeOrNil(in.LastSeen)},
		// A meshnames stream is always authenticated by a zone token.
		AuthTokenProvided: true,
	}
	if !in.Online {
		t := in.LastSeen
		if t.Before(in.ConnectedSince) {
			t = in.ConnectedSince
		}
		sub.DisconnectTime = timeOrNil(t)
	}
	if in.Version != "" {
		sub.Version = &Version{KumaCP: KumaCPVersion{Version: in.Version}}
	}
	out := ZoneInsight{Subscriptions: []KDSSubscription{sub}}
	if !in.LastSeen.IsZero() {
		out.HealthCheck = &HealthCheck{Time: in.LastSeen.UTC()}
	}
	return out
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// zonesOverview lists the stored Zones in Kuma's overview shape, each
// with its insight from the native GET /zones/{name}/_insight; a control
// plane that keeps no insights (not a global) answers that 404, and the
// zones have an empty zoneInsight.
func (a *adapter) zonesOverview(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, &Error{Status: http.StatusMethodNotAllowed, Title: "Method not allowed", Detail: r.Method + " is not supported here; use GET"})
		return
	}
	res := a.call(r, http.MethodGet, "/zones", r.URL.Query(), nil)
	var page nativeList
	if res.status != http.StatusOK || json.Unmarshal(res.body, &page) != nil {
		a.passError(w, res, resource.Zone)
		return
	}
	out := List{Total: page.Total, Items: make([]any, 0, len(page.Items))}
	for _, o := range page.Items {
		d := ToKuma(o).(*zoneDoc)
		item := ZoneOverview{Meta: Meta{Type: "ZoneOverview", Name: o.Name, CreationTime: d.CreationTime,
			ModificationTime: d.ModificationTime, Labels: o.Labels}, Zone: ZoneSpec{Enabled: d.Enabled}}
		path := "/zones/" + url.PathEscape(o.Name) + "/_insight"
		res := a.call(r, http.MethodGet, path, nil, nil)
		var in api.ZoneInsight
		switch {
		case res.status == http.StatusNotFound:
			// Not a global (or the zone went meanwhile): no insight.
		case res.status != http.StatusOK || json.Unmarshal(res.body, &in) != nil:
			a.passError(w, res, resource.Zone)
			return
		default:
			item.ZoneInsight = ToKumaInsight(in)
			item.Meshnames = &Extra{Native: path, Omitted: insightOmitted}
		}
		out.Items = append(out.Items, item)
	}
	out.Next = nextAt(r, page.Next)
	writeJSON(w, http.StatusOK, out)
}
