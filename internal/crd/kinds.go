// Package crd describes meshnames' kinds as Kubernetes custom resources in
// the API group kuma.io, version v1alpha1, with Kuma's kind names so that
// Kuma users' manifests and RBAC rules carry over: which kinds are
// cluster-scoped, which live only in the control plane's system namespace,
// their printer columns, and their CustomResourceDefinitions with OpenAPI
// schemas generated from the Go types of the resource package (schema.go).
//
// It imports resource and kubeapi only. Everything in it is immutable.
package crd

import (
	"slices"

	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/resource"
)

// The API group and version of every kind.
const (
	Group   = "kuma.io"
	Version = "v1alpha1"
)

// DefaultSystemNamespace is the namespace of the control plane when none is
// configured: HostnameGenerators and MeshExternalServices live only there
// (seeds 000 and 003), ZoneIngresses too (the zone's own, not a
// namespace's), and so does the control plane's own bookkeeping
// (leases).
const DefaultSystemNamespace = "meshnames-system"

// Column is an additional printer column of `kubectl get`.
type Column struct {
	Name, Type, JSONPath, Description string
	// Priority 0 columns show by default, 1 with -o wide.
	Priority int
}

// Kind is one kind as a custom resource.
type Kind struct {
	Kind       resource.Kind
	Plural     string
	Singular   string
	ShortNames []string
	// Namespaced kinds have objects in namespaces; the others are
	// cluster-scoped (Mesh, Zone: global kinds, as in Kuma).
	Namespaced bool
	// SystemOnly kinds are namespaced but valid only in the system
	// namespace (HostnameGenerator, MeshExternalService, ZoneIngress).
	SystemOnly bool
	Columns    []Column
}

// Resource returns the API collection of the kind.
func (k Kind) Resource() kubeapi.Resource {
	return kubeapi.Resource{Group: Group, Version: Version, Resource: k.Plural, Namespaced: k.Namespaced}
}

// APIVersion is the apiVersion of the kind's objects.
func APIVersion() string { return Group + "/" + Version }

var (
	meshColumn = Column{Name: "Mesh", Type: "string", JSONPath: `.metadata.labels.kuma\.io/mesh`, Description: "The mesh of the resource."}
	hostnames  = Column{Name: "Hostnames", Type: "string", JSONPath: ".status.addresses[*].hostname", Description: "The hostnames generated for the service."}
	vips       = Column{Name: "VIPs", Type: "string", JSONPath: ".status.vips[*].ip", Description: "The virtual IPs of the service."}
	age        = Column{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"}
)

var kinds = []Kind{
	{Kind: resource.Mesh, Plural: "meshes", Singular: "mesh", Columns: []Column{age}},
	{Kind: resource.Zone, Plural: "zones", Singular: "zone", Columns: []Column{
		{Name: "Enabled", Type: "boolean", JSONPath: ".spec.enabled", Description: "Whether the zone's services are synced to other zones."}, age}},
	{Kind: resource.Dataplane, Plural: "dataplanes", Singular: "dataplane", ShortNames: []string{"dp"}, Namespaced: true, Columns: []Column{
		meshColumn, {Name: "Address", Type: "string", JSONPath: ".spec.networking.address", Description: "The proxy's address."}, age}},
	{Kind: resource.MeshService, Plural: "meshservices", Singular: "meshservice", ShortNames: []string{"msvc"}, Namespaced: true, Columns: []Column{
		meshColumn, hostnames, vips,
		{Name: "Ports", Type: "string", JSONPath: ".spec.ports[*].port", Description: "The ports of the service.", Priority: 1}, age}},
	{Kind: resource.MeshExternalService, Plural: "meshexternalservices", Singular: "meshexternalservice", ShortNames: []string{"extsvc"}, Namespaced: true, SystemOnly: true, Columns: []Column{
		meshColumn, hostnames, vips, age}},
	{Kind: resource.MeshMultiZoneService, Plural: "meshmultizoneservices", Singular: "meshmultizoneservice", ShortNames: []string{"mzsvc"}, Namespaced: true, Columns: []Column{
		meshColumn, hostnames, vips, age}},
	{Kind: resource.ZoneIngress, Plural: "zoneingresses", Singular: "zoneingress", Namespaced: true, SystemOnly: true, Columns: []Column{
		{Name: "Zone", Type: "string", JSONPath: `.metadata.labels.kuma\.io/zone`, Description: "The zone of the ingress."},
		{Name: "Address", Type: "string", JSONPath: ".spec.networking.address", Description: "The address the ingress listens on."},
		{Name: "Advertised", Type: "string", JSONPath: ".spec.networking.advertisedAddress", Description: "The address other zones reach the ingress at, when not its own."},
		age}},
	{Kind: resource.HostnameGenerator, Plural: "hostnamegenerators", Singular: "hostnamegenerator", ShortNames: []string{"hg"}, Namespaced: true, SystemOnly: true, Columns: []Column{
		{Name: "Template", Type: "string", JSONPath: ".spec.template", Description: "The template of the hostnames."}, age}},
}

// Kinds returns every kind, in the order of resource.Descriptors.
func Kinds() []Kind {
	out := slices.Clone(kinds)
	order := map[resource.Kind]int{}
	for i, d := range resource.Descriptors() {
		order[d.Kind] = i
	}
	slices.SortFunc(out, func(a, b Kind) int { return order[a.Kind] - order[b.Kind] })
	return out
}

// For returns the kind k.
func For(k resource.Kind) (Kind, bool) {
	for _, c := range kinds {
		if c.Kind == k {
			return c, true
		}
	}
	return Kind{}, false
}

// ByName returns the kind whose Kubernetes kind name is name.
func ByName(name string) (Kind, bool) { return For(resource.Kind(name)) }
