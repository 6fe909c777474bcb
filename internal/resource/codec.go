package resource

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	yamlv2 "go.yaml.in/yaml/v2"

	"github.com/meshnames/meshnames/internal/decode"
	"github.com/meshnames/meshnames/internal/validate"
)

// envelope is what Decode reads strictly; spec is decoded separately into
// the kind's type, status and the timestamps are read-only and ignored.
type envelope struct {
	Type             string            `json:"type"`
	Mesh             string            `json:"mesh"`
	Name             string            `json:"name"`
	Labels           map[string]string `json:"labels"`
	CreationTime     any               `json:"creationTime"`
	ModificationTime any               `json:"modificationTime"`
	Spec             any               `json:"spec"`
	Status           any               `json:"status"`
	// KRI and SNIs are identifiers Kuma (2.13 and 2.14 on) computes from
	// the name, mesh and labels and puts in every document it serves, so
	// kumactl sends them back on every write. They are read-only: accepted
	// and ignored like status.
	KRI  any `json:"kri"`
	SNIs any `json:"snis"`
}

// DocumentField is the field reported for problems with a document as a
// whole (a syntax error, a document that is not an object).
const DocumentField = "document"

// Decode reads one document in JSON or YAML and returns it only when it
// decoded without any problem; see DecodePartial.
func Decode(data []byte) (*Object, error) {
	obj, errs := DecodePartial(data)
	if len(errs) > 0 {
		return nil, errs
	}
	return obj, nil
}

// DecodePartial reads one document in JSON or YAML (YAML is a superset of
// JSON). Every decoding problem is returned at once: unknown fields, wrong
// types, an unknown kind. When the kind is known it also returns the object
// as far as it decoded, so that the caller can validate it and report the
// rule violations together with the decoding problems (validate.Merge).
// Status, creationTime and modificationTime are read-only: they are accepted
// and ignored, so that the output of `get -o yaml` can be applied again; so
// are Kuma's computed identifiers kri and snis.
func DecodePartial(data []byte) (*Object, validate.Errors) {
	if obj, ok := plainDocument(data); ok {
		return obj, nil
	}
	return decodeStrict(data)
}

// decodeStrict is DecodePartial for any document.
func decodeStrict(data []byte) (*Object, validate.Errors) {
	g, err := generic(data)
	if err != nil {
		return nil, validate.Errors{{Field: DocumentField, Message: err.Error()}}
	}
	if _, ok := g.(map[string]any); !ok {
		return nil, validate.Errors{{Field: DocumentField, Message: "must be an object with type, name and spec"}}
	}
	errs := liftLegacySpec(g.(map[string]any))
	var env envelope
	errs.Append(decode.Value(g, &env, ""))
	if env.Type == "" {
		if !hasField(errs, "type") {
			errs.Add("type", "required: one of "+fmt.Sprint(KindNames()))
		}
		return nil, errs
	}
	d, ok := Lookup(Kind(env.Type))
	if !ok {
		errs.Addf("type", "unknown kind %q: must be one of %v", env.Type, KindNames())
		return nil, errs
	}
	obj := &Object{Kind: d.Kind, Mesh: env.Mesh, Name: env.Name, Labels: env.Labels, Spec: d.NewSpec()}
	if env.Spec != nil {
		errs.Append(decode.Value(env.Spec, obj.Spec, "spec"))
	}
	return obj, errs
}

// legacyKinds are written by Kuma with their spec fields at the top level
// (type: Dataplane, name: dp-1, networking: ...; type: Zone, enabled:
// false); both shapes are read.
var legacyKinds = map[string]bool{string(Dataplane): true, string(Mesh): true, string(Zone): true, string(ZoneIngress): true}

// envelopeFields are the top-level fields of every document.
var envelopeFields = map[string]bool{"type": true, "mesh": true, "name": true, "labels": true,
	"creationTime": true, "modificationTime": true, "spec": true, "status": true, "kri": true, "snis": true}

