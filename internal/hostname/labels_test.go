package hostname

import (
	"strings"
	"testing"
	"unsafe"
)

func TestLabelSet_OfAndGet(t *testing.T) {
	// packed writes labels as the reader expects them.
	packed := func(kv ...string) string {
		var b []byte
		for i := 0; i < len(kv); i += 2 {
			b = append(b, byte(len(kv[i])), byte(len(kv[i])>>8), byte(len(kv[i+1])), byte(len(kv[i+1])>>8))
			b = append(b, kv[i]+kv[i+1]...)
		}
		return string(b)
	}
	long := strings.Repeat("k", 300) // a length over one byte
	tests := []struct {
		name   string
		svc    string // the service the labels are of
		labels map[string]string
		packed string
		named  NameLabels
	}{
		{"Nil", "web", nil, "", 0},
		{"Empty", "web", map[string]string{}, "", 0},
		{"Sorted", "web", map[string]string{"b": "2", "a": "1", "kuma.io/zone": "east", "": "empty"},
			packed("", "empty", "a", "1", "b", "2", "kuma.io/zone", "east"), 0},
		{"DisplayNameIsTheName", "web", map[string]string{labelDisplayName: "web", "team": "a"}, packed("team", "a"), nameDisplay},
		{"OnlyTheDisplayName", "web", map[string]string{labelDisplayName: "web"}, "", nameDisplay},
		// A service synced from another zone: <display name>-<hash>.
		{"DisplayNameBeginsTheName", "web-x7", map[string]string{labelDisplayName: "web", "team": "a"}, packed("team", "a"), nameDisplay | 3},
		{"EmptyDisplayName", "web", map[string]string{labelDisplayName: "", "team": "a"}, packed("team", "a"), nameDisplay | 3},
		{"DisplayNameElsewhereInTheName", "my-web", map[string]string{labelDisplayName: "web", "team": "a"},
			packed(labelDisplayName, "web", "team", "a"), 0},
		{"DisplayNameLongerThanTheName", "we", map[string]string{labelDisplayName: "web"}, packed(labelDisplayName, "web"), 0},
		{"NameFarLongerThanTheDisplayName", "w" + strings.Repeat("x", 256), map[string]string{labelDisplayName: "w"},
			packed(labelDisplayName, "w"), 0},
		{"SelectorKeepsTheDisplayName", "", map[string]string{labelDisplayName: ""}, packed(labelDisplayName, ""), 0},
		{"EmptyValues", "web", map[string]string{"a": "", "b": ""}, packed("a", "", "b", ""), 0},
		{"LongKey", "web", map[string]string{long: "v", "a": long}, packed("a", long, long, "v"), 0},
		{"PrefixKeys", "web", map[string]string{"ab": "1", "a": "2", "abc": "3"}, packed("a", "2", "ab", "1", "abc", "3"), 0},
		// A MeshService made from the Kubernetes Service web of namespace shop.
		{"KubernetesService", "web.shop", map[string]string{labelDisplayName: "web", labelServiceName: "web", labelNamespace: "shop", "team": "a"},
			packed("team", "a"), nameDisplay | nameService | nameNamespace | 5},
		// A headless Service's Pod: the service name is not the display name.
		{"KubernetesPod", "web-0.shop", map[string]string{labelDisplayName: "web-0", labelServiceName: "web", labelNamespace: "shop"},
			packed(labelServiceName, "web"), nameDisplay | nameNamespace | 5},
		{"NamespaceNotInTheName", "web.shop", map[string]string{labelDisplayName: "web", labelNamespace: "other"},
			packed(labelNamespace, "other"), nameDisplay | 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := labelSetOf(tt.svc, tt.labels)
			if got.packed != tt.packed || got.named != tt.named {
				t.Errorf("labelSetOf = %q, named %#x; want %q, %#x", got.packed, got.named, tt.packed, tt.named)
			}
			if !got.equalMap(tt.svc, tt.labels) {
				t.Errorf("labelSetOf(%v).equalMap of the same map = false", tt.labels)
			}
			for k, v := range tt.labels {
				if gotV, ok := got.get(tt.svc, k); !ok || gotV != v {
					t.Errorf("get(%q) = %q, %v; want %q, true", k, gotV, ok, v)
				}
			}
			for _, k := range []string{"missing", "k", "zzz", "0", "east", "1", labelDisplayName, labelServiceName, labelNamespace} {
				if _, in := tt.labels[k]; in {
					continue
				}
				if v, ok := got.get(tt.svc, k); ok {
					t.Errorf("get(%q) = %q, true; want not found", k, v)
				}
			}
		})
	}
}

