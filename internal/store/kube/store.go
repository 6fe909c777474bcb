// Package kube is the store of meshnames' Kubernetes mode: the resources
// are custom resources of the API group kuma.io/v1alpha1 (package crd),
// written by users with kubectl and by meshnames through this package, and
// read back through list and watch. It implements store.Store, so that the
// cache, the controllers, DNS and the REST API run on it unchanged.
//
// # Names
//
// Mesh and Zone are cluster-scoped: a resource's name is the object's.
// HostnameGenerator and MeshExternalService live only in the system
// namespace (seeds 000 and 003), and so does ZoneIngress (an ingress is
// its zone's, not a namespace's): the name is the object's; such an object
// elsewhere is invalid. The other kinds are named like Kuma's core names,
// "<name>.<namespace>", but in the system namespace, where synced resources
// live (seed 002), the name is the object's. The mesh is the label
// kuma.io/mesh ("default" when absent). The decoder computes the labels
// Kuma's admission webhook would have set: kuma.io/display-name (the
// object's name), k8s.kuma.io/namespace, and, when absent, kuma.io/origin,
// kuma.io/zone and, on MeshServices, kuma.io/env.
//
// # Reads and the change feed
//
// One watch per kind follows the API server from a list; a watch that
// falls behind what the server keeps (410 Gone) lists again and feeds the
// differences. The store keeps each object's JSON (a few hundred bytes,
// not a decoded copy) and a change feed of each resource's last write.
// Revisions are the store's own, one per event in the order the watches
// deliver them (which is not etcd's order across kinds), starting above
// the etcd revision at which the store opened. A reader resuming from a
// revision below that (from an earlier process) gets ErrCompacted and
// lists again; Changes(0) is a full read. A process issues at most one
// event per write to the cluster (but for an object whose mesh label
// changed: two), so its revisions stay below those of the next process.
//
// Get and Changes read the store's copy. List first makes sure the copy
// reflects everything committed before it was called (a consistent list of
// every kind, compared with the copy), so that a new leader catching up
// sees its predecessor's last writes.
//
// # Writes
//
// Apply has no transaction: its operations are independent requests, run
// in parallel (ops on one resource in order), leases first. Each write is
// conditional on the resourceVersion the operation names (Version is the
// resourceVersion), and Apply returns only when the watch has shown it, so
// that a reader of the feed sees its own writes. OpPatchStatus reads the
// current status, patches it and writes it conditionally, again on a
// conflict.
//
// # Leases and fencing
//
// Store leases are coordination.k8s.io Lease objects in the system
// namespace (the value and expiry in annotations; the lease "leader" also
// shows its holder and term in the Lease's own fields for kubectl). A
// fenced Apply first rewrites the fence's lease conditionally on the
// resourceVersion it read and found naming the fence's holder and term,
// unexpired: a takeover changes that resourceVersion, so the check and the
// takeover cannot interleave, and the rewrite restarts every other
// instance's wait for the lease to go silent. Each write of the batch must
// then finish four fifths of the way to the lease's expiry (by this
// process's clock, the clock of the holder that set it); a write still
// running then is abandoned, and a write that starts when half the time to
// that deadline has passed rewrites the lease again first, so a long batch
// is fenced write by write. This is weaker than the SQL stores' check in the
// transaction of the writes: a write sent before the deadline that the API
// server applies more than a fifth of a lease duration later, after a
// successor's takeover, is not stopped. The elector (elector.go) decides
// takeovers by watching the lease's resourceVersion stand still for a
// lease duration on its own clock, as client-go's leader election does, so
// no two clocks are compared.
//
// It imports store, store/backend, resource, validate, decode, crd and
// kubeapi. A Store is
// safe for concurrent use; its watches run until Close.
package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshnames/meshnames/internal/crd"
	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/validate"
)

