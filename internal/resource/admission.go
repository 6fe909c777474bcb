package resource

import (
	"fmt"

	"github.com/meshnames/meshnames/internal/validate"
)

// Modes a control plane runs in (ARCHITECTURE.md section 7).
const (
	ModeStandalone = "standalone"
	ModeZone       = "zone"
	ModeGlobal     = "global"
)

// Owner returns who writes kind k in a multi-zone deployment when that is
// not a control plane in mode: MeshServices and Dataplanes belong to zones,
// Meshes, Zones and MeshMultiZoneServices to the global control plane
// (seed 002). It returns "" when a control plane in mode may write k.
func Owner(k Kind, mode string) string {
	switch mode {
	case ModeGlobal:
		if k == MeshService || k == Dataplane {
			return "a zone control plane"
		}
	case ModeZone:
		if k == MeshMultiZoneService || k == Mesh || k == Zone {
			return "the global control plane"
		}
	}
	return ""
}

// systemLabelKeys are the labels Admit owns.
var systemLabelKeys = []string{LabelOrigin, LabelZone, LabelDisplayName, LabelMesh}

func countUserLabels(labels map[string]string) int {
	n := len(labels)
	for _, k := range systemLabelKeys {
		if _, ok := labels[k]; ok {
			n--
		}
	}
	return n
}

// carriesSystemLabels reports whether the control plane labels kind k with
// origin, zone and display name.
func carriesSystemLabels(k Kind) bool {
	d, ok := Lookup(k)
	return ok && (d.MeshScoped || k == HostnameGenerator)
}

// Admit sets the labels a control plane in mode (and zone) owns on an object
// written by a user - kuma.io/origin, kuma.io/zone, kuma.io/display-name and
// kuma.io/mesh - and reports every label the user set to a value the control
// plane would not: a user must not claim another zone's origin or another
// resource's display name (ARCHITECTURE.md section 2).
func Admit(o *Object, mode, zone string) validate.Errors {
	var errs validate.Errors
	if owner := Owner(o.Kind, mode); owner != "" {
		errs.Addf("type", "%s resources are written on %s, not on a %s control plane", o.Kind, owner, mode)
		return errs
	}
	if !carriesSystemLabels(o.Kind) {
		return nil
	}
	want := map[string]string{LabelDisplayName: o.Name}
	if MustLookup(o.Kind).MeshScoped {
		want[LabelMesh] = o.Mesh
	}
	labels := validate.Path("labels")
	if mode == ModeGlobal {
		want[LabelOrigin] = OriginGlobal
		if v, ok := o.Labels[LabelZone]; ok {
			errs.Addf(labels.Key(LabelZone), "must not be set on a global control plane, got %q", v)
		}
	} else {
		want[LabelOrigin] = OriginZone
		want[LabelZone] = zone
	}
	if o.Labels == nil {
		o.Labels = map[string]string{}
	}
	for _, k := range systemLabelKeys {
		w, ok := want[k]
		if !ok {
			continue
		}
		if v, set := o.Labels[k]; set && v != w {
			errs.Add(labels.Key(k), fmt.Sprintf("is set by the control plane and must be %q here (or left out), got %q", w, v))
			continue
		}
		o.Labels[k] = w
	}
	return errs
}
