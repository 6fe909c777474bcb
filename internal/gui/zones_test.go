package gui

import (
	"strings"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/resource"
)

// A zone's pages say what they know of its stream in each state: run on
// another instance, not started, up; every few seconds they are fetched
// again. A standalone control plane's are not.
func TestZones_TheLinkOfAZone(t *testing.T) {
	up := api.ZoneInsight{Zone: "east", Online: true, ConnectedSince: created, LastSeen: unitNow.Add(-time.Second), Instance: "g1", Streams: 1}
	down := up
	down.Online, down.LastSeen, down.LastError, down.LastErrorTime = false, created.Add(time.Minute), "the global ended the stream", created.Add(time.Minute)
	tests := []struct {
		name      string
		link      *GlobalLink
		want      []string // on /gui/zones
		overview  []string // on /gui/
		notWanted []string
	}{
		{name: "standalone", want: []string{"This is a standalone control plane: it has no global and keeps no zone insights."},
			notWanted: []string{"data-every"}},
		{name: "not-leading", link: &GlobalLink{Address: "grpcs://g:5685", Insight: up},
			want:      []string{`data-every="2"`, "This instance does not lead its zone: only the leader runs the stream to the global."},
			overview:  []string{`data-every="5"`, "this instance does not lead, the leader runs the stream."},
			notWanted: []string{"● online"}},
		{name: "never-connected", link: &GlobalLink{Address: "grpcs://g:5685", Leading: true, Insight: api.ZoneInsight{Zone: "east"}},
			want:     []string{`<span class="pending">○ not connected</span>: no stream to the global has started since this instance began to lead.`},
			overview: []string{`<span class="pending">○ not connected</span> since this instance began to lead (the log says why).`}},
		{name: "offline", link: &GlobalLink{Address: "grpcs://g:5685", Leading: true, Insight: down},
			want: []string{`<dd id="link-state"><span class="bad">○ offline</span></dd>`, "<dt>Since</dt><dd>2026-01-02 03:05:05Z <span class=\"count\">(9m ago)</span></dd>",
				`<span class="reason">the global ended the stream</span> <span class="count">(9m ago)</span>`},
			overview: []string{`<span class="bad">○ offline</span> since 2026-01-02 03:05:05Z`, "last error: <span class=\"reason\">the global ended the stream</span>"}},
		{name: "online", link: &GlobalLink{Address: "grpcs://g:5685", Leading: true, Insight: up},
			want:     []string{`<dd id="link-state"><span class="ok">● online</span></dd>`, "<dt>Last heard from the global</dt><dd>1s ago"},
			overview: []string{`<span class="ok">● online</span> since 2026-01-02 03:04:05Z <span class="count">(10m ago)</span>, last heard from the global 1s ago`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newUnitWith(t, []*resource.Object{mesh("default")}, func(o *Options) {
				if tt.link != nil {
					o.Mode, o.Zone = resource.ModeZone, "east"
					l := *tt.link
					o.GlobalLink = func() GlobalLink { return l }
				}
			})
			for path, want := range map[string][]string{"/gui/zones": tt.want, "/gui/": tt.overview} {
				code, body := u.get(t, path)
				if code != 200 {
					t.Fatalf("GET %s = %d", path, code)
				}
				for _, w := range want {
					if !strings.Contains(body, w) {
						t.Errorf("GET %s: missing %q in\n%s", path, w, body)
					}
				}
				for _, w := range tt.notWanted {
					if strings.Contains(body, w) {
						t.Errorf("GET %s: %q should not be there", path, w)
					}
				}
			}
		})
	}
}

func TestAgo(t *testing.T) {
	now := created
	for _, tt := range []struct {
		t    time.Time
		want string
	}{
		{time.Time{}, "-"},
		{now.Add(time.Second), "just now"},
		{now, "0s ago"},
		{now.Add(-59 * time.Second), "59s ago"},
		{now.Add(-time.Minute), "1m ago"},
		{now.Add(-59*time.Minute - 59*time.Second), "59m ago"},
		{now.Add(-47 * time.Hour), "47h ago"},
		{now.Add(-72 * time.Hour), "3d ago"},
	} {
		if got := ago(now, tt.t); got != tt.want {
			t.Errorf("ago(%s) = %q, want %q", now.Sub(tt.t), got, tt.want)
		}
	}
}
