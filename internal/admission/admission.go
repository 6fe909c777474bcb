// Package admission is the one door through which every resource write
// passes, whoever makes it: a user through the REST API (PUT, apply,
// kumactl, the GUI), a zone control plane's sync stream received by the
// global, the global's stream received by a zone, or the control plane
// itself (default resources, MeshServices synthesised from Dataplanes, the
// Kubernetes ingester). For each it defaults the document, validates it,
// decides whether this writer may write it on a control plane of this mode
// (ARCHITECTURE.md sections 2, 7 and 9), and sets the labels the control
// plane owns: kuma.io/origin, kuma.io/zone, kuma.io/display-name and
// kuma.io/mesh. Every violation is reported at once, each with its field.
//
// Put and Delete then write through the store with optimistic versions;
// Plan does the same without writing (dry runs).
//
// It imports resource, store, cache and validate. An Admitter is safe for
// concurrent use; it keeps no state of its own.
package admission

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/validate"
)

// Source says through which door a write comes.
type Source int

const (
	// User is an operator or a workload writing through the API.
	User Source = iota
	// System is the control plane itself: default resources, MeshServices
	// synthesised from Dataplanes, the Kubernetes ingester.
	System
	// FromZone is a zone's sync stream, received by the global control
	// plane; Writer.Zone is the zone its token names.
	FromZone
	// FromGlobal is the global's sync stream, received by a zone.
	FromGlobal
)

func (s Source) String() string {
	switch s {
	case User:
		return "user"
	case System:
		return "system"
	case FromZone:
		return "zone sync"
	case FromGlobal:
		return "global sync"
	}
	return fmt.Sprintf("Source(%d)", int(s))
}

// Writer is who writes.
type Writer struct {
	Source Source
	// Zone is the zone a FromZone stream authenticated as.
	Zone string
	// Subject names the writer in messages and the audit log.
	Subject string
}

// Errors of Put and Delete besides the store's and validation's
// (validate.Errors, which is an error).
var (
	// ErrReadOnly means the resource belongs to another control plane: it
	// was synced here, and only its owner's stream changes it.
	ErrReadOnly = errors.New("read-only")
	// ErrMeshNotEmpty means a Mesh still holds resources.
	ErrMeshNotEmpty = errors.New("mesh not empty")
)

// Error carries a sentinel (ErrReadOnly, ErrMeshNotEmpty, store.ErrConflict,
// store.ErrNotFound) with a message for the user.
type Error struct {
	Err error
	Msg string
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Err }

func newError(sentinel error, format string, args ...any) *Error {
	return &Error{Err: sentinel, Msg: fmt.Sprintf(format, args...)}
}

// Creator stores new resources together with the status the controllers
// decide for them, one write each instead of a create and then a status
// write (reconcile.Runner.Create). Decides says of which kinds; ok false
// means it wrote nothing (no controllers run here now), and the writer
// writes a plain create.
type Creator interface {
	Decides(k resource.Kind) bool
	Create(ctx context.Context, creates []store.Creation) (results []store.Result, ok bool, err error)
}

// Options configures an Admitter.
type Options struct {
	// Mode and Zone are this control plane's (resource.ModeStandalone,
	// ModeZone, ModeGlobal).
	Mode string
	Zone string
	// Store and Cache are needed by Put, Delete and Plan only.
	Store store.Store
	Cache *cache.Cache
	// Creator, when set, stores what Put creates of the kinds it decides,
	// with its status. When Store has a method Accompany(ctx, store.OpType)
	// ([]store.Op, func()), its ops are written with each such create (the
	// API's audit entry), and its func is called once they committed.
	Creator Creator
	// DisplayName, when set, returns the display name of the resource k:
	// the name its hostnames see, checked as a service name and written
	// into kuma.io/display-name. It is k.Name when nil; the Kubernetes
	// store names a MeshService "web.shop" after the object web of
	// namespace shop, whose display name is web.
	DisplayName func(k resource.Key) string
}

// Admitter applies the rules of a control plane.
type Admitter struct{ o Options }

// New returns an Admitter; it does no I/O.
func New(o Options) *Admitter { return &Admitter{o: o} }

// Mode returns the control plane's mode.
func (a *Admitter) Mode() string { return a.o.Mode }