func TestLabelSet_EqualMap(t *testing.T) {
	base := map[string]string{"app": "web", "team": "a", labelDisplayName: "web"}
	tests := []struct {
		name  string
		other map[string]string
		want  bool
	}{
		{"Same", map[string]string{"team": "a", "app": "web", labelDisplayName: "web"}, true},
		{"ValueDiffers", map[string]string{"app": "web", "team": "b", labelDisplayName: "web"}, false},
		{"KeyDiffers", map[string]string{"app": "web", "tea": "a", labelDisplayName: "web"}, false},
		{"DisplayNameDiffers", map[string]string{"app": "web", "team": "a", labelDisplayName: "api"}, false},
		{"NoDisplayName", map[string]string{"app": "web", "team": "a"}, false},
		{"NoDisplayNameButAnother", map[string]string{"app": "web", "team": "a", "x": "web"}, false},
		{"Fewer", map[string]string{"app": "web", labelDisplayName: "web"}, false},
		{"More", map[string]string{"app": "web", "team": "a", labelDisplayName: "web", "x": ""}, false},
		{"Nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := labelSetOf("web", base).equalMap("web", tt.other); got != tt.want {
				t.Errorf("equalMap(%v) = %v, want %v", tt.other, got, tt.want)
			}
		})
	}
	// A synced service, web-x7, whose display name web begins its name.
	synced := labelSetOf("web-x7", base)
	for _, tt := range []struct {
		display string
		want    bool
	}{{"web", true}, {"web-x7", false}, {"web-x", false}, {"we", false}, {"", false}} {
		other := map[string]string{"app": "web", "team": "a", labelDisplayName: tt.display}
		if got := synced.equalMap("web-x7", other); got != tt.want {
			t.Errorf("synced web-x7: equalMap with display name %q = %v, want %v", tt.display, got, tt.want)
		}
	}
	if !labelSetOf("web", nil).equalMap("web", map[string]string{}) || !labelSetOf("web", map[string]string{}).equalMap("web", nil) {
		t.Error("an empty set and an empty or nil map differ")
	}
}

// TestLabelSet_Contains checks selector matching against the map-based
// rule it replaces: every selector label present with an equal value.
func TestLabelSet_Contains(t *testing.T) {
	svc := map[string]string{"app": "web", "kuma.io/zone": "east", "team": "a", "v": "", labelDisplayName: "web"}
	tests := []struct {
		name string
		sel  map[string]string
		want bool
	}{
		{"EmptySelectsAll", nil, true},
		{"One", map[string]string{"team": "a"}, true},
		{"All", map[string]string{"app": "web", "kuma.io/zone": "east", "team": "a", "v": "", labelDisplayName: "web"}, true},
		{"FirstAndLast", map[string]string{"app": "web", "v": ""}, true},
		{"EmptyValue", map[string]string{"v": ""}, true},
		{"DisplayName", map[string]string{labelDisplayName: "web"}, true},
		{"DisplayNameDiffers", map[string]string{labelDisplayName: "api"}, false},
		{"ValueDiffers", map[string]string{"team": "b"}, false},
		{"MissingKeyBefore", map[string]string{"a": "web"}, false},
		{"MissingKeyBetween", map[string]string{"app": "web", "b": "x"}, false},
		{"MissingKeyAfter", map[string]string{"zzz": ""}, false},
		{"EmptyValueIsNotAbsent", map[string]string{"w": ""}, false},
		{"MoreThanTheService", map[string]string{"app": "web", "kuma.io/zone": "east", "team": "a", "v": "", "x": "1"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := labelSetOf("web", svc).contains("web", labelSetOf("", tt.sel)); got != tt.want {
				t.Errorf("contains(%v) = %v, want %v", tt.sel, got, tt.want)
			}
		})
	}
	synced := map[string]string{"app": "web", labelDisplayName: "web"}
	for sel, want := range map[string]bool{"web": true, "web-x7": false, "we": false, "": false} {
		if got := labelSetOf("web-x7", synced).contains("web-x7", labelSetOf("", map[string]string{labelDisplayName: sel})); got != want {
			t.Errorf("synced web-x7 (display name web): contains display name %q = %v, want %v", sel, got, want)
		}
	}
	if labelSetOf("web", nil).contains("web", labelSetOf("", map[string]string{"a": "b"})) {
		t.Error("a service without labels matches a selector")
	}
	// The labels a Kubernetes Service's MeshService has from its name.
	kube := map[string]string{labelDisplayName: "web", labelServiceName: "web", labelNamespace: "shop", "app": "x"}
	for _, tt := range []struct {
		sel  map[string]string
		want bool
	}{
		{map[string]string{labelNamespace: "shop"}, true},
		{map[string]string{labelNamespace: "shop", "app": "x", labelServiceName: "web"}, true},
		{map[string]string{labelNamespace: "web"}, false},
		{map[string]string{labelServiceName: "shop"}, false},
		{map[string]string{labelNamespace: "shop", "app": "y"}, false},
	} {
		if got := labelSetOf("web.shop", kube).contains("web.shop", labelSetOf("", tt.sel)); got != tt.want {
			t.Errorf("web.shop: contains(%v) = %v, want %v", tt.sel, got, tt.want)
		}
	}
}

