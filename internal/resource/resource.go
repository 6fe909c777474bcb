// Package resource defines the kinds meshnames stores (Mesh, Dataplane,
// MeshService, MeshExternalService, MeshMultiZoneService, HostnameGenerator,
// Zone, ZoneIngress), the document envelope they share, their validation
// and defaults, and the YAML/JSON codec for the Kuma universal document shape:
//
//	type, name, mesh (mesh-scoped kinds), labels, spec, status (read-only),
//	creationTime, modificationTime (read-only)
//
// It imports validate, decode and hostname only. Objects are plain values;
// Clone returns a deep copy that shares nothing with the original, and every
// package that hands objects across goroutines (store, cache) hands out clones.
package resource

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/meshnames/meshnames/internal/validate"
)

// Kind names a resource kind exactly as users write it in `type:`.
type Kind string

// The kinds, spelled as in the seeds and in Kuma.
const (
	Mesh                 Kind = "Mesh"
	Dataplane            Kind = "Dataplane"
	MeshService          Kind = "MeshService"
	MeshExternalService  Kind = "MeshExternalService"
	MeshMultiZoneService Kind = "MeshMultiZoneService"
	HostnameGenerator    Kind = "HostnameGenerator"
	Zone                 Kind = "Zone"
	ZoneIngress          Kind = "ZoneIngress"
)

// Key identifies one resource. Mesh is empty for kinds that are not
// mesh-scoped.
type Key struct {
	Kind Kind
	Mesh string
	Name string
}

func (k Key) String() string {
	if k.Mesh == "" {
		return fmt.Sprintf("%s %s", k.Kind, k.Name)
	}
	return fmt.Sprintf("%s %s/%s", k.Kind, k.Mesh, k.Name)
}

// Spec is the kind-specific desired state written by users. Implementations
// are pointers to the *Spec structs of this package.
type Spec interface {
	// Default fills in defaults and folds accepted aliases into their
	// canonical fields, so that equal intent stores as equal specs.
	Default()
	// Validate reports every violation, with paths under p (usually "spec").
	Validate(p validate.Path) validate.Errors
	// CloneSpec returns a deep copy.
	CloneSpec() Spec
}

// Status is the kind-specific observed state written by controllers.
type Status interface {
	CloneStatus() Status
}

// Object is one resource: metadata, spec and status.
type Object struct {
	Kind   Kind
	Mesh   string // empty unless the kind is mesh-scoped
	Name   string
	Labels map[string]string

	CreationTime     time.Time
	ModificationTime time.Time
	// Version counts the writes to this resource, starting at 1; a write
	// that names an older version is a conflict (optimistic concurrency).
	Version int64
	// Revision is the store-wide revision of the last write to this resource.
	Revision int64

	Spec   Spec
	Status Status // nil for kinds without status, or before a controller wrote one
}

// Key returns the object's identity.
func (o *Object) Key() Key { return Key{Kind: o.Kind, Mesh: o.Mesh, Name: o.Name} }

// Clone returns a deep copy of o.
func (o *Object) Clone() *Object {
	if o == nil {
		return nil
	}
	c := *o
	c.Labels = maps.Clone(o.Labels)
	if o.Spec != nil {
		c.Spec = o.Spec.CloneSpec()
	}
	if o.Status != nil {
		c.Status = o.Status.CloneStatus()
	}
	return &c
}

// Descriptor says how a kind behaves.
type Descriptor struct {
	Kind Kind
	// Plural is the lower case collection name used in REST paths and on
	// the command line (meshservices).
	Plural string
	// ShortName is the Kuma short name (msvc), also accepted on the command
	// line; empty for a kind without one.
	ShortName  string
	MeshScoped bool
	// ServiceKind marks the kinds that get hostnames and VIPs; their names
	// must be DNS-1035 labels.
	ServiceKind bool
	HasStatus   bool
	// SystemLabels marks the kinds the control plane labels with
	// kuma.io/origin, kuma.io/zone and kuma.io/display-name on write
	// (internal/admission): the mesh-scoped kinds, HostnameGenerator and
	// ZoneIngress.
	SystemLabels bool
	newSpec      func() Spec
	newStatus    func() Status
	// specType and statusType are the types newSpec and newStatus return
	// (statusType nil for none), set once (init).
	specType, statusType reflect.Type
}

