package crd

import (
	"bytes"
	"fmt"
	"strings"

	yaml "go.yaml.in/yaml/v2"

	"github.com/meshnames/meshnames/internal/resource"
)

type item = yaml.MapItem

// Definition returns the CustomResourceDefinition of k: one served and
// stored version with the kind's schema, the status subresource and the
// printer columns.
func Definition(k Kind) Schema {
	scope := "Cluster"
	if k.Namespaced {
		scope = "Namespaced"
	}
	names := Schema{
		{Key: "kind", Value: string(k.Kind)},
		{Key: "listKind", Value: string(k.Kind) + "List"},
		{Key: "plural", Value: k.Plural},
		{Key: "singular", Value: k.Singular},
	}
	if len(k.ShortNames) > 0 {
		names = append(names, item{Key: "shortNames", Value: k.ShortNames})
	}
	names = append(names, item{Key: "categories", Value: []string{"kuma", "meshnames"}})
	root := Schema{
		{Key: "type", Value: "object"},
		{Key: "description", Value: description(k)},
		{Key: "properties", Value: Schema{
			{Key: "apiVersion", Value: Schema{{Key: "type", Value: "string"}}},
			{Key: "kind", Value: Schema{{Key: "type", Value: "string"}}},
			{Key: "metadata", Value: Schema{{Key: "type", Value: "object"}}},
			{Key: "spec", Value: SpecSchema(k.Kind)},
			{Key: "status", Value: StatusSchema(k.Kind)},
		}},
	}
	var columns []Schema
	for _, c := range k.Columns {
		col := Schema{{Key: "name", Value: c.Name}, {Key: "type", Value: c.Type}, {Key: "jsonPath", Value: c.JSONPath}}
		if c.Description != "" {
			col = append(col, item{Key: "description", Value: c.Description})
		}
		if c.Priority != 0 {
			col = append(col, item{Key: "priority", Value: c.Priority})
		}
		columns = append(columns, col)
	}
	version := Schema{
		{Key: "name", Value: Version},
		{Key: "served", Value: true},
		{Key: "storage", Value: true},
		{Key: "schema", Value: Schema{{Key: "openAPIV3Schema", Value: root}}},
		{Key: "subresources", Value: Schema{{Key: "status", Value: Schema{}}}},
		{Key: "additionalPrinterColumns", Value: columns},
	}
	return Schema{
		{Key: "apiVersion", Value: "apiextensions.k8s.io/v1"},
		{Key: "kind", Value: "CustomResourceDefinition"},
		{Key: "metadata", Value: Schema{
			{Key: "name", Value: k.Plural + "." + Group},
			{Key: "labels", Value: Schema{{Key: "app.kubernetes.io/part-of", Value: "meshnames"}}},
		}},
		{Key: "spec", Value: Schema{
			{Key: "group", Value: Group},
			{Key: "names", Value: names},
			{Key: "scope", Value: scope},
			{Key: "versions", Value: []Schema{version}},
		}},
	}
}

func description(k Kind) string {
	switch k.Kind {
	case resource.Mesh:
		return "A Mesh: the scope of mesh-scoped resources. The spec is kept as written; meshnames uses none of it."
	case resource.Zone:
		return "A zone known to a global control plane."
	case resource.Dataplane:
		return "A data plane proxy: its address and inbounds."
	case resource.MeshService:
		return "A service of one zone. Its status holds the hostnames and virtual IPs meshnames gives it."
	case resource.MeshExternalService:
		return "A service outside the mesh. Only in the control plane's system namespace."
	case resource.MeshMultiZoneService:
		return "A group of MeshServices of several zones under one name."
	case resource.ZoneIngress:
		return "A zone's ingress proxy: where it listens and where other zones reach it. Only in the control plane's system namespace."
	case resource.HostnameGenerator:
		return "Renders the hostnames of the services it selects. Only in the control plane's system namespace."
	}
	return string(k.Kind)
}

// systemOnlyPolicy returns a ValidatingAdmissionPolicy and its binding that
// keep the SystemOnly kinds out of every namespace but ns: the CRD schema
// cannot see an object's namespace, an admission policy can.
func systemOnlyPolicy(ns string) []Schema {
	var plurals, names []string
	for _, k := range Kinds() {
		if k.SystemOnly {
			plurals = append(plurals, k.Plural)
			names = append(names, string(k.Kind))
		}
	}
	const name = "meshnames-system-namespace-only"
	policy := Schema{
		{Key: "apiVersion", Value: "admissionregistration.k8s.io/v1"},
		{Key: "kind", Value: "ValidatingAdmissionPolicy"},
		{Key: "metadata", Value: Schema{{Key: "name", Value: name}, {Key: "labels", Value: Schema{{Key: "app.kubernetes.io/part-of", Value: "meshnames"}}}}},
		{Key: "spec", Value: Schema{
			{Key: "failurePolicy", Value: "Fail"},
			{Key: "matchConstraints", Value: Schema{{Key: "resourceRules", Value: []Schema{{
				{Key: "apiGroups", Value: []string{Group}},
				{Key: "apiVersions", Value: []string{Version}},
				{Key: "operations", Value: []string{"CREATE", "UPDATE"}},
				{Key: "resources", Value: plurals},
			}}}}},
			{Key: "validations", Value: []Schema{{
				{Key: "expression", Value: fmt.Sprintf("object.metadata.namespace == %q", ns)},
				{Key: "message", Value: fmt.Sprintf("%s must be created in the control plane's system namespace %q (seeds 000 and 003 for generators and external services; an ingress belongs to its zone, not to a namespace)", strings.Join(names, ", "), ns)},
				{Key: "reason", Value: "Invalid"},
			}}},
		}},
	}
	binding := Schema{
		{Key: "apiVersion", Value: "admissionregistration.k8s.io/v1"},
		{Key: "kind", Value: "ValidatingAdmissionPolicyBinding"},
		{Key: "metadata", Value: Schema{{Key: "name", Value: name}, {Key: "labels", Value: Schema{{Key: "app.kubernetes.io/part-of", Value: "meshnames"}}}}},
		{Key: "spec", Value: Schema{
			{Key: "policyName", Value: name},
			{Key: "validationActions", Value: []string{"Deny"}},
		}},
	}
	return []Schema{policy, binding}
}

// Documents returns the CRD of every kind, then the admission policy that
// keeps HostnameGenerators and MeshExternalServices in systemNamespace.
func Documents(systemNamespace string) []Schema {
	var docs []Schema
	for _, k := range Kinds() {
		docs = append(docs, Definition(k))
	}
	return append(docs, systemOnlyPolicy(systemNamespace)...)
}

// Manifests returns what `meshnames install crds` prints: Documents as a
// YAML stream.
func Manifests(systemNamespace string) ([]byte, error) {
	return Stream("# Generated by meshnames install crds from the Go types of internal/resource.\n", Documents(systemNamespace))
}

// Stream writes docs as one YAML stream after header, each document
// introduced by "---".
func Stream(header string, docs []Schema) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(header)
	for _, d := range docs {
		out, err := yaml.Marshal(d)
		if err != nil {
			return nil, err
		}
		b.WriteString("---\n")
		b.Write(out)
	}
	return b.Bytes(), nil
}