// Options configures a Store.
type Options struct {
	Client *kubeapi.Client
	// SystemNamespace holds HostnameGenerators, MeshExternalServices,
	// ZoneIngresses, synced resources and the leases
	// (crd.DefaultSystemNamespace when empty). Open creates it when it is missing.
	SystemNamespace string
	// Mode and Zone are the control plane's: they fill in the origin and
	// zone labels of objects written without them.
	Mode, Zone string
	Log        *slog.Logger
	// Workers bounds the requests of one Apply in flight at once (16).
	Workers int
	// EchoTimeout bounds how long a write waits for its watch to show it
	// (10 s); after that Apply returns anyway.
	EchoTimeout time.Duration
	// Now is the clock of the change feed: when tombstones were written,
	// for Compact (time.Now when nil). Lease expiries are compared with
	// the real time: they are the holder's.
	Now func() time.Time
}

// Store is the Kubernetes store.
type Store struct {
	o     Options
	c     *kubeapi.Client
	dec   decoder
	kinds []crd.Kind

	mu      sync.Mutex
	objects map[resource.Key]*entry
	refs    map[crRef]resource.Key // the resource each valid custom resource is
	invalid map[crRef]*decoded
	// stale are valid objects whose status still shows Valid=False.
	stale    map[crRef]report
	feed     feed
	rev      int64                   // of the last event; 0 before the first
	base     int64                   // the etcd revision when the store opened
	progress map[resource.Kind]int64 // the newest resourceVersion each watch delivered
	acks     acks
	advanced chan struct{} // closed and replaced when an event is applied
	changed  chan struct{}
	closed   bool

	leases  leaseCache
	records records

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var _ store.Store = (*Store)(nil)
var _ store.Compacter = (*Store)(nil)

// entry is the stored copy of one resource.
type entry struct {
	ref     crRef
	uid     string
	version int64
	rev     int64
	data    []byte // the object's JSON (resource.Object.MarshalJSON)
}

// Open checks that the CRDs are installed, lists every kind and starts
// following the API server. ctx bounds the opening only.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.Client == nil {
		return nil, errors.New("kube store: no client")
	}
	if o.SystemNamespace == "" {
		o.SystemNamespace = crd.DefaultSystemNamespace
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Workers <= 0 {
		o.Workers = 16
	}
	if o.EchoTimeout <= 0 {
		o.EchoTimeout = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Mode == "" {
		o.Mode = resource.ModeStandalone
	}
	s := &Store{
		o: o, c: o.Client,
		dec:      decoder{names: names{system: o.SystemNamespace}, mode: o.Mode, zone: o.Zone},
		kinds:    crd.Kinds(),
		objects:  map[resource.Key]*entry{},
		refs:     map[crRef]resource.Key{},
		invalid:  map[crRef]*decoded{},
		stale:    map[crRef]report{},
		feed:     newFeed(),
		progress: map[resource.Kind]int64{},
		acks:     newAcks(4096),
		advanced: make(chan struct{}),
		changed:  make(chan struct{}),
		leases:   leaseCache{m: map[string]cachedLease{}},
	}
	if err := s.checkCRDs(ctx); err != nil {
		return nil, err
	}
	if err := s.ensureNamespace(ctx); err != nil {
		return nil, err
	}
	if err := s.setBase(ctx); err != nil {
		return nil, err
	}
	rvs := make([]string, len(s.kinds))
	for i, k := range s.kinds {
		rv, err := s.relist(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("kube store: list %s: %w", k.Plural, err)
		}
		rvs[i] = rv
	}
	wctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	for i, k := range s.kinds {
		s.wg.Go(func() { s.c.Follow(wctx, k.Resource(), "", kubeapi.ListOptions{}, rvs[i], kindHandler{s, k}, s.o.Log) })
	}
	return s, nil
}

// setBase reads the cluster's current revision: the resourceVersion of a
// consistent list (of one Lease).
func (s *Store) setBase(ctx context.Context) error {
	rv, err := s.c.List(ctx, kubeapi.Leases, s.o.SystemNamespace, kubeapi.ListOptions{LabelSelector: leaseLabel + "=true", Limit: 1, Once: true}, func(json.RawMessage) error { return nil })
	if err != nil {
		return fmt.Errorf("kube store: %w", err)
	}
	base, ok := kubeapi.Revision(rv)
	if !ok {
		return fmt.Errorf("kube store: the API server's resourceVersion %q is not a positive integer", rv)
	}
	s.base = base
	return nil
}

// checkCRDs reports the kinds whose CRD the API server does not serve.
func (s *Store) checkCRDs(ctx context.Context) error {
	var list struct {
		Resources []struct {
			Name string `json:"name"`
		} `json:"resources"`
	}
	err := s.c.Get(ctx, kubeapi.Resource{Group: crd.Group, Version: crd.Version}, "", "", &list)
	if err != nil && !errors.Is(err, kubeapi.ErrNotFound) {
		return fmt.Errorf("kube store: %w", err)
	}
	var missing []string
	for _, k := range s.kinds {
		if !slices.ContainsFunc(list.Resources, func(r struct {
			Name string `json:"name"`
		}) bool {
			return r.Name == k.Plural
		}) {
			missing = append(missing, k.Plural+"."+crd.Group)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("kube store: the API server at %s does not serve %s: install the CRDs with `meshnames install crds | kubectl apply -f -`", s.c.Host(), strings.Join(missing, ", "))
	}
	return nil
}

// ensureNamespace creates the system namespace when it is missing.
func (s *Store) ensureNamespace(ctx context.Context) error {
	err := s.c.Get(ctx, kubeapi.Namespaces, "", s.o.SystemNamespace, nil)
	if !errors.Is(err, kubeapi.ErrNotFound) {
		if err != nil {
			return fmt.Errorf("kube store: system namespace %s: %w", s.o.SystemNamespace, err)
		}
		return nil
	}
	ns := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": s.o.SystemNamespace}}
	if err := s.c.Create(ctx, kubeapi.Namespaces, "", ns, nil); err != nil && !errors.Is(err, kubeapi.ErrAlreadyExists) {
		return fmt.Errorf("kube store: create the system namespace %s: %w", s.o.SystemNamespace, err)
	}
	return nil
}

// SystemNamespace returns the namespace of the control plane.
func (s *Store) SystemNamespace() string { return s.o.SystemNamespace }

// Client returns the store's Kubernetes client.
func (s *Store) Client() *kubeapi.Client { return s.c }

// DisplayName returns the display name of resource k: the name of its
// object, without the namespace (admission.Options.DisplayName).
func (s *Store) DisplayName(k resource.Key) string {
	r, err := s.dec.ref(k)
	if err != nil {
		return k.Name
	}
	return r.name
}

// Ref returns the namespace and name of the custom resource of key k.
func (s *Store) Ref(k resource.Key) (namespace, name string, err error) {
	r, err := s.dec.ref(k)
	return r.namespace, r.name, err
}

// Key returns the key of the custom resource of kind k in namespace ns
// named name, or false when such an object is not a resource (a
// HostnameGenerator outside the system namespace).
func (s *Store) Key(k resource.Kind, mesh, ns, name string) (resource.Key, bool) {
	c, ok := crd.For(k)
	if !ok {
		return resource.Key{}, false
	}
	n := s.dec.name(c, ns, name)
	if n == "" {
		return resource.Key{}, false
	}
	if !resource.MustLookup(k).MeshScoped {
		mesh = ""
	}
	return resource.Key{Kind: k, Mesh: mesh, Name: n}, true
}

// kindHandler feeds what kubeapi.Follow sees of one kind to the store.
type kindHandler struct {
	s *Store
	k crd.Kind
}

func (h kindHandler) Replace(items []json.RawMessage, rv string) { h.s.replace(h.k, items, rv) }
func (h kindHandler) Event(ev kubeapi.Event)                     { h.s.event(h.k, ev) }

// event applies one watch event of kind k.
func (s *Store) event(k crd.Kind, ev kubeapi.Event) {
	switch ev.Type {
	case kubeapi.Added, kubeapi.Modified:
		d, err := s.dec.decode(k, ev.Object)
		if err != nil {
			s.o.Log.Warn("kube store: skipping an object it cannot read", "kind", k.Kind, "err", err)
			return
		}
		s.mu.Lock()
		s.put(d, s.o.Now())
		s.mu.Unlock()
		return
	}
	var meta struct {
		Metadata kubeapi.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(ev.Object, &meta); err != nil {
		s.o.Log.Warn("kube store: skipping an event it cannot read", "kind", k.Kind, "err", err)
		return
	}
	v, _ := kubeapi.Revision(meta.Metadata.ResourceVersion)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.Type {
	case kubeapi.Bookmark:
		s.progress[k.Kind] = max(s.progress[k.Kind], v)
		s.wake()
	case kubeapi.Deleted:
		ref := crRef{kind: k.Kind, name: meta.Metadata.Name}
		if k.Namespaced {
			ref.namespace = meta.Metadata.Namespace
		}
		s.remove(ref, meta.Metadata.UID, v, s.o.Now())
	}
}

// relist lists kind k and brings the copy in line with it; it returns the
// list's resourceVersion.
func (s *Store) relist(ctx context.Context, k crd.Kind) (string, error) {
	var items []json.RawMessage
	rv, err := s.c.List(ctx, k.Resource(), "", kubeapi.ListOptions{}, func(raw json.RawMessage) error {
		items = append(items, raw)
		return nil
	})
	if err != nil {
		return "", err
	}
	s.replace(k, items, rv)
	return rv, nil
}

// replace brings the copy of kind k in line with a list: puts for what
// changed, deletes for what is gone.
func (s *Store) replace(k crd.Kind, raws []json.RawMessage, rv string) {
	items := make([]decoded, 0, len(raws))
	for _, raw := range raws {
		d, err := s.dec.decode(k, raw)
		if err != nil {
			s.o.Log.Warn("kube store: skipping an object it cannot read", "kind", k.Kind, "err", err)
			continue
		}
		items = append(items, d)
	}
	listRV, _ := kubeapi.Revision(rv)
	now := s.o.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[crRef]bool{}
	for _, d := range items {
		seen[d.ref] = true
		s.put(d, now)
	}
	for ref := range s.refs {
		if ref.kind == k.Kind && !seen[ref] {
			s.remove(ref, "", listRV, now)
		}
	}
	for ref := range s.invalid {
		if ref.kind == k.Kind && !seen[ref] {
			delete(s.invalid, ref)
		}
	}
	s.progress[k.Kind] = max(s.progress[k.Kind], listRV)
	s.wake()
}

// nextRev returns the revision of the next event. Revisions are dense,
// and the first event of a process follows the etcd revision at which it
// opened: a process issues at most one event per write to the cluster, so
// its revisions stay below the next process's.
func (s *Store) nextRev() int64 {
	s.rev = max(s.rev, s.base) + 1
	return s.rev
}

// put applies the current state of a custom resource. s.mu is held.
func (s *Store) put(d decoded, now time.Time) {
	s.progress[d.ref.kind] = max(s.progress[d.ref.kind], d.version)
	defer s.wake()
	ack := ackKey{ref: d.ref, version: d.version}
	prev, had := s.refs[d.ref]
	if d.obj == nil {
		s.invalid[d.ref] = &d
		if had {
			s.deleteKey(prev, s.nextRev(), now)
			delete(s.refs, d.ref)
		}
		s.acks.add(ack, s.rev)
		return
	}
	delete(s.invalid, d.ref)
	delete(s.stale, d.ref)
	k := d.obj.Key()
	if had && prev == k {
		if e := s.objects[k]; e.uid == d.uid && e.version == d.version {
			s.acks.add(ack, e.rev)
			return // a relist of what the watch showed
		}
	}
	if had && prev != k {
		s.deleteKey(prev, s.nextRev(), now) // its mesh label changed
	}
	data, err := json.Marshal(d.obj)
	if err != nil {
		s.o.Log.Error("kube store: encoding an object", "kind", k.Kind, "name", k.Name, "err", err)
		return
	}
	e := &entry{ref: d.ref, uid: d.uid, version: d.version, rev: s.nextRev(), data: data}
	s.objects[k] = e
	s.refs[d.ref] = k
	if d.reported != "" {
		s.stale[d.ref] = staleReport(d, data)
	}
	s.feed.add(e.rev, k, e, now)
	s.acks.add(ack, e.rev)
	s.notify()
}

// remove applies the deletion of a custom resource (of incarnation uid,
// when known) at resourceVersion v. s.mu is held.
func (s *Store) remove(ref crRef, uid string, v int64, now time.Time) {
	s.progress[ref.kind] = max(s.progress[ref.kind], v)
	defer s.wake()
	delete(s.invalid, ref)
	delete(s.stale, ref)
	k, ok := s.refs[ref]
	if !ok {
		s.acks.add(ackKey{ref: ref, uid: uid, deleted: true}, s.rev)
		return
	}
	if e := s.objects[k]; uid != "" && e.uid != uid {
		return // an older incarnation's deletion, seen after the new one
	}
	delete(s.refs, ref)
	rev := s.nextRev()
	s.deleteKey(k, rev, now)
	s.acks.add(ackKey{ref: ref, uid: uid, deleted: true}, rev)
}

func (s *Store) deleteKey(k resource.Key, rev int64, now time.Time) {
	delete(s.objects, k)
	s.feed.add(rev, k, nil, now)
	s.notify()
}

// notify wakes the readers of the feed. s.mu is held.
func (s *Store) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// wake wakes the writers waiting for their echo. s.mu is held.
func (s *Store) wake() {
	close(s.advanced)
	s.advanced = make(chan struct{})
}

// object decodes an entry.
func (e *entry) object() (*resource.Object, error) {
	var o resource.Object
	if err := json.Unmarshal(e.data, &o); err != nil {
		return nil, fmt.Errorf("decode %s: %w", e.ref, err)
	}
	o.Version, o.Revision = e.version, e.rev
	return &o, nil
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, k resource.Key) (*resource.Object, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, store.ErrClosed
	}
	e, ok := s.objects[k]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("get %s: %w", k, store.ErrNotFound)
	}
	return e.object()
}

// List implements store.Store. It first waits until the copy reflects
// every write committed before the call (see the package comment).
func (s *Store) List(ctx context.Context, k resource.Kind) ([]*resource.Object, int64, error) {
	if k != "" {
		if _, ok := resource.Lookup(k); !ok {
			return nil, 0, fmt.Errorf("list: unknown kind %q: must be one of %v", k, resource.KindNames())
		}
	}
	if err := s.catchUp(ctx); err != nil {
		return nil, 0, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, 0, store.ErrClosed
	}
	entries := make([]*entry, 0, len(s.objects))
	for key, e := range s.objects {
		if k == "" || key.Kind == k {
			entries = append(entries, e)
		}
	}
	rev := s.rev
	s.mu.Unlock()
	out := make([]*resource.Object, 0, len(entries))
	for _, e := range entries {
		o, err := e.object()
		if err != nil {
			return nil, 0, err
		}
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b *resource.Object) int {
		return strings.Compare(string(a.Kind)+"\x00"+a.Mesh+"\x00"+a.Name, string(b.Kind)+"\x00"+b.Mesh+"\x00"+b.Name)
	})
	return out, rev, nil
}

