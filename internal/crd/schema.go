package crd

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	yaml "go.yaml.in/yaml/v2"

	"github.com/meshnames/meshnames/internal/resource"
)

// Schema is an OpenAPI v3 schema as a CRD carries it, in the order the
// fields are written out.
type Schema = yaml.MapSlice

// rule adds constraints to a generated field: the schema reaches the
// structure of every field, and these the rules the API server can check
// on its own (enumerations, ranges, list sizes); meshnames checks every
// rule of the resource package again on what it reads (see store/kube).
type rule struct {
	enum     []string
	min, max *int
	maxItems int
	maxProps int
}

func ptr(i int) *int { return &i }

var portRange = rule{min: ptr(1), max: ptr(65535)}

// rules are keyed by Go type name and JSON field name.
var rules = map[string]rule{
	"Port.port":                         portRange,
	"Inbound.port":                      portRange,
	"Inbound.servicePort":               {min: ptr(0), max: ptr(65535)},
	"ExternalMatch.port":                portRange,
	"ExternalEndpoint.port":             {min: ptr(0), max: ptr(65535)},
	"ExternalMatch.type":                {enum: []string{resource.MatchInternalVIP, resource.MatchDomain, resource.MatchCIDR, resource.MatchIP}},
	"ExternalDestination.type":          {enum: []string{resource.DestinationRegular, resource.DestinationPassthrough, resource.DestinationExtension}},
	"Export.mode":                       {enum: []string{resource.ExportAll, resource.ExportNone}},
	"MeshServiceSpec.state":             {enum: []string{resource.StateAvailable, resource.StateUnavailable}},
	"Identity.type":                     {enum: []string{resource.IdentityServiceTag, resource.IdentitySpiffeID}},
	"TLSVersion.min":                    {enum: []string{resource.TLSAuto, resource.TLS10, resource.TLS11, resource.TLS12, resource.TLS13}},
	"TLSVersion.max":                    {enum: []string{resource.TLSAuto, resource.TLS10, resource.TLS11, resource.TLS12, resource.TLS13}},
	"MeshServiceSpec.ports":             {maxItems: resource.MaxPorts},
	"MeshMultiZoneServiceSpec.ports":    {maxItems: resource.MaxPorts},
	"MeshServiceSpec.identities":        {maxItems: resource.MaxIdentities},
	"MeshExternalServiceSpec.match":     {maxItems: resource.MaxMatches},
	"ExternalDestination.endpoints":     {maxItems: resource.MaxEndpoints},
	"DataplaneNetworking.inbound":       {maxItems: resource.MaxInbounds},
	"TLSVerification.subjectAltNames":   {maxItems: resource.MaxSubjectAltNames},
	"LabelSelector.matchLabels":         {maxProps: resource.MaxLabels},
	"LabelSelector.labels":              {maxProps: resource.MaxLabels},
	"Inbound.tags":                      {maxProps: resource.MaxLabels},
	"MeshServiceSelector.dataplaneTags": {maxProps: resource.MaxLabels},
	"DataplaneTagSelector.tags":         {maxProps: resource.MaxLabels},
}

var (
	rawMessage  = reflect.TypeFor[json.RawMessage]()
	intOrString = reflect.TypeFor[resource.IntOrString]()
)

// schemaOf returns the schema of Go type t. Fields without omitempty or
// omitzero are required when required is true (specs); statuses are
// written by controllers and require nothing.
func schemaOf(t reflect.Type, required bool) Schema {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == rawMessage:
		// Free-form configuration (an Extension's config): any JSON value.
		return Schema{{Key: "x-kubernetes-preserve-unknown-fields", Value: true}}
	case t == intOrString:
		return Schema{{Key: "x-kubernetes-int-or-string", Value: true}}
	}
	switch t.Kind() {
	case reflect.String:
		return Schema{{Key: "type", Value: "string"}}
	case reflect.Bool:
		return Schema{{Key: "type", Value: "boolean"}}
	case reflect.Int, reflect.Int32, reflect.Int64:
		return Schema{{Key: "type", Value: "integer"}}
	case reflect.Slice:
		return Schema{{Key: "type", Value: "array"}, {Key: "items", Value: schemaOf(t.Elem(), required)}}
	case reflect.Map:
		return Schema{{Key: "type", Value: "object"}, {Key: "additionalProperties", Value: schemaOf(t.Elem(), required)}}
	case reflect.Struct:
		return structSchema(t, required)
	}
	panic(fmt.Sprintf("crd: no schema for %s", t))
}

func structSchema(t reflect.Type, required bool) Schema {
	var props yaml.MapSlice
	var req []string
	var visit func(t reflect.Type)
	visit = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous {
				visit(f.Type) // embedded status (MultiZoneServiceStatus)
				continue
			}
			if !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("json")
			name, opts, _ := strings.Cut(tag, ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			s := schemaOf(f.Type, required)
			s = applyRule(s, rules[t.Name()+"."+name])
			props = append(props, yaml.MapItem{Key: name, Value: s})
			if required && !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
				req = append(req, name)
			}
		}
	}
	visit(t)
	s := Schema{{Key: "type", Value: "object"}}
	if len(props) > 0 {
		s = append(s, yaml.MapItem{Key: "properties", Value: props})
	}
	if len(req) > 0 {
		s = append(s, yaml.MapItem{Key: "required", Value: req})
	}
	return s
}

func applyRule(s Schema, r rule) Schema {
	if len(r.enum) > 0 {
		s = append(s, yaml.MapItem{Key: "enum", Value: r.enum})
	}
	if r.min != nil {
		s = append(s, yaml.MapItem{Key: "minimum", Value: *r.min})
	}
	if r.max != nil {
		s = append(s, yaml.MapItem{Key: "maximum", Value: *r.max})
	}
	if r.maxItems > 0 {
		s = append(s, yaml.MapItem{Key: "maxItems", Value: r.maxItems})
	}
	if r.maxProps > 0 {
		s = append(s, yaml.MapItem{Key: "maxProperties", Value: r.maxProps})
	}
	return s
}

// SpecSchema returns the schema of kind k's spec.
func SpecSchema(k resource.Kind) Schema {
	d := resource.MustLookup(k)
	s := schemaOf(d.SpecType(), true)
	if k == resource.Mesh {
		// Kuma's Mesh carries mTLS, metrics and more that meshnames does not
		// use; keep them, so that Kuma's Mesh manifests apply unchanged.
		s = append(s, yaml.MapItem{Key: "x-kubernetes-preserve-unknown-fields", Value: true})
	}
	return s
}

// StatusSchema returns the schema of kind k's status. Kinds without a
// status in meshnames get one that holds only conditions: meshnames
// reports there why it does not use an object it finds invalid (a
// HostnameGenerator whose template does not parse).
func StatusSchema(k resource.Kind) Schema {
	d := resource.MustLookup(k)
	if st := d.NewStatus(); st != nil {
		return schemaOf(reflect.TypeOf(st), false)
	}
	return schemaOf(reflect.TypeFor[struct {
		Conditions []resource.Condition `json:"conditions,omitempty"`
	}](), false)
}