func init() {
	for _, d := range descriptors {
		d.specType, d.statusType = reflect.TypeOf(d.NewSpec()), reflect.TypeOf(d.NewStatus())
	}
}

// SpecType returns the type of the kind's specs: what NewSpec returns.
// Stores check what they are given against it without making a spec.
func (d *Descriptor) SpecType() reflect.Type { return d.specType }

// StatusType returns the type of the kind's statuses, nil when it has
// none (reflect.TypeOf of NewStatus).
func (d *Descriptor) StatusType() reflect.Type { return d.statusType }

// NewSpec returns an empty spec of the kind.
func (d *Descriptor) NewSpec() Spec { return d.newSpec() }

// NewStatus returns an empty status of the kind, or nil when the kind has none.
func (d *Descriptor) NewStatus() Status {
	if d.newStatus == nil {
		return nil
	}
	return d.newStatus()
}

var descriptors = []*Descriptor{
	{Kind: Mesh, Plural: "meshes", ShortName: "mesh",
		newSpec: func() Spec { return &MeshSpec{} }},
	{Kind: Dataplane, Plural: "dataplanes", ShortName: "dp", MeshScoped: true, SystemLabels: true,
		newSpec: func() Spec { return &DataplaneSpec{} }},
	{Kind: MeshService, Plural: "meshservices", ShortName: "msvc", MeshScoped: true, SystemLabels: true, ServiceKind: true, HasStatus: true,
		newSpec: func() Spec { return &MeshServiceSpec{} }, newStatus: func() Status { return &ServiceStatus{} }},
	{Kind: MeshExternalService, Plural: "meshexternalservices", ShortName: "extsvc", MeshScoped: true, SystemLabels: true, ServiceKind: true, HasStatus: true,
		newSpec: func() Spec { return &MeshExternalServiceSpec{} }, newStatus: func() Status { return &ServiceStatus{} }},
	{Kind: MeshMultiZoneService, Plural: "meshmultizoneservices", ShortName: "mzsvc", MeshScoped: true, SystemLabels: true, ServiceKind: true, HasStatus: true,
		newSpec: func() Spec { return &MeshMultiZoneServiceSpec{} }, newStatus: func() Status { return &MultiZoneServiceStatus{} }},
	{Kind: HostnameGenerator, Plural: "hostnamegenerators", ShortName: "hg", SystemLabels: true,
		newSpec: func() Spec { return &HostnameGeneratorSpec{} }},
	{Kind: Zone, Plural: "zones", ShortName: "zone",
		newSpec: func() Spec { return &ZoneSpec{} }},
	{Kind: ZoneIngress, Plural: "zoneingresses", SystemLabels: true,
		newSpec: func() Spec { return &ZoneIngressSpec{} }},
}

// Descriptors returns every kind's descriptor, in a stable order.
func Descriptors() []*Descriptor { return slices.Clone(descriptors) }

// Lookup returns the descriptor of kind k.
func Lookup(k Kind) (*Descriptor, bool) {
	for _, d := range descriptors {
		if d.Kind == k {
			return d, true
		}
	}
	return nil, false
}

// MustLookup is Lookup for kinds known at compile time.
func MustLookup(k Kind) *Descriptor {
	d, ok := Lookup(k)
	if !ok {
		panic("resource: unknown kind " + string(k))
	}
	return d
}

// KindNames returns every kind name, for error messages.
func KindNames() []string {
	names := make([]string, len(descriptors))
	for i, d := range descriptors {
		names[i] = string(d.Kind)
	}
	return names
}
