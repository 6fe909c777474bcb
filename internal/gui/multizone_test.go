package gui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/client"
	"github.com/meshnames/meshnames/internal/config"
	"github.com/meshnames/meshnames/internal/porttest"
	"github.com/meshnames/meshnames/internal/server/servertest"
)

// freeAddr returns a loopback address for the global's sync listener,
// which the test must know before the global starts (porttest.Free: a port
// no other server of this process was given).
func freeAddr(t *testing.T) string {
	t.Helper()
	p, err := porttest.Free()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
}

// when formats a time as the GUI does.
func when(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }

// TestZones_ShowTheAPIsInsight runs a global and a zone in-process, the
// zone syncing with the global over loopback, and checks that the
// global's zones page and overview show what GET /zones/east/_insight
// answers, that the zone's pages show its own side of the same stream
// (which agrees with the global's once the stream is quiet), and that the
// global shows the zone offline once it stops.
func TestZones_ShowTheAPIsInsight(t *testing.T) {
	syncAddr := freeAddr(t)
	gcfg := config.Default()
	gcfg.Mode, gcfg.Zone = config.ModeGlobal, ""
	gcfg.Sync.Addr, gcfg.Sync.Heartbeat = syncAddr, config.Duration(300*time.Millisecond)
	g := &env{t: t, api: servertest.Start(t, gcfg, servertest.Options{})}
	g.waitReady()
	c, err := client.New(g.api)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := c.IssueZoneToken(context.Background(), "east", "1h")
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), "east.token")
	if err := os.WriteFile(tokenFile, []byte(tok.Token), 0o600); err != nil {
		t.Fatal(err)
	}

	var connected api.ZoneInsight
	t.Run("connected", func(t *testing.T) {
		zcfg := config.Default()
		zcfg.Mode, zcfg.Zone = config.ModeZone, "east"
		zcfg.Sync.GlobalAddress, zcfg.Sync.ZoneTokenFile = "grpcs://"+syncAddr, tokenFile
		zcfg.Sync.Heartbeat = config.Duration(300 * time.Millisecond)
		z := &env{t: t, api: servertest.Start(t, zcfg, servertest.Options{})}
		z.waitReady()
		g := &env{t: t, api: g.api}

		// Once the stream is quiet (everything sent is acknowledged, and
		// the insight is the same before and after the page was read,
		// its last-seen time aside), the page shows the insight's figures.
		deadline := time.Now().Add(30 * time.Second)
		for {
			before := g.insight("east")
			_, page := g.get("/gui/zones", "")
			_, overview := g.get("/gui/", "")
			_, zonePage := z.get("/gui/zones", "")
			_, zoneOverview := z.get("/gui/", "")
			after := g.insight("east")
			seen := after.LastSeen
			before.LastSeen, after.LastSeen = time.Time{}, time.Time{}
			quiet := before.Online && before.Sent.Revision > 0 && before.Sent.Acked == before.Sent.Revision && cmp.Equal(before, after)
			in := after
			want := map[string][]string{
				"global's zones page": {
					`<tr id="zone-east">`,
					`<td class="state"><span class="ok">● online</span></td>`,
					"<td>" + when(in.ConnectedSince) + ` <span class="count">(`,
					fmt.Sprintf(`<td class="sent">%d / %d</td>`, in.Sent.Revision, in.Sent.Acked),
					fmt.Sprintf(`<td class="received">%d</td>`, in.Received.Revision),
					fmt.Sprintf(`<td class="resources">%d / %d</td>`, in.Sent.Resources, in.Received.Resources),
					fmt.Sprintf(`<td class="bytes">%s B / %s B</td>`, thousands(in.Sent.Bytes), thousands(in.Received.Bytes)),
					fmt.Sprintf(`<td class="refused">%d</td>`, in.Refused),
					"<td><code>" + in.Instance + "</code></td>",
					"<td>" + in.Version + "</td>",
				},
				"global's overview": {
					"1 zone: 1 online, 0 offline.",
					`<tr id="overview-zone-east">`,
					"<td>" + when(in.ConnectedSince) + ` <span class="count">(`,
				},
				// The zone's side: the global instance, the global's feed
				// stored up to what the global saw acknowledged, and the
				// zone's feed acknowledged up to what the global stored.
				"zone's zones page": {
					`<dd id="link-state"><span class="ok">● online</span></dd>`,
					"<dt>Global instance</dt><dd><code>" + in.Instance + "</code></dd>",
					fmt.Sprintf("<dt>Global's feed stored here</dt><dd>revision %d</dd>", in.Sent.Acked),
					fmt.Sprintf(" / %d</dd>", in.Received.Revision),
					"grpcs://" + syncAddr,
				},
				"zone's overview": {`Zone east syncs with the global at <code>grpcs://` + syncAddr + `</code>:`, `<span class="ok">● online</span> since`},
			}
			bodies := map[string]string{"global's zones page": page, "global's overview": overview, "zone's zones page": zonePage, "zone's overview": zoneOverview}
			var missing []string
			for what, ws := range want {
				for _, w := range ws {
					if !strings.Contains(bodies[what], w) {
						missing = append(missing, what+": "+w)
					}
				}
			}
			if quiet && len(missing) == 0 {
				connected = in
				connected.LastSeen = seen
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the pages do not show the insight %+v (quiet: %v); missing:\n%s\n--- global's zones page:\n%s\n--- zone's zones page:\n%s",
					in, quiet, strings.Join(missing, "\n"), page, zonePage)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	if t.Failed() {
		return
	}

	// The zone stopped (the subtest's end): the global shows it offline
	// since it last heard from it, as the API says.
	deadline := time.Now().Add(15 * time.Second)
	for {
		in := g.insight("east")
		_, page := g.get("/gui/zones", "")
		_, overview := g.get("/gui/", "")
		ok := !in.Online && in.Streams == connected.Streams &&
			strings.Contains(page, `<td class="state"><span class="bad">○ offline</span></td>`) &&
			strings.Contains(page, "<td>"+when(in.LastSeen)+` <span class="count">(`) &&
			strings.Contains(overview, "1 zone: 0 online, 1 offline.")
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the global's pages do not show east offline as the API says (%+v):\n%s", in, page)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// insight returns the body of GET /zones/{zone}/_insight, empty while the
// zone has never connected (404).
func (e *env) insight(zone string) api.ZoneInsight {
	e.t.Helper()
	var in api.ZoneInsight
	code, body := e.get("/zones/"+zone+"/_insight", "application/json")
	switch code {
	case http.StatusNotFound:
	case http.StatusOK:
		if err := json.Unmarshal([]byte(body), &in); err != nil {
			e.t.Fatal(err)
		}
	default:
		e.t.Fatalf("GET /zones/%s/_insight: %d %s", zone, code, body)
	}
	return in
}

// thousands writes n as the GUI does, with thousands separators.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