// liftLegacySpec moves the top-level spec fields of a legacy kind's
// document under spec.
func liftLegacySpec(doc map[string]any) validate.Errors {
	if t, _ := doc["type"].(string); !legacyKinds[t] {
		return nil
	}
	var errs validate.Errors
	spec := map[string]any{}
	for k, v := range doc {
		if !envelopeFields[k] {
			spec[k] = v
			delete(doc, k)
		}
	}
	if len(spec) == 0 {
		return nil
	}
	if _, both := doc["spec"]; both {
		errs.Add("spec", "must not be given together with top-level spec fields (Kuma's format): use one or the other")
		return errs
	}
	doc["spec"] = spec
	return nil
}

// generic parses a document into its generic form. JSON (what API clients
// send) is parsed directly; anything else goes through the YAML converter,
// which converts YAML values to JSON's in one pass.
func generic(data []byte) (any, error) {
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
		return decode.Generic(data)
	}
	return decode.YAMLGeneric(data)
}

func hasField(errs validate.Errors, field string) bool {
	for _, e := range errs {
		if e.Field == field {
			return true
		}
	}
	return false
}

// MarshalJSON encodes o in the document shape.
func (o *Object) MarshalJSON() ([]byte, error) { return o.AppendJSON(nil) }

// AppendJSON appends o's document to b: exactly what json.Marshal writes
// for a document (TestAppendJSON_IsWhatJSONMarshalWrites), with the
// envelope written here and only the spec and status through
// encoding/json. A list of a thousand resources is a thousand of these.
func (o *Object) AppendJSON(b []byte) ([]byte, error) {
	spec := []byte(`{}`)
	if o.Spec != nil {
		var err error
		if spec, err = MarshalSpec(o.Spec); err != nil {
			return nil, err
		}
	}
	var status []byte
	if o.Status != nil {
		var err error
		if status, err = MarshalStatus(o.Status); err != nil {
			return nil, err
		}
	}
	return AppendDocument(b, o.Key(), o.CreationTime, o.ModificationTime, o.Labels, spec, status)
}

// AppendDocument appends the document of the resource k whose spec and
// status are encoded already (as json.Marshal writes them; status nil
// when it has none): what AppendJSON writes for the decoded resource. The
// cache writes its frozen resources this way without decoding them.
func AppendDocument(b []byte, k Key, created, modified time.Time, labels map[string]string, spec, status []byte) ([]byte, error) {
	// Grown once to about the document's size: appended piece by piece,
	// a document of a few hundred bytes grew its buffer five times.
	n := 160 + len(k.Kind) + len(k.Mesh) + len(k.Name) + len(spec) + len(status)
	for k, v := range labels {
		n += len(k) + len(v) + 6
	}
	b = slices.Grow(b, n)
	b = append(b, `{"type":`...)
	b = AppendJSONString(b, string(k.Kind))
	if k.Mesh != "" {
		b = append(b, `,"mesh":`...)
		b = AppendJSONString(b, k.Mesh)
	}
	b = append(b, `,"name":`...)
	b = AppendJSONString(b, k.Name)
	for _, t := range [...]struct {
		field string
		t     time.Time
	}{{`,"creationTime":`, created}, {`,"modificationTime":`, modified}} {
		if t.t.IsZero() {
			continue
		}
		v, err := t.t.UTC().MarshalJSON()
		if err != nil {
			return nil, err
		}
		b = append(append(b, t.field...), v...)
	}
	if len(labels) > 0 {
		b = AppendLabels(append(b, `,"labels":`...), labels)
	}
	b = append(append(b, `,"spec":`...), spec...)
	if status != nil {
		b = append(append(b, `,"status":`...), status...)
	}
	return append(b, '}'), nil
}