// Zone returns the control plane's zone.
func (a *Admitter) Zone() string { return a.o.Zone }

// Admit prepares obj for the store as written by w: it applies the kind's
// defaults, validates it, checks that w may write its kind here, and sets
// the system labels. It returns every violation; obj must not be written
// when there is one. It does not look at what is stored (Put does).
//
// The labels are set before the object is validated, so that what the
// control plane derives is held to the rules that every control plane the
// object reaches applies to it: what a zone admits, the global and the
// other zones admit too.
func (a *Admitter) Admit(obj *resource.Object, w Writer) validate.Errors {
	if obj.Spec != nil {
		obj.Spec.Default()
	}
	labelErrs := a.labels(obj, w)
	check := obj
	if display := a.displayName(obj); display != obj.Name {
		c := *obj
		c.Name = display
		check = &c
	}
	errs := resource.Validate(check)
	errs.Append(labelErrs)
	return errs
}

// displayName returns the display name of obj.
func (a *Admitter) displayName(obj *resource.Object) string {
	if a.o.DisplayName == nil {
		return obj.Name
	}
	return a.o.DisplayName(obj.Key())
}

// Owner returns who writes kind k in a multi-zone deployment when users of
// a control plane in mode may not: MeshServices, Dataplanes and
// ZoneIngresses belong to zones, Meshes, Zones and MeshMultiZoneServices
// to the global control plane (seed 002). It returns "" when users in mode
// may write k.
func Owner(k resource.Kind, mode string) string {
	switch mode {
	case resource.ModeGlobal:
		if k == resource.MeshService || k == resource.Dataplane || k == resource.ZoneIngress {
			return "a zone control plane"
		}
	case resource.ModeZone:
		if k == resource.MeshMultiZoneService || k == resource.Mesh || k == resource.Zone {
			return "the global control plane"
		}
	}
	return ""
}

// systemLabelKeys are the labels the control plane owns.
var systemLabelKeys = resource.SystemLabelKeys

// carriesSystemLabels reports whether the control plane labels kind k with
// origin, zone and display name.
func carriesSystemLabels(k resource.Kind) bool {
	d, ok := resource.Lookup(k)
	return ok && d.SystemLabels
}

// zoneKinds are what a zone sends to the global (seed 002).
var zoneKinds = map[resource.Kind]bool{
	resource.MeshService: true, resource.Dataplane: true, resource.ZoneIngress: true,
	resource.HostnameGenerator: true, resource.MeshExternalService: true,
}

// labels checks that w may write obj's kind here and sets, or checks, the
// labels the control plane owns: a user must not claim another zone's
// origin or another resource's display name (ARCHITECTURE.md section 2).
func (a *Admitter) labels(obj *resource.Object, w Writer) validate.Errors {
	var errs validate.Errors
	want := map[string]string{}
	switch w.Source {
	case User, System:
		if owner := Owner(obj.Kind, a.o.Mode); owner != "" {
			errs.Addf("type", "%s resources are written on %s, not on a %s control plane", obj.Kind, owner, a.o.Mode)
			return errs
		}
		want[resource.LabelDisplayName] = resource.DisplayName(a.displayName(obj))
		if a.o.Mode == resource.ModeGlobal {
			want[resource.LabelOrigin] = resource.OriginGlobal
			if v, ok := obj.Labels[resource.LabelZone]; ok {
				errs.Addf(validate.Path("labels").Key(resource.LabelZone), "must not be set on a global control plane, got %q", v)
			}
		} else {
			want[resource.LabelOrigin] = resource.OriginZone
			want[resource.LabelZone] = a.o.Zone
		}
	case FromZone:
		// The global attributes everything a stream sends to the zone its
		// token names: a zone publishes only its own resources.
		if a.o.Mode != resource.ModeGlobal {
			errs.Addf("type", "zone sync is received only by a global control plane, this one is %s", a.o.Mode)
			return errs
		}
		if !zoneKinds[obj.Kind] {
			errs.Addf("type", "a zone does not send %s resources to the global control plane", obj.Kind)
			return errs
		}
		want[resource.LabelOrigin] = resource.OriginZone
		want[resource.LabelZone] = w.Zone
	case FromGlobal:
		if a.o.Mode != resource.ModeZone {
			errs.Addf("type", "global sync is received only by a zone control plane, this one is %s", a.o.Mode)
			return errs
		}
		want[resource.LabelOrigin] = resource.OriginGlobal
	}
	if !carriesSystemLabels(obj.Kind) {
		return errs
	}
	if resource.MustLookup(obj.Kind).MeshScoped {
		want[resource.LabelMesh] = obj.Mesh
	}
	if obj.Labels == nil {
		obj.Labels = map[string]string{}
	}
	labels := validate.Path("labels")
	for _, k := range systemLabelKeys {
		v, ok := want[k]
		if !ok {
			continue
		}
		// A display name too long for a label is shortened
		// (resource.DisplayName); the name itself, as Kuma writes it,
		// is taken for the short form.
		if got, set := obj.Labels[k]; set && got != v && !(k == resource.LabelDisplayName && got == a.displayName(obj)) {
			errs.Add(labels.Key(k), fmt.Sprintf("is set by the control plane and must be %q here (or left out), got %q", v, got))
			continue
		}
		obj.Labels[k] = v
	}
	return errs
}

