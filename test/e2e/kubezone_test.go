package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/kubeapi/kubetest"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/zonesync"
)

// startKubeZone runs zone of g in env kubernetes on c, as the meshnames
// user bound to the roles of meshnames install control-plane.
func startKubeZone(t *testing.T, c *kubetest.Cluster, name, zone string, g *global, tokenFile string) *proc {
	t.Helper()
	p := start(t, name, "--env", "kubernetes", "--kubeconfig", c.MeshnamesKubeconfig, "--mode", "zone", "--zone", zone,
		"--global-address", "grpcs://"+g.syncAddr, "--zone-token-file", tokenFile, "--sync-heartbeat", "300ms")
	p.waitReady(60 * time.Second)
	return p
}

// kubeService is a ClusterIP Service of namespace $NS with one HTTP port
// and, when export is set, the annotation kuma.io/export-mode.
func kubeService(name, export string) string {
	ann := ""
	if export != "" {
		ann = fmt.Sprintf(", annotations: {kuma.io/export-mode: %q}", export)
	}
	return fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: $NS%s}\nspec:\n  ports: [{name: http, port: 80, appProtocol: http}]\n", name, ann)
}

// named reports whether m has the hostname with an Available address, its
// first (a Service's service-tag names follow), and one VIP.
func named(m *msView, hostname string) bool {
	return m != nil && len(m.Status.VIPs) == 1 && len(m.Status.Addresses) >= 1 &&
		m.Status.Addresses[0].Hostname == hostname && m.Status.Addresses[0].Status == "Available"
}

