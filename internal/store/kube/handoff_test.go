package kube

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/crd"
	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/resource"
)

// newTestStore returns a store with no API server behind it, fed by
// calling its watch handlers.
func newTestStore() *Store {
	return &Store{
		o:    Options{Now: func() time.Time { return time.Unix(1000, 0) }, Log: slog.New(slog.DiscardHandler)},
		dec:  decoder{names: names{system: "meshnames-system"}, mode: resource.ModeZone, zone: "east"},
		refs: map[crRef]*entry{}, invalid: map[crRef]*decoded{}, stale: map[crRef]report{}, fresh: map[*entry]*resource.Object{},
		feed: newFeed(), progress: map[resource.Kind]int64{}, acks: newAcks(ackWindow),
		advanced: make(chan struct{}), changed: make(chan struct{}),
	}
}

// watchedService is the custom resource of MeshService web-i in namespace
// shop at resourceVersion rv, named, as a watch event carries it.
func watchedService(i, rv int) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"kuma.io/v1alpha1","kind":"MeshService","metadata":{"name":"web-%d","namespace":"shop","uid":"6a1c3e52-2f4b-4c8e-9d1a-%012d","resourceVersion":"%d","creationTimestamp":"2026-01-01T00:00:00Z","labels":{"kuma.io/mesh":"default","k8s.kuma.io/service-name":"web"},"managedFields":[{"manager":"meshnames","operation":"Update","subresource":"status"}]},`+
		`"spec":{"selector":{"dataplaneLabels":{"matchLabels":{"app":"web"}}},"ports":[{"name":"http","port":80,"targetPort":8080,"appProtocol":"http"}]},`+
		`"status":{"addresses":[{"hostname":"web-%d.shop.svc.mesh.local","status":"Available","origin":{"kind":"HostnameGenerator","name":"local"}}],"vips":[{"ip":"10.96.0.%d","type":"Kubernetes"}],"conditions":[{"type":"VIPsAllocated","status":"True","reason":"Allocated"}]}}`,
		i, i, rv, i, i%250+1)
}

func watchEvent(s *Store, raw []byte) {
	k, _ := crd.For(resource.MeshService)
	s.event(k, kubeapi.Event{Type: kubeapi.Modified, Object: raw})
}

// The change feed hands its first reader the object the watch event was
// decoded into rather than decoding the stored copy again: the same
// object as the stored copy reads back, once; a later read decodes.
func TestChanges_HandsOffTheWatchedObject(t *testing.T) {
	s := newTestStore()
	ctx := context.Background()
	watchEvent(s, watchedService(1, 10))
	e := s.refs[crRef{kind: resource.MeshService, namespace: "shop", name: "web-1"}]
	if e == nil {
		t.Fatal("the event made no entry")
	}
	handed := s.fresh[e]
	evs, err := s.Changes(ctx, 0, 0)
	if err != nil || len(evs) != 1 {
		t.Fatalf("changes: %v, %v", evs, err)
	}
	if evs[0].Object != handed || handed == nil {
		t.Fatalf("the first reader got %p, not the watched object %p", evs[0].Object, handed)
	}
	stored, err := e.object()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(stored, evs[0].Object); diff != "" {
		t.Errorf("the handed-off object differs from the stored copy (-stored +handed):\n%s", diff)
	}
	if evs[0].Revision != e.rev || evs[0].Object.Revision != e.rev || evs[0].Object.Version != 10 {
		t.Errorf("revision %d, object revision %d version %d; want %d, %d, 10", evs[0].Revision, evs[0].Object.Revision, evs[0].Object.Version, e.rev, e.rev)
	}
	again, err := s.Changes(ctx, 0, 0)
	if err != nil || len(again) != 1 || again[0].Object == handed {
		t.Fatalf("a second read got the handed-off object again (or failed: %v)", err)
	}
	if diff := cmp.Diff(stored, again[0].Object); diff != "" {
		t.Errorf("a second read (-stored +got):\n%s", diff)
	}
	if len(s.fresh) != 0 {
		t.Errorf("the store still holds %d objects handed off", len(s.fresh))
	}
}

// The store holds no object for long that no reader takes: a superseded
// event's is dropped, so is one a reader has read past, and there are at
// most freshCap.
func TestChanges_HoldsFewObjects(t *testing.T) {
	s := newTestStore()
	watchEvent(s, watchedService(1, 10))
	watchEvent(s, watchedService(1, 11)) // supersedes 10
	if len(s.fresh) != 1 {
		t.Errorf("after a second event of one resource the store holds %d objects, want 1", len(s.fresh))
	}
	watchEvent(s, watchedService(2, 12))
	last := s.rev
	if _, err := s.Changes(context.Background(), last, 0); err != nil {
		t.Fatal(err)
	}
	if len(s.fresh) != 0 {
		t.Errorf("a reader read past every event; the store holds %d objects", len(s.fresh))
	}
	for i := range freshCap + 10 {
		watchEvent(s, watchedService(i, 100+i))
	}
	if len(s.fresh) != freshCap {
		t.Errorf("%d objects held after %d events, want at most %d", len(s.fresh), freshCap+10, freshCap)
	}
	evs, err := s.Changes(context.Background(), last, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Object == nil || ev.Object.Key() != ev.Key {
			t.Fatalf("event %d: object %v for key %v", ev.Revision, ev.Object, ev.Key)
		}
	}
}
