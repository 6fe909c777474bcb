package crd

import "github.com/meshnames/meshnames/internal/kubeapi"

// The Multi-Cluster Services API (KEP-1645), which meshnames reads and
// writes when a cluster serves it: ServiceExport and ServiceImport.
const (
	MCSGroup   = "multicluster.x-k8s.io"
	MCSVersion = "v1alpha1"
)

// The MCS collections.
var (
	ServiceExports = kubeapi.Resource{Group: MCSGroup, Version: MCSVersion, Resource: "serviceexports", Namespaced: true}
	ServiceImports = kubeapi.Resource{Group: MCSGroup, Version: MCSVersion, Resource: "serviceimports", Namespaced: true}
)

func str(desc string) Schema {
	return Schema{{Key: "type", Value: "string"}, {Key: "description", Value: desc}}
}

func obj(desc string, props Schema, required ...string) Schema {
	s := Schema{{Key: "type", Value: "object"}}
	if desc != "" {
		s = append(s, item{Key: "description", Value: desc})
	}
	if len(required) > 0 {
		s = append(s, item{Key: "required", Value: required})
	}
	return append(s, item{Key: "properties", Value: props})
}

// conditions is the schema of a list of metav1.Conditions, keyed by type.
func conditions() Schema {
	cond := obj("", Schema{
		{Key: "type", Value: append(str("The condition's type, CamelCase."), item{Key: "maxLength", Value: 316})},
		{Key: "status", Value: append(str("True, False or Unknown."), item{Key: "enum", Value: []string{"True", "False", "Unknown"}})},
		{Key: "reason", Value: append(str("Why, CamelCase."), item{Key: "maxLength", Value: 1024})},
		{Key: "message", Value: append(str("Why, for people."), item{Key: "maxLength", Value: 32768})},
		{Key: "lastTransitionTime", Value: Schema{{Key: "type", Value: "string"}, {Key: "format", Value: "date-time"}}},
		{Key: "observedGeneration", Value: Schema{{Key: "type", Value: "integer"}, {Key: "format", Value: "int64"}, {Key: "minimum", Value: 0}}},
	}, "type", "status", "reason", "message", "lastTransitionTime")
	return Schema{
		{Key: "type", Value: "array"},
		{Key: "items", Value: cond},
		{Key: "x-kubernetes-list-type", Value: "map"},
		{Key: "x-kubernetes-list-map-keys", Value: []string{"type"}},
	}
}

func mcsDefinition(kind, plural string, shortNames []string, columns []Schema, spec, status Schema) Schema {
	root := obj(descriptions[kind], Schema{
		{Key: "apiVersion", Value: Schema{{Key: "type", Value: "string"}}},
		{Key: "kind", Value: Schema{{Key: "type", Value: "string"}}},
		{Key: "metadata", Value: Schema{{Key: "type", Value: "object"}}},
		{Key: "spec", Value: spec},
		{Key: "status", Value: status},
	})
	version := Schema{
		{Key: "name", Value: MCSVersion},
		{Key: "served", Value: true},
		{Key: "storage", Value: true},
		{Key: "schema", Value: Schema{{Key: "openAPIV3Schema", Value: root}}},
		{Key: "subresources", Value: Schema{{Key: "status", Value: Schema{}}}},
		{Key: "additionalPrinterColumns", Value: columns},
	}
	return Schema{
		{Key: "apiVersion", Value: "apiextensions.k8s.io/v1"},
		{Key: "kind", Value: "CustomResourceDefinition"},
		{Key: "metadata", Value: Schema{{Key: "name", Value: plural + "." + MCSGroup}}},
		{Key: "spec", Value: Schema{
			{Key: "group", Value: MCSGroup},
			{Key: "names", Value: Schema{
				{Key: "kind", Value: kind},
				{Key: "listKind", Value: kind + "List"},
				{Key: "plural", Value: plural},
				{Key: "singular", Value: plural[:len(plural)-1]},
				{Key: "shortNames", Value: shortNames},
			}},
			{Key: "scope", Value: "Namespaced"},
			{Key: "versions", Value: []Schema{version}},
		}},
	}
}

var descriptions = map[string]string{
	"ServiceExport": "ServiceExport declares that the Service with the same name and namespace should be consumable from other clusters of the ClusterSet (KEP-1645).",
	"ServiceImport": "ServiceImport describes a service imported from clusters of the ClusterSet (KEP-1645).",
}

