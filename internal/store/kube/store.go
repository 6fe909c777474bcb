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
// differences. The store keeps each object's JSON compressed against a
// dictionary (about an eighth of it, not a decoded copy: compress.go) and a
// change feed of each resource's last write.
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
// It imports store, store/backend, resource, validate, decode, crd,
// kubeapi and s2dict. A Store is
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

	mu sync.Mutex
	// refs are the valid custom resources, each the entry of its
	// resource (entry finds one by key: the key gives the name).
	refs    map[crRef]*entry
	invalid map[crRef]*decoded
	// stale are valid objects whose status still shows Valid=False.
	stale    map[crRef]report
	feed     feed
	rev      int64                   // of the last event; 0 before the first
	base     int64                   // the etcd revision when the store opened
	progress map[resource.Kind]int64 // the newest resourceVersion each watch delivered
	acks     acks
	// fresh holds the objects of the last watch events until the change
	// feed hands them out (handOff).
	fresh    map[*entry]*resource.Object
	advanced chan struct{} // closed and replaced when an event is applied
	changed  chan struct{}
	closed   bool

	leases     leaseCache
	leaseWatch leaseWatch
	records    records

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var _ store.Store = (*Store)(nil)
var _ store.Compacter = (*Store)(nil)

// entry is the stored copy of one resource, or the tombstone of its
// deletion (no data), as the change feed has it. The store holds one for
// every resource: what it holds beyond the data costs as much again as
// the data itself for a typical one, so it holds each thing once. Only
// pos changes after the entry is made (under the store's mutex).
type entry struct {
	key     resource.Key
	uid     uid
	version int64
	rev     int64
	data    []byte // the object's JSON (resource.Object.MarshalJSON), compressed (compress.go)
	pos     int    // in feed.events
}

// entry returns the live entry of resource k. s.mu is held.
func (s *Store) entry(k resource.Key) (*entry, bool) {
	ref, err := s.dec.ref(k)
	if err != nil {
		return nil, false
	}
	e, ok := s.refs[ref]
	if !ok || e.key != k {
		return nil, false
	}
	return e, true
}

// tombstone reports whether e is the tombstone of a deletion.
func (e *entry) tombstone() bool { return e.data == nil }

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
		refs:     map[crRef]*entry{},
		invalid:  map[crRef]*decoded{},
		fresh:    map[*entry]*resource.Object{},
		stale:    map[crRef]report{},
		feed:     newFeed(),
		progress: map[resource.Kind]int64{},
		acks:     newAcks(ackWindow),
		advanced: make(chan struct{}),
		changed:  make(chan struct{}),
		leases:   leaseCache{m: map[string]cachedLease{}},
	}
	s.leaseWatch.waits = map[string]chan struct{}{}
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
	s.wg.Go(func() {
		s.c.Follow(wctx, kubeapi.Leases, s.o.SystemNamespace, kubeapi.ListOptions{LabelSelector: leaseLabel + "=true"}, "", leaseHandler{&s.leaseWatch}, s.o.Log)
	})
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
	s.leaseWatch.stop()
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
