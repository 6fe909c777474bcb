package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// kumaZonesOverview is the part of /kuma/zones/_overview the test reads.
type kumaZonesOverview struct {
	Items []struct {
		Name        string `json:"name"`
		ZoneInsight struct {
			Subscriptions []struct {
				GlobalInstanceID string     `json:"globalInstanceId"`
				ConnectTime      time.Time  `json:"connectTime"`
				DisconnectTime   *time.Time `json:"disconnectTime"`
				Version          struct {
					KumaCP struct {
						Version string `json:"version"`
					} `json:"kumaCp"`
				} `json:"version"`
			} `json:"subscriptions"`
		} `json:"zoneInsight"`
		Meshnames struct {
			Native string `json:"native"`
		} `json:"meshnames"`
	} `json:"items"`
}

func getBody(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestZoneInsight_KumaAndGUI runs a global and a zone as real processes:
// the global's Kuma overview and GUI show the zone's stream as its native
// insight does, online; after kill -9 of the zone, the global finds it
// silent and all three show it offline.
func TestZoneInsight_KumaAndGUI(t *testing.T) {
	g := startEmbeddedGlobal(t, "global")
	east := startZone(t, "east", "east", g.syncAddr, g.cliToken(t, "east"), t.TempDir())
	waitFor(t, 20*time.Second, "east online on the global", func() bool { return insight(t, g.proc, "east").Online })

	check := func(online bool) bool {
		in := insight(t, g.proc, "east")
		_, body := getBody(t, g.api+"/kuma/zones/_overview")
		var ov kumaZonesOverview
		if err := json.Unmarshal(body, &ov); err != nil {
			t.Fatalf("/kuma/zones/_overview: %v\n%s", err, body)
		}
		_, page := getBody(t, g.api+"/gui/zones")
		if in.Online != online || len(ov.Items) != 1 || len(ov.Items[0].ZoneInsight.Subscriptions) != 1 {
			return false
		}
		sub := ov.Items[0].ZoneInsight.Subscriptions[0]
		state := `<span class="ok">● online</span>`
		if !online {
			state = `<span class="bad">○ offline</span>`
		}
		return ov.Items[0].Name == "east" && ov.Items[0].Meshnames.Native == "/zones/east/_insight" &&
			sub.GlobalInstanceID == in.Instance && sub.ConnectTime.Equal(in.ConnectedSince) &&
			sub.Version.KumaCP.Version == in.Version && (sub.DisconnectTime == nil) == online &&
			(online || sub.DisconnectTime.Equal(in.LastSeen)) &&
			strings.Contains(string(page), `<td class="state">`+state+`</td>`)
	}
	waitFor(t, 10*time.Second, "the Kuma overview and the GUI show east online as its insight does", func() bool { return check(true) })

	east.kill()
	waitFor(t, 10*time.Second, "the Kuma overview and the GUI show east offline as its insight does", func() bool { return check(false) })
}