func column(name, typ, path, desc string) Schema {
	c := Schema{{Key: "name", Value: name}, {Key: "type", Value: typ}, {Key: "jsonPath", Value: path}}
	if desc != "" {
		c = append(c, item{Key: "description", Value: desc})
	}
	return c
}

// MCSDocuments returns the CRDs of ServiceExport and ServiceImport,
// version v1alpha1, written from the API types of KEP-1645 for clusters
// that have no MCS implementation installing them.
func MCSDocuments() []Schema {
	labels := Schema{{Key: "type", Value: "object"}, {Key: "additionalProperties", Value: Schema{{Key: "type", Value: "string"}}}}
	export := mcsDefinition("ServiceExport", "serviceexports", []string{"svcex", "svcexport"},
		[]Schema{column("Age", "date", ".metadata.creationTimestamp", "")},
		obj("What is exported besides the Service.", Schema{{Key: "exportedLabels", Value: labels}, {Key: "exportedAnnotations", Value: labels}}),
		obj("Written by the MCS implementation: conditions Valid, Ready and Conflict.", Schema{{Key: "conditions", Value: conditions()}}))
	port := obj("A port of the imported service.", Schema{
		{Key: "name", Value: str("The port's name, a DNS label.")},
		{Key: "protocol", Value: append(str("TCP, UDP or SCTP; TCP when absent."), item{Key: "enum", Value: []string{"TCP", "UDP", "SCTP"}})},
		{Key: "appProtocol", Value: str("The application protocol, as on a Service port.")},
		{Key: "port", Value: Schema{{Key: "type", Value: "integer"}, {Key: "format", Value: "int32"}, {Key: "minimum", Value: 1}, {Key: "maximum", Value: 65535}}},
	}, "port")
	affinityConfig := obj("", Schema{{Key: "clientIP", Value: obj("", Schema{{Key: "timeoutSeconds", Value: Schema{{Key: "type", Value: "integer"}, {Key: "format", Value: "int32"}}}})}})
	imp := mcsDefinition("ServiceImport", "serviceimports", []string{"svcim", "svcimport"},
		[]Schema{
			column("Type", "string", ".spec.type", "ClusterSetIP or Headless."),
			column("IP", "string", ".spec.ips", "The ClusterSet IPs."),
			column("Age", "date", ".metadata.creationTimestamp", ""),
		},
		obj("The imported service.", Schema{
			{Key: "ports", Value: Schema{{Key: "type", Value: "array"}, {Key: "items", Value: port}, {Key: "x-kubernetes-list-type", Value: "atomic"}}},
			{Key: "ips", Value: Schema{{Key: "type", Value: "array"}, {Key: "maxItems", Value: 2}, {Key: "items", Value: Schema{{Key: "type", Value: "string"}}}}},
			{Key: "type", Value: append(str("ClusterSetIP or Headless."), item{Key: "enum", Value: []string{"ClusterSetIP", "Headless"}})},
			{Key: "sessionAffinity", Value: append(str("ClientIP or None."), item{Key: "enum", Value: []string{"ClientIP", "None"}})},
			{Key: "sessionAffinityConfig", Value: affinityConfig},
			{Key: "ipFamilies", Value: Schema{{Key: "type", Value: "array"}, {Key: "items", Value: Schema{{Key: "type", Value: "string"}, {Key: "enum", Value: []string{"IPv4", "IPv6"}}}}}},
		}, "ports", "type"),
		obj("The clusters the service is imported from.", Schema{
			{Key: "clusters", Value: Schema{
				{Key: "type", Value: "array"},
				{Key: "items", Value: obj("", Schema{{Key: "cluster", Value: str("The exporting cluster's name, a DNS label.")}}, "cluster")},
				{Key: "x-kubernetes-list-type", Value: "map"},
				{Key: "x-kubernetes-list-map-keys", Value: []string{"cluster"}},
			}},
			{Key: "conditions", Value: conditions()},
		}))
	return []Schema{export, imp}
}

// MCSManifests returns what `meshnames install mcs-crds` prints.
func MCSManifests() ([]byte, error) {
	return Stream("# The Multi-Cluster Services API (KEP-1645), v1alpha1, as printed by meshnames install mcs-crds.\n", MCSDocuments())
}