// AppendLabels appends labels as a JSON object: exactly what json.Marshal
// writes for them (keys sorted), without its reflection.
func AppendLabels(b []byte, labels map[string]string) []byte {
	b = append(b, '{')
	// Every write encodes its labels: the keys of the usual few are
	// sorted on the stack (slices.Sorted allocated, 2% of a create).
	var buf [16]string
	keys := buf[:0]
	if len(labels) > len(buf) {
		keys = make([]string, 0, len(labels))
	}
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(AppendJSONString(b, k), ':')
		b = AppendJSONString(b, labels[k])
	}
	return append(b, '}')
}

// AppendJSONString appends s as encoding/json writes it: as it is when it
// holds only printable ASCII that needs no escape (encoding/json also
// escapes <, > and &), through encoding/json otherwise.
func AppendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			v, _ := json.Marshal(s) // a string always encodes
			return append(b, v...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// EncodeYAML encodes o as a YAML document, keeping the field order of the
// JSON encoding (type, mesh, name first; spec fields as declared) rather
// than sorting keys, so that the output reads like a hand-written manifest.
func EncodeYAML(o *Object) ([]byte, error) {
	j, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	// JSON is YAML; decoding into a MapSlice keeps the key order at every level.
	var doc yamlv2.MapSlice
	if err := yamlv2.Unmarshal(j, &doc); err != nil {
		return nil, err
	}
	return yamlv2.Marshal(doc)
}

// UnmarshalSpec decodes a spec stored by meshnames itself (trusted JSON,
// already validated), without the strictness of Decode.
func UnmarshalSpec(k Kind, data []byte) (Spec, error) {
	d, ok := Lookup(k)
	if !ok {
		return nil, fmt.Errorf("unknown kind %q", k)
	}
	if k == MeshService && len(data) > 0 {
		if s, ok := plainMeshServiceSpec(data); ok {
			return s, nil
		}
	}
	s := d.NewSpec()
	if len(data) > 0 {
		if err := json.Unmarshal(data, s); err != nil {
			return nil, fmt.Errorf("decode %s spec: %w", k, err)
		}
	}
	return s, nil
}

// UnmarshalStatus decodes a stored status; it returns nil for empty data.
func UnmarshalStatus(k Kind, data []byte) (Status, error) {
	d, ok := Lookup(k)
	if !ok {
		return nil, fmt.Errorf("unknown kind %q", k)
	}
	if len(data) == 0 || bytes.Equal(data, []byte("null")) || !d.HasStatus {
		return nil, nil
	}
	var s Status
	if _, service := d.NewStatus().(*ServiceStatus); service {
		if ps, ok := plainServiceStatus(data); ok {
			s = ps
		}
	}
	if s == nil {
		s = d.NewStatus()
		if err := json.Unmarshal(data, s); err != nil {
			return nil, fmt.Errorf("decode %s status: %w", k, err)
		}
	}
	if ss, ok := s.(ServiceStatusOf); ok {
		ss.Service().intern()
	}
	return s, nil
}

// UnmarshalJSON decodes a document written by MarshalJSON (for clients
// reading server responses). It is lenient about unknown fields, because a
// newer server may add some; user input goes through Decode instead.
func (o *Object) UnmarshalJSON(data []byte) error {
	var doc struct {
		Type             string            `json:"type"`
		Mesh             string            `json:"mesh"`
		Name             string            `json:"name"`
		CreationTime     time.Time         `json:"creationTime"`
		ModificationTime time.Time         `json:"modificationTime"`
		Labels           map[string]string `json:"labels"`
		Spec             json.RawMessage   `json:"spec"`
		Status           json.RawMessage   `json:"status"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return err
	}
	spec, err := UnmarshalSpec(Kind(doc.Type), doc.Spec)
	if err != nil {
		return err
	}
	status, err := UnmarshalStatus(Kind(doc.Type), doc.Status)
	if err != nil {
		return err
	}
	*o = Object{Kind: Kind(doc.Type), Mesh: doc.Mesh, Name: doc.Name, Labels: doc.Labels,
		CreationTime: doc.CreationTime, ModificationTime: doc.ModificationTime, Spec: spec, Status: status}
	return nil
}