// Services with the same labels but for a display name equal to their
// name share one string, which the engine lets go of with the last.
func TestEngine_SharesLabels(t *testing.T) {
	e := NewEngine("zone-1")
	labels := func(name, team string) map[string]string {
		return map[string]string{labelDisplayName: name, "team": team, labelZone: "east"}
	}
	keys := []ServiceKey{{"MeshService", "default", "a"}, {"MeshService", "default", "b"}, {"MeshService", "default", "c"}}
	for _, k := range keys {
		e.SetService(Service{Key: k, Labels: labels(k.Name, "x")})
	}
	if len(e.labels.sets) != 1 {
		t.Fatalf("%d shared sets for 3 services with the same labels, want 1", len(e.labels.sets))
	}
	data := func(k ServiceKey) *byte { return unsafe.StringData(e.svcs.get(e.keyHash(k), k).labels.packed) }
	if data(keys[0]) != data(keys[1]) || data(keys[1]) != data(keys[2]) {
		t.Error("services with the same labels hold different strings")
	}
	// Services synced from other zones, <display name>-<hash>, share it
	// too: their display names begin their names.
	for _, k := range []ServiceKey{{"MeshService", "default", "a-5f2c"}, {"MeshService", "default", "bb-90e1"}} {
		e.SetService(Service{Key: k, Labels: labels(k.Name[:strings.IndexByte(k.Name, '-')], "x")})
		if got, _ := e.svcs.get(e.keyHash(k), k).labels.get(k.Name, labelDisplayName); len(e.labels.sets) != 1 || got != k.Name[:strings.IndexByte(k.Name, '-')] {
			t.Fatalf("synced %s: %d shared sets, display name %q", k.Name, len(e.labels.sets), got)
		}
		e.DeleteService(k)
	}
	e.SetService(Service{Key: keys[2], Labels: labels("c", "y")})
	if set := e.labels.sets[labelSetOf("a", labels("a", "x")).packed]; len(e.labels.sets) != 2 || set == nil || set.refs != 2 {
		t.Errorf("after a label change: %d sets, want 2 with 2 and 1 users", len(e.labels.sets))
	}
	for _, k := range keys {
		e.DeleteService(k)
	}
	if len(e.labels.sets) != 0 {
		t.Errorf("%d shared sets left after every service was deleted", len(e.labels.sets))
	}
}

// TestEngine_StateSizes pins the size of what the engine keeps per service
// and per name (issue 3's memory target): a field added to one of these
// costs 100,000 times over, so it should be a conscious choice. Sizes are
// for 64-bit platforms.
func TestEngine_StateSizes(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are pinned for 64-bit platforms")
	}
	tests := []struct {
		name      string
		got, want uintptr
	}{
		{"svcState", unsafe.Sizeof(svcState{}), 112},
		{"render", unsafe.Sizeof(render{}), 40},
		{"claimList", unsafe.Sizeof(claimList{}), 48},
		{"labelSet", unsafe.Sizeof(labelSet{}), 24},
	}
	for _, tt := range tests {
		if tt.got > tt.want {
			t.Errorf("%s is %d bytes, more than %d", tt.name, tt.got, tt.want)
		}
	}
}
