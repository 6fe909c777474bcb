package kubeservices

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/hostnames"
	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/kubeapi/kubetest"
	"github.com/meshnames/meshnames/internal/reconcile"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	kubestore "github.com/meshnames/meshnames/internal/store/kube"
	"github.com/meshnames/meshnames/internal/vips"
)

var cluster *kubetest.Cluster

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, &cluster)) }

// env is a kube store, a cache and the controller on the test cluster.
type env struct {
	t   *testing.T
	st  *kubestore.Store
	c   *cache.Cache
	ctl *Controller
	ns  string
}

var nsCounter atomic.Int64

func newEnv(t *testing.T) *env {
	t.Helper()
	kubetest.Need(t, cluster)
	cluster.Fresh(t)
	cfg, err := kubeapi.Config(cluster.MeshnamesKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubeapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, err := kubestore.Open(t.Context(), kubestore.Options{Client: client, Zone: "east", Log: log})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, st: st, c: cache.New(st, log, nil)}
	// Namespaces are never deleted without a controller-manager: each test
	// has its own.
	e.ns = fmt.Sprintf("t%d-%s", nsCounter.Add(1), strings.ToLower(strings.ReplaceAll(t.Name()[len("TestController_"):], "_", "-")))
	if len(e.ns) > 40 {
		e.ns = e.ns[:40]
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 3)
	go func() { e.c.Run(ctx); done <- struct{}{} }()
	adm := admission.New(admission.Options{Store: st, Cache: e.c, Mode: resource.ModeStandalone, Zone: "east", DisplayName: st.DisplayName})
	// The other controllers run too, as in a server: the hostnames and
	// VIPs of the MeshServices are written beside this controller's VIPs.
	pools := map[resource.Kind]vips.Prefixes{
		resource.MeshService:          {V4: netip.MustParsePrefix("241.0.0.0/8")},
		resource.MeshExternalService:  {V4: netip.MustParsePrefix("242.0.0.0/8")},
		resource.MeshMultiZoneService: {V4: netip.MustParsePrefix("243.0.0.0/8")},
	}
	addresses := vips.New(vips.Options{Pools: pools, Quarantine: time.Minute, Log: log})
	runner := reconcile.NewRunner(reconcile.Options{Cache: e.c, Store: st, Log: log},
		hostnames.New(hostnames.Options{Zone: "east", Log: log}), addresses)
	go func() {
		if err := runner.Run(ctx); err != nil {
			t.Errorf("runner: %v", err)
		}
		done <- struct{}{}
	}()

	ctl := New(Options{Client: client, Store: st, Cache: e.c, Admission: adm, VIPs: addresses, Kick: runner.Kick, ExportDefault: resource.ExportAll, SystemNamespace: st.SystemNamespace(), Log: log})
	e.ctl = ctl
	go func() {
		if err := ctl.Run(ctx); err != nil {
			t.Errorf("controller: %v", err)
		}
		done <- struct{}{}
	}()
	t.Cleanup(func() { cancel(); <-done; <-done; <-done; st.Close() })
	if _, err := store.Create(t.Context(), st, &resource.Object{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}}); err != nil {
		t.Fatal(err)
	}
	if err := hostnames.EnsureDefaultsFor(t.Context(), st, resource.ModeStandalone, "east", resource.EnvKubernetes, log); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) apply(yaml string) {
	e.t.Helper()
	if err := cluster.Apply(e.t.Context(), []byte(strings.ReplaceAll(yaml, "$NS", e.ns))); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) deleteObject(r kubeapi.Resource, ns, name string) {
	e.t.Helper()
	if err := cluster.Client.Delete(e.t.Context(), r, ns, name, kubeapi.Preconditions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) key(name string) resource.Key {
	return resource.Key{Kind: resource.MeshService, Mesh: "default", Name: name + "." + e.ns}
}

// wait polls the store until cond holds for the MeshService named name
// (nil: absent), or fails after 20 s.
func (e *env) wait(k resource.Key, what string, cond func(*resource.Object) bool) *resource.Object {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		o, err := e.st.Get(e.t.Context(), k)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			e.t.Fatal(err)
		}
		if cond(o) {
			return o
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: %s not reached within 20s; last state: %+v", k, what, o)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func exists(o *resource.Object) bool { return o != nil }

func hostnamesOf(o *resource.Object) string {
	var hs []string
	if st, ok := o.Status.(resource.ServiceStatusOf); ok && st != nil {
		for _, a := range st.Service().Addresses {
			if a.Status == resource.AddressAvailable {
				hs = append(hs, a.Hostname)
			}
		}
	}
	return strings.Join(hs, ",")
}
func absent(o *resource.Object) bool { return o == nil }

func vipsOf(o *resource.Object) []string {
	var out []string
	if o == nil {
		return nil
	}
	for _, v := range statusVIPs(o) {
		out = append(out, v.IP+"/"+v.Type)
	}
	return out
}

func (e *env) meshedNamespace(labels string) {
	e.apply(`apiVersion: v1
kind: Namespace
metadata:
  name: $NS
  labels: {` + labels + `}
`)
}

// clusterIP reads a Service's ClusterIP.
func (e *env) clusterIP(name string) string {
	e.t.Helper()
	var s serviceObject
	if err := cluster.Client.Get(e.t.Context(), kubeapi.Services, e.ns, name, &s); err != nil {
		e.t.Fatal(err)
	}
	return s.Spec.ClusterIP
}

func TestController_ClusterIPServiceLifecycle(t *testing.T) {
	e := newEnv(t)
	e.meshedNamespace("kuma.io/sidecar-injection: enabled")
	e.apply(`apiVersion: v1
kind: Service
metadata: {name: web, namespace: $NS, labels: {team: shop}}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, appProtocol: http}, {name: dns, port: 53, protocol: UDP}]
`)
	ip := e.clusterIP("web")
	o := e.wait(e.key("web"), "created with its ClusterIP and named", func(o *resource.Object) bool {
		return o != nil && slices.Equal(vipsOf(o), []string{ip + "/Kubernetes"}) && hostnamesOf(o) == "web."+e.ns+".svc.mesh.local"
	})
	// The hostnames controller's status write keeps the ClusterIP; the
	// object as kubectl sees it has both.
	var cr struct {
		Status resource.ServiceStatus `json:"status"`
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := cluster.Client.Get(t.Context(), kubeapi.Resource{Group: "kuma.io", Version: "v1alpha1", Resource: "meshservices", Namespaced: true}, e.ns, "web", &cr); err != nil {
			t.Fatal(err)
		}
		if len(cr.Status.VIPs) == 1 && cr.Status.VIPs[0].IP == ip && len(cr.Status.Addresses) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the custom resource's status: %+v", cr.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	spec := o.Spec.(*resource.MeshServiceSpec)
	if len(spec.Ports) != 1 || spec.Ports[0].Port != 80 || spec.Ports[0].AppProtocol != resource.ProtocolHTTP {
		t.Errorf("ports %+v, want only 80/http", spec.Ports)
	}
	for k, want := range map[string]string{"team": "shop", resource.LabelManagedBy: ManagedBy, resource.LabelServiceName: "web",
		resource.LabelHeadless: "false", resource.LabelEnv: resource.EnvKubernetes, resource.LabelNamespace: e.ns, resource.LabelDisplayName: "web"} {
		if o.Labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, o.Labels[k], want)
		}
	}
	// An update of the Service updates its MeshService.
	e.apply(`apiVersion: v1
kind: Service
metadata: {name: web, namespace: $NS, labels: {team: checkout}}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, appProtocol: http}, {name: admin, port: 9000}]
`)
	e.wait(e.key("web"), "updated", func(o *resource.Object) bool {
		return o != nil && o.Labels["team"] == "checkout" && len(o.Spec.(*resource.MeshServiceSpec).Ports) == 2
	})
	// Someone edits the MeshService: the controller puts it back.
	cur, err := e.st.Get(t.Context(), e.key("web"))
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.(*resource.MeshServiceSpec).Ports = nil
	if _, err := store.Update(t.Context(), e.st, cur); err != nil {
		t.Fatal(err)
	}
	e.wait(e.key("web"), "restored after an edit", func(o *resource.Object) bool {
		return o != nil && len(o.Spec.(*resource.MeshServiceSpec).Ports) == 2
	})
	e.deleteObject(kubeapi.Services, e.ns, "web")
	e.wait(e.key("web"), "deleted with its Service", absent)
}

func TestController_HeadlessServiceOnePerPod(t *testing.T) {
	e := newEnv(t)
	e.meshedNamespace("kuma.io/sidecar-injection: enabled")
	e.apply(`apiVersion: v1
kind: Service
metadata: {name: db, namespace: $NS}
spec:
  clusterIP: None
  selector: {app: db}
  ports: [{name: pg, port: 5432}]
---
apiVersion: v1
kind: Pod
metadata:
  name: db-0
  namespace: $NS
  labels: {app: db, statefulset.kubernetes.io/pod-name: db-0, apps.kubernetes.io/pod-index: "0"}
spec:
  containers: [{name: pg, image: postgres}]
---
apiVersion: v1
kind: Pod
metadata:
  name: db-1
  namespace: $NS
  labels: {app: db, statefulset.kubernetes.io/pod-name: db-1, apps.kubernetes.io/pod-index: "1"}
spec:
  containers: [{name: pg, image: postgres}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: db-x1
  namespace: $NS
  labels: {kubernetes.io/service-name: db}
addressType: IPv4
ports: [{name: pg, port: 5432}]
endpoints:
- addresses: [10.244.0.5]
  targetRef: {kind: Pod, name: db-0, namespace: $NS}
- addresses: [10.244.0.6]
  targetRef: {kind: Pod, name: db-1, namespace: $NS}
`)
	db0 := e.key(PodServiceName("db-0", "db", e.ns))
	db1 := e.key(PodServiceName("db-1", "db", e.ns))
	o := e.wait(db0, "created for Pod db-0", func(o *resource.Object) bool { return slices.Equal(vipsOf(o), []string{"10.244.0.5/Kubernetes"}) })
	if o.Labels[LabelPodName] != "db-0" || o.Labels[resource.LabelHeadless] != "true" {
		t.Errorf("labels of db-0's MeshService: %v", o.Labels)
	}
	if r := o.Spec.(*resource.MeshServiceSpec).Selector.DataplaneRef; r == nil || r.Name != "db-0."+e.ns {
		t.Errorf("selector of db-0's MeshService: %+v", o.Spec.(*resource.MeshServiceSpec).Selector)
	}
	e.wait(db1, "created for Pod db-1", func(o *resource.Object) bool { return slices.Equal(vipsOf(o), []string{"10.244.0.6/Kubernetes"}) })
	// db-1 leaves the slice, db-0 moves.
	e.apply(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: db-x1
  namespace: $NS
  labels: {kubernetes.io/service-name: db}
addressType: IPv4
ports: [{name: pg, port: 5432}]
endpoints:
- addresses: [10.244.0.9]
  targetRef: {kind: Pod, name: db-0, namespace: $NS}
`)
	e.wait(db1, "deleted when its Pod left", absent)
	e.wait(db0, "its VIP follows the Pod's IP", func(o *resource.Object) bool { return slices.Equal(vipsOf(o), []string{"10.244.0.9/Kubernetes"}) })
	e.deleteObject(kubeapi.Services, e.ns, "db")
	e.wait(db0, "deleted with its Service", absent)
}

func TestController_NamespaceTurnsMeshedOnAndOff(t *testing.T) {
	e := newEnv(t)
	e.meshedNamespace("")
	e.apply(`apiVersion: v1
kind: Service
metadata: {name: api, namespace: $NS}
spec:
  ports: [{port: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: marker, namespace: $NS, labels: {kuma.io/mesh: default}}
spec:
  ports: [{port: 8080}]
`)
	// marker is meshed by its label; once its MeshService exists, the
	// controller has seen api, created before it, too.
	e.wait(e.key("marker"), "created (meshed by its label)", exists)
	if o, err := e.st.Get(t.Context(), e.key("api")); err == nil {
		t.Fatalf("a Service of a namespace that is not meshed has a MeshService: %v", o.Key())
	}
	e.meshedNamespace("kuma.io/sidecar-injection: enabled")
	e.wait(e.key("api"), "created when the namespace became meshed", exists)
	e.meshedNamespace("kuma.io/sidecar-injection: disabled")
	e.wait(e.key("api"), "deleted when the namespace stopped being meshed", absent)
	if _, err := e.st.Get(t.Context(), e.key("marker")); err != nil {
		t.Errorf("the label-meshed Service lost its MeshService: %v", err)
	}
}

func TestController_ExportAnnotation(t *testing.T) {
	e := newEnv(t)
	e.meshedNamespace("kuma.io/sidecar-injection: enabled")
	svc := `apiVersion: v1
kind: Service
metadata: {name: internal, namespace: $NS, annotations: {kuma.io/export-mode: %s}}
spec:
  ports: [{port: 80}]
`
	e.apply(fmt.Sprintf(svc, "None"))
	mode := func(m string) func(*resource.Object) bool {
		return func(o *resource.Object) bool {
			return o != nil && o.Spec.(*resource.MeshServiceSpec).Export != nil && o.Spec.(*resource.MeshServiceSpec).Export.Mode == m
		}
	}
	e.wait(e.key("internal"), "export mode None", mode(resource.ExportNone))
	e.apply(fmt.Sprintf(svc, "All"))
	e.wait(e.key("internal"), "export mode All", mode(resource.ExportAll))
}

func TestController_UserMeshServiceLeftAlone(t *testing.T) {
	e := newEnv(t)
	e.meshedNamespace("kuma.io/sidecar-injection: enabled")
	e.apply(`apiVersion: kuma.io/v1alpha1
kind: MeshService
metadata: {name: web, namespace: $NS, labels: {kuma.io/mesh: default, owner: me}}
spec:
  ports: [{port: 7070}]
`)
	mine := e.wait(e.key("web"), "the user's MeshService in the store", exists)
	e.apply(`apiVersion: v1
kind: Service
metadata: {name: web, namespace: $NS}
spec:
  ports: [{port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: marker, namespace: $NS}
spec:
  ports: [{port: 80}]
`)
	e.wait(e.key("marker"), "created", exists)
	got, err := e.st.Get(t.Context(), e.key("web"))
	if err != nil {
		t.Fatal(err)
	}
	// Its labels and spec are what the controller would write; its status
	// (a VIP from the pool) is the other controllers'.
	if d := cmp.Diff(mine.Labels, got.Labels); d != "" {
		t.Errorf("the controller changed the labels of a MeshService it did not make (-before +after):\n%s", d)
	}
	if d := cmp.Diff(mine.Spec, got.Spec); d != "" {
		t.Errorf("the controller changed the spec of a MeshService it did not make (-before +after):\n%s", d)
	}
	e.deleteObject(kubeapi.Services, e.ns, "web")
	e.deleteObject(kubeapi.Services, e.ns, "marker")
	e.wait(e.key("marker"), "deleted", absent)
	if _, err := e.st.Get(t.Context(), e.key("web")); err != nil {
		t.Errorf("deleting the Service deleted the user's MeshService: %v", err)
	}
	// The user deletes a MeshService in a Service's way: the Service's
	// takes its place.
	e.apply(`apiVersion: v1
kind: Service
metadata: {name: web, namespace: $NS}
spec:
  ports: [{port: 80}]
`)
	e.deleteObject(kubeapi.Resource{Group: "kuma.io", Version: "v1alpha1", Resource: "meshservices", Namespaced: true}, e.ns, "web")
	e.wait(e.key("web"), "made from the Service once the user's is gone", func(o *resource.Object) bool {
		return o != nil && o.Labels[resource.LabelManagedBy] == ManagedBy
	})
}

func TestController_MeshMustExist(t *testing.T) {
	e := newEnv(t)
	e.meshedNamespace("kuma.io/sidecar-injection: enabled, kuma.io/mesh: payments")
	e.apply(`apiVersion: v1
kind: Service
metadata: {name: api, namespace: $NS}
spec:
  ports: [{port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: marker, namespace: $NS, labels: {kuma.io/mesh: default}}
spec:
  ports: [{port: 80}]
`)
	e.wait(e.key("marker"), "created in mesh default", exists)
	k := resource.Key{Kind: resource.MeshService, Mesh: "payments", Name: "api." + e.ns}
	if _, err := e.st.Get(t.Context(), k); err == nil {
		t.Fatal("a MeshService was made in a mesh that does not exist")
	}
	if _, err := store.Create(t.Context(), e.st, &resource.Object{Kind: resource.Mesh, Name: "payments", Spec: &resource.MeshSpec{}}); err != nil {
		t.Fatal(err)
	}
	e.wait(k, "created once the mesh exists", exists)
}

// TestController_UnchangedServiceWritesNothing: a Service event that
// changes nothing its MeshService shows (an annotation meshnames does not
// read) writes nothing. Once a Service created after that event has its
// MeshService, the controller has processed the event.
func TestController_UnchangedServiceWritesNothing(t *testing.T) {
	e := newEnv(t)
	e.meshedNamespace("kuma.io/sidecar-injection: enabled")
	e.apply(`apiVersion: v1
kind: Service
metadata: {name: web, namespace: $NS}
spec:
  ports: [{port: 80}]
`)
	before := e.wait(e.key("web"), "named", func(o *resource.Object) bool { return o != nil && hostnamesOf(o) != "" })
	writes := func() float64 {
		return testutil.ToFloat64(e.ctl.writes.WithLabelValues("update", "ok")) + testutil.ToFloat64(e.ctl.writes.WithLabelValues("create", "ok"))
	}
	n := writes()
	e.apply(`apiVersion: v1
kind: Service
metadata: {name: web, namespace: $NS, annotations: {team: shop}}
spec:
  ports: [{port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: marker, namespace: $NS}
spec:
  ports: [{port: 80}]
`)
	e.wait(e.key("marker"), "created", exists)
	// The store shows the marker a moment before the controller counts
	// its write: wait for the count, then check nothing else was written.
	for deadline := time.Now().Add(10 * time.Second); writes() < n+1 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if got := writes(); got != n+1 {
		t.Errorf("%v writes after the event, want %v (the marker's create only)", got, n+1)
	}
	after, err := e.st.Get(t.Context(), e.key("web"))
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != before.Version {
		t.Errorf("the MeshService was written (version %d, was %d)", after.Version, before.Version)
	}
}

// TestController_SyncedCopyLeftAlone: a copy of another zone's MeshService
// made from a Service (labelled kuma.io/managed-by: k8s-controller and
// kuma.io/origin: global, in the system namespace) is the zone sync's: the
// controller, which has no Service for it, does not delete it.
func TestController_SyncedCopyLeftAlone(t *testing.T) {
	e := newEnv(t)
	e.meshedNamespace("kuma.io/sidecar-injection: enabled")
	e.apply(`apiVersion: kuma.io/v1alpha1
kind: MeshService
metadata:
  name: web-bbmrhn96mpxqs9
  namespace: meshnames-system
  labels: {kuma.io/mesh: default, kuma.io/origin: global, kuma.io/zone: north, kuma.io/managed-by: k8s-controller, k8s.kuma.io/service-name: web}
spec:
  ports: [{port: 80}]
`)
	synced := resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "web-bbmrhn96mpxqs9"}
	e.wait(synced, "the synced copy in the store", exists)
	e.apply(`apiVersion: v1
kind: Service
metadata: {name: marker, namespace: $NS}
spec:
  ports: [{port: 80}]
`)
	e.wait(e.key("marker"), "created", exists)
	if _, err := e.st.Get(t.Context(), synced); err != nil {
		t.Errorf("the controller deleted a synced copy: %v", err)
	}
}

// The controller works a Service out once for its creation: the echo of
// its own write of the MeshService in the cache is no news, and neither
// are the status writes that name it.
func TestController_OwnWriteNotReconciledAgain(t *testing.T) {
	e := newEnv(t)
	e.meshedNamespace("kuma.io/sidecar-injection: enabled")
	const n = 20
	named := func(o *resource.Object) bool { return o != nil && hostnamesOf(o) != "" && len(vipsOf(o)) > 0 }
	// round creates n Services and then a marker, and waits until all are
	// named: the echoes of the Services' MeshServices come before the
	// marker's.
	round := func(r int) {
		var yaml strings.Builder
		for i := range n {
			fmt.Fprintf(&yaml, "---\napiVersion: v1\nkind: Service\nmetadata: {name: web-%d-%d, namespace: $NS}\nspec:\n  ports: [{port: 80}]\n", r, i)
		}
		e.apply(yaml.String())
		for i := range n {
			e.wait(e.key(fmt.Sprintf("web-%d-%d", r, i)), "named", named)
		}
		e.apply(fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: marker-%d, namespace: $NS}\nspec:\n  ports: [{port: 80}]\n", r))
		e.wait(e.key(fmt.Sprintf("marker-%d", r)), "named", named)
	}
	// The first round settles what the namespace's creation queued.
	round(0)
	before := testutil.ToFloat64(e.ctl.reconciles)
	round(1)
	// Each Service once, the marker once, and its echo if it is not yet
	// recorded as the controller's own (it always is; the bound leaves
	// room for the marker's only).
	if got := testutil.ToFloat64(e.ctl.reconciles) - before; got > n+2 || got < n+1 {
		t.Errorf("%v reconciles for %d new Services and a marker, want %d or %d", got, n, n+1, n+2)
	}
}