// catchUp lists every kind (a consistent read) and waits until the copy
// holds each listed object at least at its listed version, and nothing
// the list no longer holds but what was created since.
func (s *Store) catchUp(ctx context.Context) error {
	type listed struct {
		version int64
		uid     string
	}
	for _, k := range s.kinds {
		want := map[crRef]listed{}
		rv, err := s.c.List(ctx, k.Resource(), "", kubeapi.ListOptions{}, func(raw json.RawMessage) error {
			var m struct {
				Metadata kubeapi.ObjectMeta `json:"metadata"`
			}
			if err := json.Unmarshal(raw, &m); err != nil {
				return err
			}
			ref := crRef{kind: k.Kind, name: m.Metadata.Name}
			if k.Namespaced {
				ref.namespace = m.Metadata.Namespace
			}
			v, _ := kubeapi.Revision(m.Metadata.ResourceVersion)
			want[ref] = listed{v, m.Metadata.UID}
			return nil
		})
		if err != nil {
			return s.unavailable(ctx, "list", err)
		}
		listRV, _ := kubeapi.Revision(rv)
		caughtUp := func() bool {
			if s.progress[k.Kind] >= listRV {
				return true
			}
			for ref, l := range want {
				if v, ok := s.versionOf(ref); !ok || v < l.version {
					return false
				}
			}
			for ref, key := range s.refs {
				if _, ok := want[ref]; ref.kind == k.Kind && !ok && s.objects[key].version <= listRV {
					return false // deleted before the list; the watch has not shown it yet
				}
			}
			return true
		}
		if err := s.waitFor(ctx, caughtUp); err != nil {
			return fmt.Errorf("list: the watch of %s does not catch up with the API server: %w", k.Plural, err)
		}
	}
	return nil
}

