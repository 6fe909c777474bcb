package kuma

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/apiserver"
	"github.com/meshnames/meshnames/internal/resource"
)

// TestToKumaInsight_Golden renders each native insight of
// testdata/zoneinsight as Kuma's zone insight.
func TestToKumaInsight_Golden(t *testing.T) {
	golden(t, "zoneinsight", "native.json", "kuma.json", func(t *testing.T, input []byte) string {
		var in api.ZoneInsight
		if err := json.Unmarshal(input, &in); err != nil {
			t.Fatalf("native.json: %v", err)
		}
		return indent(t, ToKumaInsight(in))
	})
}

// globalEnv runs the real API of a global control plane holding zones,
// whose insights are insights[zone] (an error for a zone not there), with
// the adapter mounted.
func globalEnv(t *testing.T, insights map[string]api.ZoneInsight, zones ...string) string {
	t.Helper()
	var objs []*resource.Object
	for _, z := range zones {
		objs = append(objs, &resource.Object{Kind: resource.Zone, Name: z, Spec: &resource.ZoneSpec{}})
	}
	return newEnvWith(t, resource.ModeGlobal, func(o *apiserver.Options) {
		o.ZoneInsight = func(_ context.Context, zone string) (api.ZoneInsight, error) {
			in, ok := insights[zone]
			if !ok {
				return api.ZoneInsight{}, errors.New("the store is away")
			}
			return in, nil
		}
	}, objs...).url
}

func getJSON(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// On a global, each zone of the overview carries its insight from the
// native _insight body, in Kuma's shape, and says where the whole insight
// is; what the native call refuses is the overview's answer.
func TestZonesOverview_CarriesTheInsights(t *testing.T) {
	since := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	insights := map[string]api.ZoneInsight{
		"east": {Zone: "east", Online: true, ConnectedSince: since, LastSeen: since.Add(time.Minute), Instance: "g1", Version: "0.9.0", Streams: 1},
		"west": {Zone: "west", Online: false, ConnectedSince: since, LastSeen: since.Add(2 * time.Minute), Instance: "g2", Streams: 3},
	}
	url := globalEnv(t, insights, "east", "west")
	code, body := getJSON(t, url+"/kuma/zones/_overview")
	var page struct {
		Total int            `json:"total"`
		Items []ZoneOverview `json:"items"`
	}
	if err := json.Unmarshal(body, &page); err != nil || code != http.StatusOK {
		t.Fatalf("GET /kuma/zones/_overview = %d %s (%v)", code, body, err)
	}
	if page.Total != 2 || len(page.Items) != 2 {
		t.Fatalf("overview: %s", body)
	}
	for _, it := range page.Items {
		if d := cmp.Diff(ToKumaInsight(insights[it.Name]), it.ZoneInsight); d != "" {
			t.Errorf("zoneInsight of %s (-want +got):\n%s", it.Name, d)
		}
		if it.Meshnames == nil || it.Meshnames.Native != "/zones/"+it.Name+"/_insight" {
			t.Errorf("meshnames of %s = %+v, want the native insight's path", it.Name, it.Meshnames)
		}
	}
	east, west := page.Items[0].ZoneInsight.Subscriptions, page.Items[1].ZoneInsight.Subscriptions
	if len(east) != 1 || east[0].DisconnectTime != nil || len(west) != 1 || west[0].DisconnectTime == nil ||
		!west[0].DisconnectTime.Equal(since.Add(2*time.Minute)) {
		t.Errorf("east online and west offline since it was last seen; got %s", body)
	}

	// A zone whose insight cannot be read fails the overview with the
	// native error, rather than showing it as never connected.
	url = globalEnv(t, insights, "east", "broken")
	if code, body := getJSON(t, url+"/kuma/zones/_overview"); code != http.StatusInternalServerError {
		t.Errorf("overview with an unreadable insight = %d %s, want 500", code, body)
	}
}

// Elsewhere (no insights: the native _insight answers 404) the zones have
// an empty zoneInsight and no meshnames field.
func TestZonesOverview_NoInsightsOffTheGlobal(t *testing.T) {
	e := newEnv(t)
	if r := e.do(http.MethodPut, "/kuma/zones/west", `{"type":"Zone","name":"west"}`); r.code != http.StatusCreated {
		t.Fatalf("PUT zone = %d %s", r.code, r.body)
	}
	r := e.do(http.MethodGet, "/kuma/zones/_overview", "")
	var page struct {
		Items []map[string]json.RawMessage `json:"items"`
	}
	r.json(t, &page)
	if r.code != http.StatusOK || len(page.Items) != 1 || string(page.Items[0]["zoneInsight"]) != "{}" || page.Items[0]["meshnames"] != nil {
		t.Errorf("zones/_overview = %d %s, want one zone with zoneInsight {} and no meshnames", r.code, r.body)
	}
}
