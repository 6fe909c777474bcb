package resource

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAdmit(t *testing.T) {
	tests := []struct {
		name       string
		obj        *Object
		mode, zone string
		want       map[string]string
		fields     []string
	}{
		{name: "zone-sets-all", obj: &Object{Kind: MeshService, Mesh: "m", Name: "web"}, mode: ModeStandalone, zone: "east",
			want: map[string]string{LabelOrigin: "zone", LabelZone: "east", LabelDisplayName: "web", LabelMesh: "m"}},
		{name: "repeating-values-is-fine", obj: &Object{Kind: MeshService, Mesh: "m", Name: "web", Labels: map[string]string{LabelOrigin: "zone", LabelZone: "east", "team": "a"}},
			mode: ModeZone, zone: "east",
			want: map[string]string{LabelOrigin: "zone", LabelZone: "east", LabelDisplayName: "web", LabelMesh: "m", "team": "a"}},
		{name: "global-no-zone", obj: &Object{Kind: HostnameGenerator, Name: "g"}, mode: ModeGlobal,
			want: map[string]string{LabelOrigin: "global", LabelDisplayName: "g"}},
		{name: "mesh-has-none", obj: &Object{Kind: Mesh, Name: "m"}, mode: ModeStandalone, zone: "east"},
		{name: "forged-origin-zone-name-mesh", obj: &Object{Kind: Dataplane, Mesh: "m", Name: "dp",
			Labels: map[string]string{LabelOrigin: "global", LabelZone: "west", LabelDisplayName: "other", LabelMesh: "x"}},
			mode: ModeStandalone, zone: "east",
			fields: []string{`labels["kuma.io/origin"]`, `labels["kuma.io/zone"]`, `labels["kuma.io/display-name"]`, `labels["kuma.io/mesh"]`}},
		{name: "zone-label-on-global", obj: &Object{Kind: MeshExternalService, Mesh: "m", Name: "x", Labels: map[string]string{LabelZone: "east"}},
			mode: ModeGlobal, fields: []string{`labels["kuma.io/zone"]`}},
		{name: "not-written-here", obj: &Object{Kind: MeshService, Mesh: "m", Name: "x"}, mode: ModeGlobal, fields: []string{"type"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := Admit(tt.obj, tt.mode, tt.zone)
			var fields []string
			for _, e := range errs {
				fields = append(fields, e.Field)
			}
			if d := cmp.Diff(tt.fields, fields); d != "" {
				t.Errorf("violations (-want +got):\n%s", d)
			}
			if tt.fields == nil {
				if d := cmp.Diff(tt.want, tt.obj.Labels, cmpEmptyMap); d != "" {
					t.Errorf("labels (-want +got):\n%s", d)
				}
			}
		})
	}
}

var cmpEmptyMap = cmp.FilterValues(func(a, b map[string]string) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())

func TestOwner(t *testing.T) {
	for _, d := range Descriptors() {
		for _, mode := range []string{ModeStandalone, ModeZone, ModeGlobal} {
			owner := Owner(d.Kind, mode)
			zoneOwned := d.Kind == MeshService || d.Kind == Dataplane
			globalOwned := d.Kind == MeshMultiZoneService || d.Kind == Mesh || d.Kind == Zone
			want := mode == ModeGlobal && zoneOwned || mode == ModeZone && globalOwned
			if (owner != "") != want {
				t.Errorf("Owner(%s, %s) = %q; want read-only %v", d.Kind, mode, owner, want)
			}
		}
	}
}
