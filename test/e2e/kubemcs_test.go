package e2e

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/crd"
	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/kubeapi/kubetest"
)

// mcsObject is what the test reads of a ServiceExport or ServiceImport.
type mcsObject struct {
	Metadata kubeapi.ObjectMeta `json:"metadata"`
	Spec     struct {
		Type  string   `json:"type"`
		IPs   []string `json:"ips"`
		Ports []struct {
			Name, Protocol, AppProtocol string
			Port                        int
		} `json:"ports"`
	} `json:"spec"`
	Status struct {
		Conditions []struct{ Type, Status, Reason, Message string } `json:"conditions"`
		Clusters   []struct{ Cluster string }                       `json:"clusters"`
	} `json:"status"`
}

func (o *mcsObject) condition(typ string) (status, reason, msg string) {
	for _, c := range o.Status.Conditions {
		if c.Type == typ {
			return c.Status, c.Reason, c.Message
		}
	}
	return "", "", ""
}

// waitMCS polls the MCS object ns/name until cond holds (nil: absent).
func waitMCS(t *testing.T, c *kubetest.Cluster, r kubeapi.Resource, ns, name, what string, cond func(*mcsObject) bool) *mcsObject {
	t.Helper()
	var last *mcsObject
	waitFor(t, 30*time.Second, r.Resource+" "+ns+"/"+name+": "+what, func() bool {
		var o mcsObject
		err := c.Client.Get(t.Context(), r, ns, name, &o)
		last = &o
		if err != nil {
			last = nil
		}
		return cond(last)
	})
	return last
}

// installMCS installs the MCS CRDs for the test and removes them after,
// so that the other tests see a cluster without the API.
func installMCS(t *testing.T, c *kubetest.Cluster) {
	t.Helper()
	out, err := crd.MCSManifests()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(t.Context(), out); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// t.Context() is done by the time cleanups run.
		ctx := context.Background()
		for _, r := range []kubeapi.Resource{crd.ServiceExports, crd.ServiceImports} {
			if err := c.Client.Delete(ctx, kubeapi.CRDs, "", r.Resource+"."+crd.MCSGroup, kubeapi.Preconditions{}); err != nil {
				t.Errorf("removing the MCS CRDs: %v", err)
			}
		}
		// A CRD is deleted once its objects are: wait until the API is
		// no longer served, as the next test expects.
		waitFor(t, time.Minute, "the MCS API no longer served", func() bool {
			e, err1 := c.Client.Serves(ctx, crd.ServiceExports)
			i, err2 := c.Client.Serves(ctx, crd.ServiceImports)
			return err1 == nil && err2 == nil && !e && !i
		})
	})
}

