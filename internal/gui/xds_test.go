package gui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meshnames/meshnames/internal/api"
)

// The resource types of ADS, as a proxy names them.
const (
	clusterURL  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	endpointURL = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	listenerURL = "type.googleapis.com/envoy.config.listener.v3.Listener"
)

// nackMessage is what the test's proxy answers to every listener
// response; it carries markup, which the page must show as text.
const nackMessage = `listener rejected by the test: <no route "x">`

// proxyMesh is a Dataplane that only calls (client), one that serves
// the MeshService web, and a MeshService that selects no Dataplane (its
// cluster has no endpoints: a note).
const proxyMesh = `
type: Dataplane
mesh: default
name: client
networking:
  address: 127.0.0.1
---
type: Dataplane
mesh: default
name: web-1
networking:
  address: 127.0.0.1
  inbound:
  - port: 7001
    name: grpc
    tags:
      kuma.io/service: web
---
type: MeshService
mesh: default
name: web
spec:
  selector:
    dataplaneTags:
      kuma.io/service: web
  ports:
  - port: 8080
    targetPort: grpc
    appProtocol: grpc
---
type: MeshService
mesh: default
name: lonely
spec:
  selector:
    dataplaneTags:
      kuma.io/service: nobody
  ports:
  - port: 9090
    appProtocol: tcp
`

// connectProxy opens a state-of-the-world ADS stream as node, subscribes
// to every resource of CDS, EDS and LDS, ACKs the clusters and endpoints
// it gets and NACKs the listeners, until the returned function ends the
// stream.
func connectProxy(t *testing.T, addr, node string) (disconnect func()) {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{clusterURL, endpointURL, listenerURL} {
		if err := s.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: node}, TypeUrl: url}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		acked := map[string]string{}
		for {
			r, err := s.Recv()
			if err != nil {
				return // the stream ended
			}
			req := &discovery.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()}
			if r.GetTypeUrl() == listenerURL {
				req.VersionInfo = acked[r.GetTypeUrl()]
				req.ErrorDetail = &statuspb.Status{Code: 3, Message: nackMessage}
			} else {
				req.VersionInfo = r.GetVersionInfo()
				acked[r.GetTypeUrl()] = r.GetVersionInfo()
			}
			if s.Send(req) != nil {
				return
			}
		}
	}()
	stop := func() {
		cancel()
		<-done
		cc.Close()
	}
	t.Cleanup(stop)
	return stop
}

