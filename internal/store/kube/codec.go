package kube

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/meshnames/meshnames/internal/crd"
	"github.com/meshnames/meshnames/internal/decode"
	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/validate"
)

// crRef names one custom resource.
type crRef struct {
	kind      resource.Kind
	namespace string // "" for cluster-scoped kinds
	name      string
}

func (r crRef) String() string {
	if r.namespace == "" {
		return string(r.kind) + " " + r.name
	}
	return string(r.kind) + " " + r.namespace + "/" + r.name
}

// cr is the wire form of a custom resource.
type cr struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Metadata   kubeapi.ObjectMeta `json:"metadata"`
	Spec       json.RawMessage    `json:"spec,omitempty"`
	Status     json.RawMessage    `json:"status,omitempty"`
}

// names maps resource names to custom resources and back (the doc comment
// of the package explains the rules).
type names struct {
	system string // the system namespace
}

// ref returns the custom resource of key k.
func (n names) ref(k resource.Key) (crRef, error) {
	c, ok := crd.For(k.Kind)
	if !ok {
		return crRef{}, fmt.Errorf("unknown kind %q", k.Kind)
	}
	r := crRef{kind: k.Kind, name: k.Name}
	switch {
	case !c.Namespaced:
	case c.SystemOnly || !strings.Contains(k.Name, "."):
		r.namespace = n.system
	default:
		i := strings.LastIndexByte(k.Name, '.')
		r.name, r.namespace = k.Name[:i], k.Name[i+1:]
		if r.namespace == n.system && !strings.Contains(r.name, ".") {
			return crRef{}, fmt.Errorf("name %q: a %s of the system namespace %s is named %q, without the namespace", k.Name, k.Kind, n.system, r.name)
		}
		if msg := validate.DNS1123Label(r.namespace); msg != "" {
			return crRef{}, fmt.Errorf("name %q: the part after the last dot is the Kubernetes namespace and %s", k.Name, msg)
		}
	}
	if msg := validate.DNS1123Subdomain(r.name); msg != "" {
		return crRef{}, fmt.Errorf("name %q: a Kubernetes object name %s", r.name, msg)
	}
	return r, nil
}

// name returns the resource name of a custom resource, or "" when the
// kind may not live in its namespace.
func (n names) name(c crd.Kind, namespace, name string) string {
	switch {
	case !c.Namespaced:
		return name
	case c.SystemOnly:
		if namespace != n.system {
			return ""
		}
		return name
	case namespace == n.system && !strings.Contains(name, "."):
		return name
	}
	return name + "." + namespace
}

// decoder turns custom resources into resource objects.
type decoder struct {
	names
	mode, zone string
}

// decoded is a custom resource read from the API.
type decoded struct {
	ref     crRef
	uid     uid
	version int64
	obj     *resource.Object // nil when invalid
	errs    validate.Errors  // why obj is nil
	// reported is the invalid condition the object's status already shows.
	reported string
}

// ackOf is the key of the watch event that shows an object of kind c at
// resourceVersion rv.
func ackOf(c crd.Kind, namespace, name, rv string) (ackKey, error) {
	ref := crRef{kind: c.Kind, name: name}
	if c.Namespaced {
		ref.namespace = namespace
	}
	v, ok := kubeapi.Revision(rv)
	if !ok {
		return ackKey{}, fmt.Errorf("%s: resourceVersion %q is not a positive integer", ref, rv)
	}
	return ackKey{ref: ref, version: v}, nil
}