// owns reports whether w may change or delete cur, a stored resource: a
// resource synced from another control plane changes only through that
// plane's stream.
func (a *Admitter) owns(cur *resource.Object, w Writer) *Error {
	origin := cur.Labels[resource.LabelOrigin]
	switch {
	case a.o.Mode == resource.ModeZone && origin == resource.OriginGlobal && w.Source != FromGlobal:
		if z := cur.Labels[resource.LabelZone]; z != "" {
			// Another zone's service or ingress: the global only passes it on.
			return newError(ErrReadOnly, "%s was synced from zone %q through the global control plane and is read-only here; change it in zone %q", cur.Key(), z, z)
		}
		return newError(ErrReadOnly, "%s was synced from the global control plane and is read-only here; change it on the global control plane", cur.Key())
	case a.o.Mode == resource.ModeZone && origin != resource.OriginGlobal && w.Source == FromGlobal:
		return newError(ErrReadOnly, "%s was created in this zone; the global control plane cannot replace it", cur.Key())
	case a.o.Mode == resource.ModeGlobal && origin == resource.OriginZone && (w.Source != FromZone || w.Zone != cur.Labels[resource.LabelZone]):
		return newError(ErrReadOnly, "%s belongs to zone %q and changes only through that zone's sync stream", cur.Key(), cur.Labels[resource.LabelZone])
	case a.o.Mode == resource.ModeGlobal && origin != resource.OriginZone && w.Source == FromZone:
		return newError(ErrReadOnly, "%s was created on the global control plane; zone %q cannot replace it", cur.Key(), w.Zone)
	}
	return nil
}

// Owns returns nil when w may change or delete cur, a stored resource, and
// otherwise an *Error wrapping ErrReadOnly that says whose it is. Writers
// that batch their own store writes (the sync streams) check each
// resource with it, as Put and Delete do.
func (a *Admitter) Owns(cur *resource.Object, w Writer) error {
	if e := a.owns(cur, w); e != nil {
		return e
	}
	return nil
}

// checkMesh reports a mesh-scoped object whose mesh does not exist.
func (a *Admitter) checkMesh(obj *resource.Object) validate.Errors {
	var errs validate.Errors
	if !resource.MustLookup(obj.Kind).MeshScoped || resource.MeshName(obj.Mesh) != "" {
		return nil
	}
	if _, ok := a.o.Cache.Get(resource.Key{Kind: resource.Mesh, Name: obj.Mesh}); !ok {
		errs.Addf("mesh", "mesh %q does not exist; create it first", obj.Mesh)
	}
	return errs
}

// Result says what a Put did.
type Result string

// Results of Put.
const (
	Created   Result = "created"
	Updated   Result = "updated"
	Unchanged Result = "unchanged"
)

// PutOptions qualify a Put.
type PutOptions struct {
	// IfMatch, when not 0, is the version the write replaces: a newer one
	// is a conflict, as is a missing resource.
	IfMatch int64
	// Admitted means obj already went through Admit (a caller that checks
	// a whole batch first); Put then only writes.
	Admitted bool
	// MeshesDefined are meshes created by the same batch, ahead of this
	// write: the mesh check accepts them.
	MeshesDefined map[string]bool
}

