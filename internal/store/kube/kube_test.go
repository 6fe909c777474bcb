package kube

import (
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/crd"
	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/kubeapi/kubetest"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/storetest"
)

var cluster *kubetest.Cluster

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, &cluster)) }

// meshnamesClient is a client with only the RBAC of meshnames install control-plane.
func meshnamesClient(t testing.TB) *kubeapi.Client {
	t.Helper()
	cfg, err := kubeapi.Config(cluster.MeshnamesKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubeapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// open gives t the cluster and a store on it, closed when t ends.
func open(t testing.TB, now func() time.Time) (*Store, func() *Store) {
	t.Helper()
	kubetest.Need(t, cluster)
	cluster.Fresh(t)
	c := meshnamesClient(t)
	openOne := func() *Store {
		s, err := Open(t.Context(), Options{Client: c, Mode: resource.ModeStandalone, Zone: "east", Now: now, Log: testLog(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	return openOne(), openOne
}

// conformanceSkips are the subtests of the conformance suite whose rules
// the Kubernetes store does not follow, and why (docs/kubernetes.md lists
// the same differences).
var conformanceSkips = map[string]string{
	"CreateGetRoundTrip":                  "Version is the resourceVersion, times are the API server's (seconds), and the store adds the labels Kuma's webhook would",
	"EveryKind":                           "exact round trip: see CreateGetRoundTrip; TestStore_EveryKindRoundTrips covers every kind",
	"MeshScope":                           "one object per name and namespace, whatever its mesh: the same name in two meshes is one custom resource",
	"RecreateAfterDelete":                 "Version is the resourceVersion, not 1 for a new object",
	"ConcurrentUpdatesOneWinner":          "Version is the resourceVersion, not 2 after one update",
	"UpdateKeepsStatus":                   "exact round trip: see CreateGetRoundTrip",
	"UpdateStatusKeepsSpecAndLabels":      "exact round trip: see CreateGetRoundTrip",
	"BatchFailedOpDoesNotAffectOthers":    "revisions follow etcd's, which writes elsewhere in the cluster advance, so two writes are not one revision apart",
	"List":                                "names are Kubernetes object names, lower case",
	"UnicodeAndMaximumLengthNames":        "names are Kubernetes object names: no Unicode, at most 253 bytes",
	"PatchStatus":                         "Version is the resourceVersion, not one more per write",
	"PreviousRevision":                    "Result.Previous is not reported (0); the controllers then read their own status writes back, as before, with no difference a user sees",
	"TooLarge":                            "label values are at most 63 characters in Kubernetes, so an object just under MaxObjectBytes cannot be made; the store does refuse one over it with ErrTooLarge",
	"Compaction":                          "Version is the resourceVersion, not 1 for a re-created object (the rest of the test passes)",
	"RevisionsIncrease":                   "the ops of a batch run in parallel: their revisions follow the order their writes are seen, not the ops' order",
	"ChangesPaging":                       "the ops of a batch run in parallel: see RevisionsIncrease",
	"Fence":                               "Version is the resourceVersion, not 2 after one write; TestStore_FenceAgainstTakeover covers the fence",
	"ConcurrentLeaseWrites":               "revisions start above the etcd revision at which the store opened, not at 1",
	"LeaseAndResourceFailuresIndependent": "the ops of a batch run in parallel: see RevisionsIncrease",
	"LeasesWithStatusInOneApply":          "Version is the resourceVersion; and there is no transaction: the leases are written first, then the status",
	"SurvivesReopen":                      "revisions are per process: a reopened store starts above the etcd revision at which it opens",
	"RecordsSurviveReopen":                "records are kept in the memory of the process that wrote them (docs/kubernetes.md)",
	"CompactRecordsOutOfOrder":            "it reopens the store between writes: see RecordsSurviveReopen (CompactRecords filters every record by its time)",
	"LeasesSurviveReopen":                 "revisions are per process: see SurvivesReopen",
	"CreateAtGivenTime":                   "the Kubernetes API sets creationTimestamp itself (the controllers store no new services with their status here)",
}

func TestConformance(t *testing.T) {
	kubetest.Need(t, cluster)
	storetest.RunExcept(t, func(t testing.TB, now func() time.Time) (store.Store, func() store.Store) {
		s, reopen := open(t, now)
		return s, func() store.Store { return reopen() }
	}, conformanceSkips)
}

// testLog logs warnings and errors of the store to stderr.
func testLog(testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func msvc(ns, name, mesh string) *resource.Object {
	n := name
	if ns != "" {
		n = name + "." + ns
	}
	return &resource.Object{Kind: resource.MeshService, Mesh: mesh, Name: n,
		Labels: map[string]string{"app": name},
		Spec: &resource.MeshServiceSpec{Ports: []resource.Port{{Port: 80, AppProtocol: resource.ProtocolHTTP}},
			Selector: resource.MeshServiceSelector{DataplaneLabels: &resource.LabelSelector{MatchLabels: map[string]string{"app": name}}}},
	}
}

// TestStore_EveryKindRoundTrips writes an object of each kind and reads
// back its spec, status, mesh and labels, the computed ones added.
func TestStore_EveryKindRoundTrips(t *testing.T) {
	s, _ := open(t, time.Now)
	ctx := t.Context()
	if err := cluster.Apply(ctx, []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n")); err != nil {
		t.Fatal(err)
	}
	objs := []*resource.Object{
		{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}},
		{Kind: resource.Zone, Name: "east", Spec: &resource.ZoneSpec{}},
		{Kind: resource.Dataplane, Mesh: "default", Name: "web-1.shop", Spec: &resource.DataplaneSpec{Networking: resource.DataplaneNetworking{
			Address: "10.0.0.7", Inbound: []resource.Inbound{{Port: 8080, Tags: map[string]string{resource.TagService: "web"}}}}}},
		msvc("shop", "web", "default"),
		{Kind: resource.MeshExternalService, Mesh: "default", Name: "httpbin", Spec: &resource.MeshExternalServiceSpec{
			Match: []resource.ExternalMatch{{Type: resource.MatchDomain, Value: "httpbin.org", Port: 443, Protocol: resource.ProtocolTLS}}}},
		{Kind: resource.MeshMultiZoneService, Mesh: "default", Name: "web.shop", Spec: &resource.MeshMultiZoneServiceSpec{
			Selector: resource.MultiZoneSelector{MeshService: &resource.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}},
		{Kind: resource.HostnameGenerator, Name: "local", Spec: &resource.HostnameGeneratorSpec{Template: "{{ .DisplayName }}.mesh",
			Selector: resource.HostnameSelector{MeshService: &resource.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}},
		{Kind: resource.ZoneIngress, Name: "ingress-1", Spec: &resource.ZoneIngressSpec{Networking: resource.ZoneIngressNetworking{
			Address: "10.0.0.9", Port: 10001, AdvertisedAddress: "ingress.example.com", AdvertisedPort: 443}}},
	}
	for _, o := range objs {
		o.Spec.Default()
		if resource.MustLookup(o.Kind).HasStatus {
			o.Status = resource.MustLookup(o.Kind).NewStatus()
			o.Status.(resource.ServiceStatusOf).Service().VIPs = []resource.VIP{{IP: "241.0.0.1", Type: resource.VIPKuma}}
		}
		got, err := store.Create(ctx, s, o)
		if err != nil {
			t.Fatalf("create %s: %v", o.Key(), err)
		}
		read, err := s.Get(ctx, o.Key())
		if err != nil {
			t.Fatalf("get %s: %v", o.Key(), err)
		}
		if d := cmp.Diff(got, read); d != "" {
			t.Errorf("%s: Get differs from Create's result (-create +get):\n%s", o.Key(), d)
		}
		if d := cmp.Diff(o.Spec, read.Spec); d != "" {
			t.Errorf("%s: spec (-want +got):\n%s", o.Key(), d)
		}
		if d := cmp.Diff(o.Status, read.Status); d != "" {
			t.Errorf("%s: status (-want +got):\n%s", o.Key(), d)
		}
		if read.Labels[resource.LabelDisplayName] == "" || read.Version <= 0 || read.CreationTime.IsZero() {
			t.Errorf("%s: labels %v, version %d, created %v", o.Key(), read.Labels, read.Version, read.CreationTime)
		}
		keptIs(t, s, read)
	}
	web, _ := s.Get(ctx, resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "web.shop"})
	// A copy the store handed out reads the same after the resource
	// changes; the store then keeps only the new revision.
	old, _ := s.Kept(web.Key(), web.Revision)
	changed := web.Clone()
	changed.Labels["team"] = "a"
	updated, err := store.Update(ctx, s, changed)
	if err != nil {
		t.Fatal(err)
	}
	keptIs(t, s, updated)
	if o, err := old.Object(); err != nil || !cmp.Equal(o, web) {
		t.Errorf("the copy of web.shop's first revision changed with the update: %v\n%s", err, cmp.Diff(web, o))
	}
	if _, ok := s.Kept(web.Key(), web.Revision); ok {
		t.Errorf("the store says it keeps web.shop's replaced revision %d", web.Revision)
	}
	want := map[string]string{"app": "web", resource.LabelDisplayName: "web", resource.LabelNamespace: "shop", resource.LabelMesh: "default",
		resource.LabelOrigin: resource.OriginZone, resource.LabelZone: "east", resource.LabelEnv: resource.EnvKubernetes}
	if d := cmp.Diff(want, web.Labels); d != "" {
		t.Errorf("computed labels of web.shop (-want +got):\n%s", d)
	}
	// An ingress is its zone's: the store labels it with the zone, so that
	// "the ingresses of zone east" is a label query.
	ingress, _ := s.Get(ctx, resource.Key{Kind: resource.ZoneIngress, Name: "ingress-1"})
	want = map[string]string{resource.LabelDisplayName: "ingress-1", resource.LabelNamespace: "meshnames-system",
		resource.LabelOrigin: resource.OriginZone, resource.LabelZone: "east"}
	if d := cmp.Diff(want, ingress.Labels); d != "" {
		t.Errorf("computed labels of ingress-1 (-want +got):\n%s", d)
	}
}

// keptIs checks that the store keeps want's revision (store.Keeper) as
// Get reads it, and no other.
func keptIs(t *testing.T, s *Store, want *resource.Object) {
	t.Helper()
	k, ok := s.Kept(want.Key(), want.Revision)
	if !ok {
		t.Fatalf("%s: the store does not keep revision %d", want.Key(), want.Revision)
	}
	if o, err := k.Object(); err != nil || !cmp.Equal(o, want) || k.Revision() != want.Revision {
		t.Errorf("%s: kept copy at revision %d: %v\n%s", want.Key(), k.Revision(), err, cmp.Diff(want, o))
	}
	wantJSON, err := want.AppendJSON([]byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := k.AppendJSON([]byte("x")); err != nil || string(got) != string(wantJSON) {
		t.Errorf("%s: kept copy's document:\n%s\nwant\n%s (%v)", want.Key(), got, wantJSON, err)
	}
	if _, ok := s.Kept(want.Key(), want.Revision+1); ok {
		t.Errorf("%s: the store says it keeps revision %d too", want.Key(), want.Revision+1)
	}
}

// TestStore_InvalidObjectsAreReported: a HostnameGenerator
// outside the system namespace is refused by the admission policy that
// comes with the CRDs; one created while the policy was missing is not a
// resource, and its status says why.
func TestStore_InvalidObjectsAreReported(t *testing.T) {
	s, _ := open(t, time.Now)
	ctx := t.Context()
	bad := `apiVersion: kuma.io/v1alpha1
kind: HostnameGenerator
metadata: {name: elsewhere, namespace: default}
spec:
  template: "{{ .DisplayName }}.mesh"
  selector: {meshService: {matchLabels: {a: b}}}
`
	err := cluster.Apply(ctx, []byte(bad))
	if err == nil || !errors.Is(err, kubeapi.ErrInvalid) && !errors.Is(err, kubeapi.ErrForbidden) {
		t.Fatalf("applying a HostnameGenerator outside the system namespace: %v, want the admission policy's refusal", err)
	}
	badTemplate := `apiVersion: kuma.io/v1alpha1
kind: HostnameGenerator
metadata: {name: broken, namespace: meshnames-system}
spec:
  template: "{{ .DisplayName "
  selector: {meshService: {matchLabels: {a: b}}}
`
	if err := cluster.Apply(ctx, []byte(badTemplate)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		inv := s.Invalid()
		if errs, ok := inv["HostnameGenerator meshnames-system/broken"]; ok {
			if len(errs) == 0 || errs[0].Field != "spec.template" {
				t.Errorf("errors of the broken generator: %v, want one on spec.template", errs)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the broken generator is not reported invalid: %v", inv)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := s.Get(ctx, resource.Key{Kind: resource.HostnameGenerator, Name: "broken"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get of an invalid object = %v, want not found", err)
	}
}

// TestStore_FenceAgainstTakeover: a batch fenced by a term that another
// holder replaced is refused, and a successful one rewrote the lease.
func TestStore_FenceAgainstTakeover(t *testing.T) {
	s, _ := open(t, time.Now)
	ctx := t.Context()
	a := store.Fence{Lease: LeaderLease, Holder: "a", Term: 1}
	put := func(f store.Fence) {
		t.Helper()
		rs, err := s.Apply(ctx, store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: LeaderLease, Value: f.LeaseValue(), ExpiresAt: time.Now().Add(time.Minute)}})
		if err != nil || rs[0].Err != nil {
			t.Fatal(err, rs)
		}
	}
	put(a)
	var before leaseObject
	if err := cluster.Client.Get(ctx, kubeapi.Leases, "meshnames-system", LeaderObject, &before); err != nil {
		t.Fatal(err)
	}
	if before.Spec.HolderIdentity == nil || *before.Spec.HolderIdentity != "a" || *before.Spec.LeaseTransitions != 1 {
		t.Errorf("the leader Lease's own fields: %+v", before.Spec)
	}
	rs, err := s.Apply(store.WithFence(ctx, a), store.Op{Type: store.OpCreate, Object: msvc("", "one", "default")})
	if err != nil || rs[0].Err != nil {
		t.Fatalf("fenced create under the current term: %v %v", err, rs)
	}
	var after leaseObject
	if err := cluster.Client.Get(ctx, kubeapi.Leases, "meshnames-system", LeaderObject, &after); err != nil {
		t.Fatal(err)
	}
	if after.Metadata.ResourceVersion == before.Metadata.ResourceVersion {
		t.Error("a fenced write did not rewrite the lease")
	}
	// Another instance takes over, behind this store's back.
	other, err := Open(ctx, Options{Client: meshnamesClient(t), Zone: "east"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	b := store.Fence{Lease: LeaderLease, Holder: "b", Term: 2}
	if rs, err := other.Apply(ctx, store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: LeaderLease, Value: b.LeaseValue(), ExpiresAt: time.Now().Add(time.Minute)}}); err != nil || rs[0].Err != nil {
		t.Fatal(err, rs)
	}
	_, err = s.Apply(store.WithFence(ctx, a), store.Op{Type: store.OpCreate, Object: msvc("", "two", "default")})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("fenced create after a takeover = %v, want ErrFenced", err)
	}
	if _, err := s.Get(ctx, msvc("", "two", "default").Key()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused create was written: %v", err)
	}
}

// TestStore_FollowsOtherWriters: objects written while no store
// ran are seen when one opens, and the feed of a running store follows
// writes made with kubectl (here: the admin client).
func TestStore_FollowsOtherWriters(t *testing.T) {
	s, _ := open(t, time.Now)
	ctx := t.Context()
	wake := s.Changed()
	rev := s.rev
	doc := `apiVersion: kuma.io/v1alpha1
kind: MeshService
metadata: {name: api, namespace: meshnames-system, labels: {kuma.io/mesh: default}}
spec:
  ports: [{port: 8080}]
`
	if err := cluster.Apply(ctx, []byte(doc)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up for a write of another client")
	}
	evs, err := s.Changes(ctx, rev, 0)
	if err != nil || len(evs) != 1 || evs[0].Key.Name != "api" {
		t.Fatalf("Changes after another client's write = %v, %v", evs, err)
	}
	if p := evs[0].Object.Spec.(*resource.MeshServiceSpec).Ports[0]; p.AppProtocol != resource.ProtocolTCP {
		t.Errorf("the store did not default the port's protocol: %+v", p)
	}
	// A second store opening now lists it.
	other, err := Open(ctx, Options{Client: meshnamesClient(t), Zone: "east"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	objs, _, err := other.List(ctx, resource.MeshService)
	if err != nil || len(objs) != 1 {
		t.Fatalf("List of a new store = %d objects, %v", len(objs), err)
	}
}

// TestStore_SyncedKeepsOriginalNames: what came through the zone sync (on
// a zone, a MeshService from global; on a global, a zone's) is the object
// <name>-<hash> in the system namespace and keeps the display name and
// namespace of where it was made (seed 002), which the synced generators'
// templates read; the control plane's own objects get theirs from their
// object as before.
func TestStore_SyncedKeepsOriginalNames(t *testing.T) {
	kubetest.Need(t, cluster)
	for _, tc := range []struct{ mode, origin, own string }{
		{resource.ModeZone, resource.OriginGlobal, resource.OriginZone},
		{resource.ModeGlobal, resource.OriginZone, resource.OriginGlobal},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			cluster.Fresh(t)
			s, err := Open(t.Context(), Options{Client: meshnamesClient(t), Mode: tc.mode, Zone: "west", Log: testLog(t)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			synced := msvc("", "web-bbmrhn96mpxqs9", "default")
			synced.Labels = map[string]string{resource.LabelOrigin: tc.origin, resource.LabelZone: "east",
				resource.LabelDisplayName: "web", resource.LabelNamespace: "shop", resource.LabelEnv: resource.EnvKubernetes}
			synced.Spec.Default()
			if _, err := store.Create(t.Context(), s, synced); err != nil {
				t.Fatal(err)
			}
			read, err := s.Get(t.Context(), synced.Key())
			if err != nil {
				t.Fatal(err)
			}
			if read.Labels[resource.LabelDisplayName] != "web" || read.Labels[resource.LabelNamespace] != "shop" {
				t.Errorf("the synced service's labels: %v, want display name web and namespace shop", read.Labels)
			}
			ns, name, err := s.Ref(synced.Key())
			if err != nil || ns != crd.DefaultSystemNamespace || name != "web-bbmrhn96mpxqs9" {
				t.Errorf("the synced service's object: %s/%s (%v), want it in the system namespace under its name", ns, name, err)
			}
			// Another zone's ingress, as the sync stores it: its zone and
			// display name kept, so that a label query finds it by zone.
			ingress := &resource.Object{Kind: resource.ZoneIngress, Name: "ingress-1-fnb78pc9sh6ttd",
				Labels: map[string]string{resource.LabelOrigin: tc.origin, resource.LabelZone: "east", resource.LabelDisplayName: "ingress-1"},
				Spec:   &resource.ZoneIngressSpec{Networking: resource.ZoneIngressNetworking{Address: "10.0.0.1", Port: 10001}}}
			if _, err := store.Create(t.Context(), s, ingress); err != nil {
				t.Fatal(err)
			}
			if read, err = s.Get(t.Context(), ingress.Key()); err != nil {
				t.Fatal(err)
			}
			if read.Labels[resource.LabelZone] != "east" || read.Labels[resource.LabelDisplayName] != "ingress-1" || read.Labels[resource.LabelOrigin] != tc.origin {
				t.Errorf("the synced ingress's labels: %v, want zone east, display name ingress-1", read.Labels)
			}
			own := msvc("", "db", "default")
			own.Labels = map[string]string{resource.LabelOrigin: tc.own, resource.LabelDisplayName: "other", resource.LabelNamespace: "elsewhere"}
			own.Spec.Default()
			if _, err := store.Create(t.Context(), s, own); err != nil {
				t.Fatal(err)
			}
			if read, err = s.Get(t.Context(), own.Key()); err != nil {
				t.Fatal(err)
			}
			if read.Labels[resource.LabelDisplayName] != "db" || read.Labels[resource.LabelNamespace] != crd.DefaultSystemNamespace {
				t.Errorf("the control plane's own service's labels: %v, want those of its object", read.Labels)
			}
		})
	}
}