// TestKube_MultiClusterServices runs a universal global, a universal
// zone west and a Kubernetes zone east on a real API server that serves
// the MCS API. A ServiceExport exports the MeshService of a Service whose
// annotation says None, and gets Valid, Ready and Conflict; west
// publishes a service of the same name and namespace (labelled as a
// Kubernetes zone's Service would be, so that it stands for a second
// cluster), first with another protocol on the same port: a Conflict,
// gone once the ports agree. East gives west's service a ServiceImport of
// type ClusterSetIP with the VIP DNS answers for
// web.<ns>.svc.clusterset.local, and a MeshMultiZoneService of the global
// one with its own VIP; both go when their services do.
func TestKube_MultiClusterServices(t *testing.T) {
	c := kube(t)
	installMCS(t, c)
	g := startEmbeddedGlobal(t, "global")
	west := startZone(t, "west", "west", g.syncAddr, g.cliToken(t, "west"), t.TempDir())
	east := startKubeZone(t, c, "east", "east", g, g.cliToken(t, "east"))
	waitDefaultMesh(t, west)
	waitDefaultMesh(t, east)
	const ns = "mcs-shop"
	meshedNamespace(t, c, ns)

	// Not exported by its annotation, exported by its ServiceExport.
	kubeApply(t, c, ns, kubeService("web", "None"))
	waitMS(t, east.api, "web."+ns, "made, not exported", 30*time.Second, func(m *msView) bool { return m != nil })
	kubeApply(t, c, ns, "apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceExport\nmetadata: {name: web, namespace: $NS}\n")
	exp := waitMCS(t, c, crd.ServiceExports, ns, "web", "Valid, Ready, no Conflict", func(o *mcsObject) bool {
		if o == nil {
			return false
		}
		v, _, _ := o.condition("Valid")
		r, _, _ := o.condition("Ready")
		x, reason, _ := o.condition("Conflict")
		return v == "True" && r == "True" && x == "False" && reason == "NoConflicts"
	})
	if _, reason, msg := exp.condition("Ready"); reason != "Exported" || !strings.Contains(msg, "global") {
		t.Errorf("Ready: %s %q", reason, msg)
	}
	waitFor(t, 30*time.Second, "the global has web, exported", func() bool {
		_, b := getBody(t, g.api+"/meshes/default/meshservices?filter[labels.kuma.io/display-name]=web")
		return strings.Contains(string(b), `"mode":"All"`)
	})

	// west's web: port 80 speaks grpc there, http here.
	westWeb := func(proto string) string {
		return `{"type":"MeshService","name":"web","mesh":"default","labels":{"k8s.kuma.io/namespace":"` + ns + `","k8s.kuma.io/service-name":"web",
			"kuma.io/env":"kubernetes","k8s.kuma.io/is-headless-service":"false"},"spec":{"ports":[{"name":"http","port":80,"appProtocol":"` + proto + `"}]}}`
	}
	if code := put(t, west.api, msPath("web"), westWeb("grpc")); code != http.StatusCreated {
		t.Fatalf("PUT web in west = %d", code)
	}
	exp = waitMCS(t, c, crd.ServiceExports, ns, "web", "Conflict", func(o *mcsObject) bool {
		x, _, _ := o.condition("Conflict")
		return o != nil && x == "True"
	})
	if _, reason, msg := exp.condition("Conflict"); reason != "PortConflict" || !strings.Contains(msg, "port 80 is http here and grpc in zone west") {
		t.Errorf("Conflict: %s %q", reason, msg)
	}

	// The ServiceImport of west's web, with the VIP DNS answers.
	imp := waitMCS(t, c, crd.ServiceImports, ns, "web", "ClusterSetIP with an IP", func(o *mcsObject) bool {
		return o != nil && len(o.Spec.IPs) == 1 && len(o.Status.Clusters) == 1
	})
	if imp.Spec.Type != "ClusterSetIP" || !strings.HasPrefix(imp.Spec.IPs[0], "241.") || imp.Status.Clusters[0].Cluster != "west" ||
		len(imp.Spec.Ports) != 1 || imp.Spec.Ports[0].Port != 80 || imp.Spec.Ports[0].AppProtocol != "grpc" || imp.Spec.Ports[0].Protocol != "TCP" {
		t.Errorf("ServiceImport %s/web: %+v %+v", ns, imp.Spec, imp.Status)
	}
	if ip := waitAnswer(t, east, "web."+ns+".svc.clusterset.local"); ip != imp.Spec.IPs[0] {
		t.Errorf("east answers web.%s.svc.clusterset.local with %s, the ServiceImport says %s", ns, ip, imp.Spec.IPs[0])
	}

	// The ports agree: no conflict.
	if code := put(t, west.api, msPath("web"), westWeb("http")); code != http.StatusOK {
		t.Fatalf("PUT web in west again = %d", code)
	}
	waitMCS(t, c, crd.ServiceExports, ns, "web", "no Conflict", func(o *mcsObject) bool {
		x, _, _ := o.condition("Conflict")
		return o != nil && x == "False"
	})

	// A MeshMultiZoneService of the global, in the namespace: its own
	// ServiceImport with its own VIP, from both zones.
	if code := put(t, g.api, "/meshes/default/meshmultizoneservices/web-all", `{"type":"MeshMultiZoneService","name":"web-all","mesh":"default",
		"labels":{"k8s.kuma.io/namespace":"`+ns+`"},"spec":{"selector":{"meshService":{"matchLabels":{"kuma.io/display-name":"web"}}}}}`); code != http.StatusCreated {
		t.Fatalf("PUT the MeshMultiZoneService on the global = %d", code)
	}
	mz := waitMCS(t, c, crd.ServiceImports, ns, "web-all", "the MeshMultiZoneService's", func(o *mcsObject) bool {
		return o != nil && len(o.Spec.IPs) == 1 && len(o.Status.Clusters) == 2
	})
	var zones []string
	for _, cl := range mz.Status.Clusters {
		zones = append(zones, cl.Cluster)
	}
	if !strings.HasPrefix(mz.Spec.IPs[0], "243.") || !slices.Equal(zones, []string{"east", "west"}) {
		t.Errorf("ServiceImport %s/web-all: ips %v, clusters %v; want a VIP of 243.0.0.0/8 from east and west", ns, mz.Spec.IPs, zones)
	}
	if ip := waitAnswer(t, east, "web-all."+ns+".svc.clusterset.local"); ip != mz.Spec.IPs[0] {
		t.Errorf("east answers web-all with %s, the ServiceImport says %s", ip, mz.Spec.IPs[0])
	}

	// west's web goes: so does its ServiceImport.
	if code := del(t, west.api, msPath("web")); code != http.StatusOK && code != http.StatusNoContent {
		t.Fatalf("DELETE web in west = %d", code)
	}
	waitMCS(t, c, crd.ServiceImports, ns, "web", "deleted", func(o *mcsObject) bool { return o == nil })
	if n := strings.Count(east.log.String(), "Multi-Cluster Services API"); n != 0 {
		t.Errorf("east logged that the MCS API is missing %d times", n)
	}
}