// Outcome is the result of a Put.
type Outcome struct {
	// Object is the resource as stored.
	Object *resource.Object
	Result Result
}

// Check admits obj for w and also checks what Admit cannot see alone: that
// its mesh exists. It returns every violation.
func (a *Admitter) Check(obj *resource.Object, w Writer, o PutOptions) validate.Errors {
	var errs validate.Errors
	if !o.Admitted {
		errs = a.Admit(obj, w)
	}
	if !o.MeshesDefined[obj.Mesh] {
		errs.Append(a.checkMesh(obj))
	}
	return errs
}

// Put admits obj and creates or updates it. Without IfMatch a concurrent
// change is retried (the last writer wins, as a PUT promises); with it, it
// is a conflict. A write that changes nothing the writer controls (labels
// and spec) is Unchanged and not written.
//
// Errors: validate.Errors (invalid), *Error wrapping ErrReadOnly or
// store.ErrConflict, and the store's errors.
func (a *Admitter) Put(ctx context.Context, obj *resource.Object, w Writer, o PutOptions) (Outcome, error) {
	if errs := a.Check(obj, w, o); len(errs) > 0 {
		return Outcome{}, errs
	}
	for attempt := range 10 {
		cur, err := a.current(ctx, obj, attempt == 0 && o.IfMatch == 0)
		switch {
		case errors.Is(err, store.ErrNotFound):
			if o.IfMatch != 0 {
				return Outcome{}, newError(store.ErrConflict, "%s does not exist, but If-Match names version %d", obj.Key(), o.IfMatch)
			}
			created, err := a.create(ctx, obj)
			if errors.Is(err, store.ErrAlreadyExists) {
				continue
			}
			if err != nil {
				return Outcome{}, err
			}
			return Outcome{Object: created, Result: Created}, nil
		case err != nil:
			return Outcome{}, err
		}
		if e := a.owns(cur, w); e != nil {
			return Outcome{}, e
		}
		if o.IfMatch != 0 && cur.Version != o.IfMatch {
			return Outcome{}, VersionConflict(obj.Key(), o.IfMatch, cur.Version)
		}
		if SameIntent(cur, obj) {
			return Outcome{Object: cur, Result: Unchanged}, nil
		}
		obj.Version = cur.Version
		updated, err := store.Update(ctx, a.o.Store, obj)
		if errors.Is(err, store.ErrConflict) && o.IfMatch == 0 {
			continue
		}
		if err != nil {
			return Outcome{}, err
		}
		return Outcome{Object: updated, Result: Updated}, nil
	}
	return Outcome{}, newError(store.ErrConflict, "%s is being modified concurrently; try again", obj.Key())
}

// accompanier is a store that adds writes to those of a request in
// progress (the API's auditing store).
type accompanier interface {
	Accompany(ctx context.Context, t store.OpType) (ops []store.Op, committed func())
}

// create stores obj, a new resource: through the Creator, with its status,
// when it decides obj's kind and its controllers run; a plain create
// otherwise.
func (a *Admitter) create(ctx context.Context, obj *resource.Object) (*resource.Object, error) {
	if a.o.Creator == nil || !a.o.Creator.Decides(obj.Kind) {
		return store.Create(ctx, a.o.Store, obj)
	}
	c := store.Creation{Object: obj}
	var committed func()
	if acc, ok := a.o.Store.(accompanier); ok {
		c.With, committed = acc.Accompany(ctx, store.OpCreate)
	}
	rs, ok, err := a.o.Creator.Create(ctx, []store.Creation{c})
	switch {
	case err != nil:
		return nil, err
	case !ok:
		obj.Status = nil
		return store.Create(ctx, a.o.Store, obj)
	case rs[0].Err != nil:
		return nil, rs[0].Err
	}
	if committed != nil {
		committed()
	}
	// What was stored, as every reader sees it (its creation time is the
	// store's): the cache holds it once it has caught up.
	if err := a.o.Cache.WaitFor(ctx, rs[0].Revision); err == nil {
		if got, ok := a.o.Cache.Get(obj.Key()); ok && got.Revision == rs[0].Revision {
			return got, nil
		}
	}
	return a.o.Store.Get(ctx, obj.Key())
}