// TestMultizone_KubernetesZone runs a universal global (embedded store), a
// universal zone west and a zone east in env kubernetes against a real API
// server, all as real processes. A Service of a meshed namespace of east
// reaches the global and west, where west names it with the synced
// Kubernetes generator and answers it; a MeshService of west reaches east
// as a custom resource in the system namespace with its hashed name
// (seed 002), named and answered there, as does a MeshExternalService of
// the global. An unexported Service stays home,
// a deleted one leaves west, and east converges after a kill -9: the
// global resumes its feed to east, and east sends its full state once.
func TestMultizone_KubernetesZone(t *testing.T) {
	c := kube(t)
	began := time.Now()
	g := startEmbeddedGlobal(t, "global")
	west := startZone(t, "west", "west", g.syncAddr, g.cliToken(t, "west"), t.TempDir())
	eastToken := g.cliToken(t, "east")
	east := startKubeZone(t, c, "east", "east", g, eastToken)
	waitDefaultMesh(t, west)
	waitDefaultMesh(t, east)
	const ns = "mz-shop"
	meshedNamespace(t, c, ns)

	// A Service of east: its MeshService web.mz-shop has its ClusterIP in
	// east, reaches the global under seed 002's hashed name and west,
	// which names it and gives it a VIP of its own.
	kubeApply(t, c, ns, kubeService("web", ""))
	ip := clusterIP(t, c, ns, "web")
	waitMS(t, east.api, "web."+ns, "its ClusterIP and local hostname", 30*time.Second, func(m *msView) bool {
		return named(m, "web."+ns+".svc.mesh.local") && m.Status.VIPs[0].IP == ip
	})
	webSynced := zonesync.HashedName(resource.MeshService, "default", "web", "east", ns)
	onGlobal := waitMS(t, g.api, webSynced, "on the global", 30*time.Second, func(m *msView) bool { return m != nil })
	for k, v := range map[string]string{resource.LabelOrigin: "zone", resource.LabelZone: "east", resource.LabelDisplayName: "web",
		resource.LabelNamespace: ns, resource.LabelEnv: "kubernetes", "k8s.kuma.io/service-name": "web"} {
		if onGlobal.Labels[k] != v {
			t.Errorf("the global's %s: label %s = %q, want %q (labels %v)", webSynced, k, onGlobal.Labels[k], v, onGlobal.Labels)
		}
	}
	webHost := "web." + ns + ".svc.east.mesh.local"
	inWest := waitMS(t, west.api, webSynced, "named in west", 30*time.Second, func(m *msView) bool { return named(m, webHost) })
	if vip := inWest.Status.VIPs[0]; vip.Type != "Kuma" || !strings.HasPrefix(vip.IP, "241.") {
		t.Errorf("west's VIP of %s = %+v, want one of its own pool (ClusterIPs do not travel)", webSynced, vip)
	}
	waitDNS(t, west.dns, webHost, inWest.Status.VIPs[0].IP)

	// A MeshService of west reaches east as a custom resource in the
	// system namespace under its hashed name, labelled origin global, and
	// east names it with the synced universal generator.
	if code := put(t, west.api, msPath("redis"), service("redis", 6379, "")); code != http.StatusCreated {
		t.Fatalf("PUT redis in west = %d", code)
	}
	redisSynced := zonesync.HashedName(resource.MeshService, "default", "redis", "west", "")
	redisHost := "redis.svc.west.mesh.local"
	inEast := waitMS(t, east.api, redisSynced, "named in east", 30*time.Second, func(m *msView) bool { return named(m, redisHost) })
	if inEast.Labels[resource.LabelOrigin] != "global" || inEast.Labels[resource.LabelZone] != "west" || inEast.Labels[resource.LabelDisplayName] != "redis" {
		t.Errorf("east's %s: labels %v, want origin global, zone west, display name redis", redisSynced, inEast.Labels)
	}
	waitDNS(t, east.dns, redisHost, inEast.Status.VIPs[0].IP)
	msr := kubeapi.Resource{Group: "kuma.io", Version: "v1alpha1", Resource: "meshservices", Namespaced: true}
	var cr struct {
		Metadata kubeapi.ObjectMeta `json:"metadata"`
		Status   struct {
			Addresses []struct{ Hostname string } `json:"addresses"`
			VIPs      []struct{ IP string }       `json:"vips"`
		} `json:"status"`
	}
	if err := c.Client.Get(t.Context(), msr, "meshnames-system", redisSynced, &cr); err != nil {
		t.Fatalf("the custom resource of %s in the system namespace: %v", redisSynced, err)
	}
	if cr.Metadata.Labels[resource.LabelOrigin] != "global" || len(cr.Status.VIPs) != 1 || cr.Status.VIPs[0].IP != inEast.Status.VIPs[0].IP ||
		len(cr.Status.Addresses) < 1 || cr.Status.Addresses[0].Hostname != redisHost {
		t.Errorf("the custom resource of %s: labels %v, status %+v", redisSynced, cr.Metadata.Labels, cr.Status)
	}

	// A MeshExternalService of the global reaches east's system namespace
	// too, and keeps the display name its synced generator names it by.
	if code := put(t, g.api, "/meshes/default/meshexternalservices/httpbin", `{"type":"MeshExternalService","name":"httpbin","mesh":"default",
		"spec":{"match":[{"type":"Domain","value":"httpbin.org","port":443,"protocol":"tls"}]}}`); code != http.StatusCreated {
		t.Fatalf("PUT httpbin on the global = %d", code)
	}
	if ip := waitAnswer(t, east, "httpbin.extsvc.mesh.local"); !strings.HasPrefix(ip, "242.") {
		t.Errorf("east answers httpbin.extsvc.mesh.local with %s, want a VIP of 242.0.0.0/8", ip)
	}
	mesr := kubeapi.Resource{Group: "kuma.io", Version: "v1alpha1", Resource: "meshexternalservices", Namespaced: true}
	if err := c.Client.Get(t.Context(), mesr, "meshnames-system", zonesync.HashedName(resource.MeshExternalService, "default", "httpbin", "", ""), nil); err != nil {
		t.Errorf("the custom resource of the global's httpbin in east: %v", err)
	}

	// Each zone's ingress reaches the other: west's is a custom resource
	// in east's system namespace, and east's, written with kubectl in its
	// system namespace, reaches west; each keeps its kuma.io/zone.
	if code := put(t, west.api, "/zoneingresses/ingress-1", `{"type":"ZoneIngress","name":"ingress-1",
		"networking":{"address":"192.168.1.1","port":10001}}`); code != http.StatusCreated {
		t.Fatalf("PUT the ingress in west = %d", code)
	}
	westIngress := zonesync.HashedName(resource.ZoneIngress, "", "ingress-1", "west", "")
	waitFor(t, 30*time.Second, "east holds west's ingress", func() bool {
		got := zoneIngresses(t, east, "west")
		return len(got) == 1 && got[0].Name == westIngress
	})
	zir := kubeapi.Resource{Group: "kuma.io", Version: "v1alpha1", Resource: "zoneingresses", Namespaced: true}
	if err := c.Client.Get(t.Context(), zir, "meshnames-system", westIngress, nil); err != nil {
		t.Errorf("the custom resource of west's ingress in east: %v", err)
	}
	kubeApply(t, c, "meshnames-system", `apiVersion: kuma.io/v1alpha1
kind: ZoneIngress
metadata: {name: ingress-1, namespace: $NS}
spec:
  networking: {address: 10.0.0.1, port: 10001, advertisedAddress: ingress.east.example.com, advertisedPort: 443}
`)
	eastIngress := zonesync.HashedName(resource.ZoneIngress, "", "ingress-1", "east", "meshnames-system")
	waitFor(t, 30*time.Second, "west holds east's ingress", func() bool {
		got := zoneIngresses(t, west, "east")
		return len(got) == 1 && got[0].Name == eastIngress &&
			got[0].Spec.(*resource.ZoneIngressSpec).Networking.AdvertisedAddress == "ingress.east.example.com"
	})

	// kuma.io/export-mode: None keeps a Service home: the global has it,
	// marked None, and west does not, though a Service created after it
	// has arrived there.
	kubeApply(t, c, ns, kubeService("private", "None"))
	privateSynced := zonesync.HashedName(resource.MeshService, "default", "private", "east", ns)
	waitFor(t, 30*time.Second, "the global has private, export None", func() bool {
		resp, err := http.Get(g.api + msPath(privateSynced))
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"mode":"None"`)
	})
	kubeApply(t, c, ns, kubeService("marker", ""))
	waitAnswer(t, west, "marker."+ns+".svc.east.mesh.local")
	if m, err := getMS(west.api, privateSynced); err != nil || m != nil {
		t.Errorf("west has the unexported private: %+v, %v", m, err)
	}
	if ip := lookup(t, west, "private."+ns+".svc.east.mesh.local"); ip != "" {
		t.Errorf("west answers the unexported private: %s", ip)
	}

	// Deleting the Service takes its MeshService out of west.
	if err := c.Client.Delete(t.Context(), kubeapi.Services, ns, "web", kubeapi.Preconditions{}); err != nil {
		t.Fatal(err)
	}
	waitNoAnswer(t, west, webHost)
	waitMS(t, west.api, webSynced, "deleted in west", 30*time.Second, func(m *msView) bool { return m == nil })
	waitMS(t, g.api, webSynced, "deleted on the global", 30*time.Second, func(m *msView) bool { return m == nil })

	// kill -9 of east: while it is down, a Service is created in its
	// cluster and a MeshService in west. The new process answers what it
	// had at once, and both changes arrive.
	before := insight(t, g.proc, "east")
	east.kill()
	kubeApply(t, c, ns, kubeService("later", ""))
	if err := c.Client.Delete(t.Context(), kubeapi.Services, ns, "marker", kubeapi.Preconditions{}); err != nil {
		t.Fatal(err)
	}
	if code := put(t, west.api, msPath("while-away"), service("while-away", 80, "")); code != http.StatusCreated {
		t.Fatalf("PUT while-away in west = %d", code)
	}
	east = startKubeZone(t, c, "east-2", "east", g, eastToken)
	if ip := lookup(t, east, redisHost); ip != inEast.Status.VIPs[0].IP {
		t.Errorf("east after its restart answers %s with %q, want %s at once", redisHost, ip, inEast.Status.VIPs[0].IP)
	}
	waitAnswer(t, east, "while-away.svc.west.mesh.local")
	waitAnswer(t, west, "later."+ns+".svc.east.mesh.local")
	waitNoAnswer(t, west, "marker."+ns+".svc.east.mesh.local")
	waitFor(t, 20*time.Second, "the global sees east's new stream", func() bool { return insight(t, g.proc, "east").Streams > before.Streams })
	after := insight(t, g.proc, "east")
	t.Logf("east's stream after its restart: %d streams (before %d); full states: global to east %d, east to global %d; resources global to east %d, east to global %d",
		after.Streams, before.Streams, after.Sent.Snapshots, after.Received.Snapshots, after.Sent.Resources, after.Received.Resources)
	// east keeps how far it has the global's feed in a Lease, so the
	// global resumes; the Kubernetes store's revisions are per process, so
	// east's new process sends its full state once, and the global deletes
	// what it left out (marker, deleted while east was down).
	if after.Sent.Snapshots != 0 || after.Received.Snapshots != 1 {
		t.Errorf("full states after east's restart: global to east %d, east to global %d; want 0 and 1", after.Sent.Snapshots, after.Received.Snapshots)
	}
	if m, err := getMS(g.api, zonesync.HashedName(resource.MeshService, "default", "private", "east", ns)); err != nil || m == nil {
		t.Errorf("the global lost east's private across east's restart: %v", err)
	}
	// Both ends of east's stream compared inventories, the Kubernetes
	// store's names against the global's, and agreed.
	g.proc.waitLog(t, " peer=east resources=", 30*time.Second)
	east.waitLog(t, " peer=global resources=", 30*time.Second)
	for _, p := range []*proc{g.proc, east} {
		if strings.Contains(p.log.String(), "differs from the peer's inventory") {
			t.Errorf("%s found an inventory that differed from what it held", p.name)
		}
	}
	t.Logf("TestMultizone_KubernetesZone took %s", time.Since(began).Round(time.Millisecond))
}