// settledXDS reads GET .../_xds until the proxy's one stream has answered
// every response: CDS and EDS ACKed, LDS NACKed, nothing waiting.
func (e *env) settledXDS(path string) api.XDSInspection {
	e.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var in api.XDSInspection
		e.getJSON(path, &in)
		if settled(in) {
			return in
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the proxy's stream did not settle within 15s: %+v", in.Streams)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func settled(in api.XDSInspection) bool {
	if len(in.Streams) != 1 || len(in.Streams[0].Types) != 3 {
		return false
	}
	for _, ty := range in.Streams[0].Types {
		switch {
		case ty.Pending || ty.Responses == 0:
			return false
		case ty.Type == "LDS" && ty.Nack == nil:
			return false
		case ty.Type != "LDS" && (ty.Nack != nil || ty.AckedVersion != ty.SentVersion):
			return false
		}
	}
	return true
}

// TestDataplane_ShowsTheProxysStreams connects a real ADS client as the
// proxy of Dataplane client and checks its page against GET .../_xds:
// not connected to this instance first; then connected, since when, the
// protocol and peer, each type's ACKed version and time with nothing
// waiting, the NACK of LDS with its message above the streams, the notes
// and the config; the list says connected with a NACK; and both say not
// connected once the stream ends.
func TestDataplane_ShowsTheProxysStreams(t *testing.T) {
	e := newEnv(t, proxyMesh)
	const page, apiPath = "/gui/dataplanes/default/client", "/meshes/default/dataplanes/client/_xds"
	var before api.XDSInspection
	e.getJSON(apiPath, &before)
	e.eventually(page, "○ not connected to this instance", esc(before.Instance))
	e.eventually("/gui/dataplanes", `href="/gui/dataplanes/default/client"`, `href="/gui/dataplanes/default/web-1"`, "7001 (grpc) web")
	e.eventually("/gui/services/meshservices/default/web", "web.svc.mesh.local", "241.0.0.")

	var addr string
	select {
	case addr = <-e.xds:
	case <-time.After(10 * time.Second):
		t.Fatal("the ADS server did not listen")
	}
	disconnect := connectProxy(t, addr, "default.client")

	// The page and the API read at different moments: compare them once
	// the API reads the same before and after the page.
	var in api.XDSInspection
	var body string
	for deadline := time.Now().Add(15 * time.Second); ; {
		in = e.settledXDS(apiPath)
		_, body = e.get(page, "text/html")
		after := e.settledXDS(apiPath)
		if cmp.Equal(in, after) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy's state kept changing:\n%s", cmp.Diff(in, after))
		}
	}
	st := in.Streams[0]
	mustContain(t, body, "proxy state",
		`<p id="proxy-state"><span class="ok">● connected</span> to this instance, <code>`+esc(in.Instance)+`</code>.</p>`,
		`<dd class="protocol">state of the world (sotw)</dd>`,
		`<dd class="peer"><code>`+esc(st.Peer)+`</code></dd>`,
		"<dt>Connected</dt><dd>"+st.ConnectedAt.UTC().Format("2006-01-02 15:04:05Z"))
	for _, ty := range st.Types {
		row := between(t, body, `<tr id="stream-1-`+ty.Type+`">`, "</tr>")
		want := []string{`<td class="waiting">no</td>`, "every resource (wildcard)", fmt.Sprintf("nonce %s,", ty.SentNonce)}
		if ty.Type == "LDS" {
			want = append(want, `<td class="nack"><span class="bad">✗ version <code>`+esc(ty.Nack.Version)+`</code></span>`, esc(nackMessage))
		} else {
			want = append(want, `<td class="acked"><code>`+esc(ty.AckedVersion)+`</code></td>`,
				`<td class="acked-at">`+ty.AckedAt.UTC().Format("2006-01-02 15:04:05Z"), `<td class="nack"><span class="none">none</span></td>`)
		}
		mustContain(t, row, ty.Type, want...)
	}
	// The NACK stands above the streams, with its message as text.
	nack := between(t, body, `<p class="message nack" id="nack-1-LDS">`, "</p>")
	mustContain(t, nack, "the NACK", "the proxy rejected LDS", `<span class="nack-message">`+esc(nackMessage)+"</span>")
	if strings.Index(body, `id="nack-1-LDS"`) > strings.Index(body, `id="stream-1-types"`) {
		t.Error("the NACK is shown after the stream's table")
	}
	if len(in.Notes) == 0 {
		t.Fatal("the API has no note on the cluster of lonely, which has no endpoints")
	}
	notes := between(t, body, `<ul id="notes">`, "</ul>")
	for _, n := range in.Notes {
		mustContain(t, notes, "notes", "<li>"+esc(n)+"</li>")
	}
	var dump struct {
		Configs []struct {
			Clusters []json.RawMessage `json:"dynamicActiveClusters"`
		} `json:"configs"`
	}
	if err := json.Unmarshal(in.Config, &dump); err != nil {
		t.Fatal(err)
	}
	clusters := 0
	for _, c := range dump.Configs {
		clusters += len(c.Clusters)
	}
	config := between(t, body, `<details id="xds-config">`, "</details>")
	mustContain(t, config, "config", fmt.Sprintf(", %d clusters,", clusters), "web_msvc_8080", "lonely_msvc_9090")

	// The list says it too, in a few words.
	e.eventually("/gui/dataplanes?q=client", `<td class="proxy"><span class="ok">● connected</span> (sotw) <span class="bad">✗ NACK: LDS</span></td>`)

	disconnect()
	e.eventually(page, "○ not connected to this instance")
	e.eventually("/gui/dataplanes?q=client", `<td class="proxy"><span class="pending">○ not connected</span></td>`)
}

func mustContain(t *testing.T, s, what string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("%s: missing %q in\n%s", what, w, s)
		}
	}
}

// between returns the part of page from start to the end mark after it.
func between(t *testing.T, page, start, end string) string {
	t.Helper()
	i := strings.Index(page, start)
	if i < 0 {
		t.Fatalf("no %s in the page:\n%s", start, page)
	}
	j := strings.Index(page[i:], end)
	if j < 0 {
		t.Fatalf("%s is not closed by %s", start, end)
	}
	return page[i : i+j]
}