// decode reads a custom resource of kind c. An object meshnames cannot use
// comes back with errs and no obj.
func (d decoder) decode(c crd.Kind, raw []byte) (decoded, error) {
	var in cr
	if err := json.Unmarshal(raw, &in); err != nil {
		return decoded{}, fmt.Errorf("decode %s: %w", c.Kind, err)
	}
	m := in.Metadata
	ack, err := ackOf(c, m.Namespace, m.Name, m.ResourceVersion)
	if err != nil {
		return decoded{}, err
	}
	id, err := parseUID(m.UID)
	if err != nil {
		return decoded{}, fmt.Errorf("%s: %w", ack.ref, err)
	}
	out := decoded{ref: ack.ref, uid: id, version: ack.version}
	out.reported = invalidCondition(in.Status)
	// The API server checks these; a copy read from elsewhere may not be.
	if c.Namespaced {
		if msg := validate.DNS1123Label(m.Namespace); msg != "" {
			out.errs.Add("metadata.namespace", msg)
		}
	}
	if msg := validate.DNS1123Subdomain(m.Name); msg != "" {
		out.errs.Add("metadata.name", msg)
	}
	if len(out.errs) > 0 {
		return out, nil
	}
	name := d.name(c, m.Namespace, m.Name)
	if name == "" {
		out.errs.Addf("metadata.namespace", "a %s must be in the control plane's system namespace %q, not %q (seeds 000 and 003 for generators and external services; an ingress belongs to its zone, not to a namespace)", c.Kind, d.system, m.Namespace)
		return out, nil
	}
	desc := resource.MustLookup(c.Kind)
	obj := &resource.Object{Kind: c.Kind, Name: name, Labels: maps.Clone(m.Labels), Version: out.version, Spec: desc.NewSpec()}
	if m.CreationTimestamp != nil {
		obj.CreationTime = m.CreationTimestamp.UTC()
	}
	obj.ModificationTime = m.LastWrite().UTC()
	if obj.Labels == nil {
		obj.Labels = map[string]string{}
	}
	if desc.MeshScoped {
		obj.Mesh = obj.Labels[resource.LabelMesh]
		if obj.Mesh == "" {
			obj.Mesh = "default"
		}
	}
	d.computeLabels(c, m, obj)

	var errs validate.Errors
	if len(in.Spec) > 0 && c.Kind != resource.Mesh {
		// Mesh specs are Kuma's (mTLS, metrics...): kept, not used.
		g, err := decode.Generic(in.Spec)
		if err != nil {
			errs.Add("spec", err.Error())
		} else {
			errs.Append(decode.Value(g, obj.Spec, "spec"))
		}
	}
	if len(errs) == 0 {
		obj.Spec.Default()
		errs.Append(d.validate(c, m, obj))
	}
	if len(errs) > 0 {
		out.errs = errs
		return out, nil
	}
	if desc.HasStatus && len(in.Status) > 0 {
		// Written by meshnames' controllers; a status edited into nonsense
		// by hand reads as none, and the controllers write it again.
		obj.Status, _ = resource.UnmarshalStatus(c.Kind, in.Status)
	}
	out.obj = obj
	return out, nil
}

// computeLabels sets the labels Kuma's admission webhook would have set on
// an object written with kubectl: the display name (the object's name
// without namespace), the namespace, the mesh, and for kinds a zone
// owns, the origin and zone when absent.
//
// A resource that came through the zone sync (synced) keeps the display
// name and namespace it has where it was made (seed 002: kuma.io/display-name is
// "the original name of the object"), which the synced generators'
// templates use: its object is named <name>-<hash> in the system
// namespace.
func (d decoder) computeLabels(c crd.Kind, m kubeapi.ObjectMeta, obj *resource.Object) {
	l := obj.Labels
	synced := d.synced(obj.Labels)
	if !synced || l[resource.LabelDisplayName] == "" {
		l[resource.LabelDisplayName] = resource.DisplayName(m.Name)
	}
	if c.Namespaced && (!synced || l[resource.LabelNamespace] == "") {
		l[resource.LabelNamespace] = m.Namespace
	}
	desc := resource.MustLookup(c.Kind)
	if desc.MeshScoped {
		l[resource.LabelMesh] = obj.Mesh
	}
	if !desc.SystemLabels {
		return
	}
	if _, ok := l[resource.LabelOrigin]; !ok {
		if d.mode == resource.ModeGlobal {
			l[resource.LabelOrigin] = resource.OriginGlobal
		} else {
			l[resource.LabelOrigin] = resource.OriginZone
		}
	}
	if _, ok := l[resource.LabelZone]; !ok && l[resource.LabelOrigin] == resource.OriginZone && d.mode != resource.ModeGlobal {
		l[resource.LabelZone] = d.zone
	}
	if _, ok := l[resource.LabelEnv]; !ok && c.Kind == resource.MeshService && l[resource.LabelOrigin] == resource.OriginZone {
		l[resource.LabelEnv] = resource.EnvKubernetes
	}
}