// versionOf returns the version of the copy of ref, valid or not. s.mu is held.
func (s *Store) versionOf(ref crRef) (int64, bool) {
	if k, ok := s.refs[ref]; ok {
		return s.objects[k].version, true
	}
	if d, ok := s.invalid[ref]; ok {
		return d.version, true
	}
	return 0, false
}

// waitFor waits until cond, called with s.mu held, holds, for at most
// EchoTimeout.
func (s *Store) waitFor(ctx context.Context, cond func() bool) error {
	timeout := time.NewTimer(s.o.EchoTimeout)
	defer timeout.Stop()
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return store.ErrClosed
		}
		ok, ch := cond(), s.advanced
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout.C:
			return fmt.Errorf("%w: no echo from the watch within %s", store.ErrUnavailable, s.o.EchoTimeout)
		case <-ch:
		}
	}
}

// Changes implements store.Store.
func (s *Store) Changes(ctx context.Context, after int64, limit int) ([]store.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, store.ErrClosed
	}
	if after < s.feed.start || after > 0 && after <= s.base {
		s.mu.Unlock()
		return nil, fmt.Errorf("changes after %d: the feed of this process starts at %d: %w", after, max(s.feed.start, s.base), store.ErrCompacted)
	}
	type ev struct {
		rev int64
		key resource.Key
		e   *entry
	}
	var evs []ev
	for i := s.feed.after(after); i < len(s.feed.events); i++ {
		fe := s.feed.events[i]
		if fe.dead {
			continue
		}
		evs = append(evs, ev{fe.rev, fe.key, fe.e})
		if limit > 0 && len(evs) == limit {
			break
		}
	}
	s.mu.Unlock()
	out := make([]store.Event, len(evs))
	for i, e := range evs {
		out[i] = store.Event{Type: store.EventDelete, Revision: e.rev, Key: e.key}
		if e.e != nil {
			o, err := e.e.object()
			if err != nil {
				return nil, err
			}
			out[i].Type, out[i].Object = store.EventPut, o
		}
	}
	return out, nil
}

// Changed implements store.Store.
func (s *Store) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Compact drops the tombstones older than retention.
func (s *Store) Compact(ctx context.Context, retention time.Duration) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, store.ErrClosed
	}
	return s.feed.compact(s.o.Now().Add(-retention)), nil
}

// Close stops the watches; later calls return ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	s.closed = true
	s.wake()
	s.notify()
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

// unavailable wraps an API failure.
func (s *Store) unavailable(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, kubeapi.ErrUnavailable) {
		return fmt.Errorf("%s: %w: %w", what, store.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Invalid returns the custom resources meshnames does not use because they
// are invalid, with the reasons.
func (s *Store) Invalid() map[string]validate.Errors {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]validate.Errors, len(s.invalid))
	for ref, d := range s.invalid {
		out[ref.String()] = d.errs
	}
	return out
}