// current returns the stored resource obj would replace. When cached is
// true it may answer from the cache instead of reading the store: the write
// that follows checks the version (or that the key is free), so a stale
// cache costs one retry, never a lost write. The one answer the cache may
// not give is "unchanged": that would drop a PUT if another instance had
// changed the resource, so it is confirmed with the store.
func (a *Admitter) current(ctx context.Context, obj *resource.Object, cached bool) (*resource.Object, error) {
	if cached {
		c, ok := a.o.Cache.Get(obj.Key())
		if !ok {
			return nil, store.ErrNotFound
		}
		if !SameIntent(c, obj) {
			return c, nil
		}
	}
	return a.o.Store.Get(ctx, obj.Key())
}

// VersionConflict is the error of a write whose If-Match names an old version.
func VersionConflict(k resource.Key, want, got int64) *Error {
	return newError(store.ErrConflict, "%s is at version %d, but If-Match names version %d", k, got, want)
}

// SameIntent reports whether a write of next over cur would change nothing
// a writer controls: labels and spec.
func SameIntent(cur, next *resource.Object) bool {
	if !maps.Equal(cur.Labels, next.Labels) {
		return false
	}
	a, err1 := resource.MarshalSpec(cur.Spec)
	b, err2 := resource.MarshalSpec(next.Spec)
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}

// Delete removes the resource k as written by w; ifMatch, when not 0, is
// the version it must have. It returns the revision of the deletion.
//
// Errors: *Error wrapping ErrReadOnly, ErrMeshNotEmpty or
// store.ErrConflict, store.ErrNotFound, and the store's errors.
func (a *Admitter) Delete(ctx context.Context, k resource.Key, w Writer, ifMatch int64) (int64, error) {
	if w.Source == User || w.Source == System {
		if owner := Owner(k.Kind, a.o.Mode); owner != "" {
			return 0, newError(ErrReadOnly, "%s resources are written on %s, not on a %s control plane", k.Kind, owner, a.o.Mode)
		}
	}
	if cur, ok := a.o.Cache.Get(k); ok {
		if e := a.owns(cur, w); e != nil {
			return 0, e
		}
	}
	if k.Kind == resource.Mesh {
		if e := a.checkMeshEmpty(k.Name); e != nil {
			return 0, e
		}
	}
	rev, err := store.Delete(ctx, a.o.Store, k, ifMatch)
	if errors.Is(err, store.ErrConflict) {
		var got int64
		if cur, _ := a.o.Store.Get(ctx, k); cur != nil {
			got = cur.Version
		}
		return 0, VersionConflict(k, ifMatch, got)
	}
	return rev, err
}

// checkMeshEmpty refuses to delete a mesh that still holds resources: a
// deletion that silently took every service with it would be a disaster.
func (a *Admitter) checkMeshEmpty(mesh string) *Error {
	var held []string
	for _, d := range resource.Descriptors() {
		if !d.MeshScoped {
			continue
		}
		if n := a.o.Cache.Count(d.Kind, mesh); n > 0 {
			held = append(held, fmt.Sprintf("%d %s", n, d.Kind))
		}
	}
	if len(held) == 0 {
		return nil
	}
	return newError(ErrMeshNotEmpty, "mesh %q still holds %s; delete them first", mesh, strings.Join(held, ", "))
}

// Plan admits obj as Put would and says what Put would do, without
// writing: Created, Updated or Unchanged, or the error Put would return
// before writing. It reads the store, so its answer is current.
func (a *Admitter) Plan(ctx context.Context, obj *resource.Object, w Writer, o PutOptions) (Result, error) {
	if errs := a.Check(obj, w, o); len(errs) > 0 {
		return "", errs
	}
	cur, err := a.o.Store.Get(ctx, obj.Key())
	switch {
	case errors.Is(err, store.ErrNotFound):
		if o.IfMatch != 0 {
			return "", newError(store.ErrConflict, "%s does not exist, but If-Match names version %d", obj.Key(), o.IfMatch)
		}
		return Created, nil
	case err != nil:
		return "", err
	}
	if e := a.owns(cur, w); e != nil {
		return "", e
	}
	if o.IfMatch != 0 && cur.Version != o.IfMatch {
		return "", VersionConflict(obj.Key(), o.IfMatch, cur.Version)
	}
	if SameIntent(cur, obj) {
		return Unchanged, nil
	}
	return Updated, nil
}