// validate checks what an object written with kubectl must satisfy: the
// resource package's rules, with a service's name checked as the
// Kubernetes name it becomes in hostnames, and labels that claim no other
// zone's origin.
func (d decoder) validate(c crd.Kind, m kubeapi.ObjectMeta, obj *resource.Object) validate.Errors {
	check := *obj
	if resource.MustLookup(c.Kind).ServiceKind {
		check.Name = m.Name
	}
	var errs validate.Errors
	for _, e := range resource.Validate(&check) {
		if e.Field == "name" {
			e.Field = "metadata.name"
		}
		if strings.HasPrefix(e.Field, "labels") {
			e.Field = "metadata." + e.Field
		}
		errs = append(errs, e)
	}
	if !resource.MustLookup(c.Kind).SystemLabels {
		return errs
	}
	labels := validate.Path("metadata.labels")
	switch o := obj.Labels[resource.LabelOrigin]; o {
	case resource.OriginZone:
		if z := obj.Labels[resource.LabelZone]; d.mode != resource.ModeGlobal && z != d.zone {
			errs.Addf(labels.Key(resource.LabelZone), "must be this zone, %q, on a resource of this zone (or left out), got %q", d.zone, z)
		}
	case resource.OriginGlobal:
		if d.mode != resource.ModeGlobal && c.Namespaced && m.Namespace != d.system {
			errs.Addf(labels.Key(resource.LabelOrigin), "global resources are synced into the system namespace %q only, this one is in %q", d.system, m.Namespace)
		}
	default:
		errs.Addf(labels.Key(resource.LabelOrigin), "must be %q or %q, got %q", resource.OriginZone, resource.OriginGlobal, o)
	}
	return errs
}

// encode returns the custom resource of obj for a create: metadata and
// spec.
func (d decoder) encode(c crd.Kind, r crRef, obj *resource.Object) ([]byte, error) {
	spec, err := resource.MarshalSpec(obj.Spec)
	if err != nil {
		return nil, err
	}
	out := cr{
		APIVersion: crd.APIVersion(),
		Kind:       string(c.Kind),
		Metadata:   kubeapi.ObjectMeta{Name: r.name, Namespace: r.namespace, Labels: d.storedLabels(c, obj)},
		Spec:       spec,
	}
	return json.Marshal(out)
}

// synced reports whether an object of these labels came through the zone
// sync: on a zone, what global sent (origin global); on a global, what a
// zone sent (origin zone).
func (d decoder) synced(labels map[string]string) bool {
	switch d.mode {
	case resource.ModeZone:
		return labels[resource.LabelOrigin] == resource.OriginGlobal
	case resource.ModeGlobal:
		return labels[resource.LabelOrigin] == resource.OriginZone
	}
	return false
}

// storedLabels returns the labels of obj as the custom resource holds
// them: the labels the decoder computes from the object's identity (the
// display name and the namespace) are not stored, but on what came through
// the zone sync, where they name the original (computeLabels).
func (d decoder) storedLabels(c crd.Kind, obj *resource.Object) map[string]string {
	labels := maps.Clone(obj.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	if !d.synced(labels) {
		delete(labels, resource.LabelDisplayName)
		delete(labels, resource.LabelNamespace)
	}
	if resource.MustLookup(c.Kind).MeshScoped {
		labels[resource.LabelMesh] = obj.Mesh
	}
	return labels
}

// ConditionValid is the condition meshnames writes on a custom resource it
// does not use because it is invalid.
const (
	ConditionValid = "Valid"
	ReasonInvalid  = "Invalid"
)

// invalidCondition returns the message of the Valid=False condition in a
// status, or "".
func invalidCondition(status json.RawMessage) string {
	if len(status) == 0 {
		return ""
	}
	var s struct {
		Conditions []resource.Condition `json:"conditions"`
	}
	if json.Unmarshal(status, &s) != nil {
		return ""
	}
	for _, c := range s.Conditions {
		if c.Type == ConditionValid && c.Status == resource.ConditionFalse {
			return c.Message
		}
	}
	return ""
}
