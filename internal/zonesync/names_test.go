package zonesync

import (
	"strings"
	"testing"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/validate"
)

// TestHashedName pins the function: a change of any output renames every
// synced resource of every deployment, so it must be deliberate.
func TestHashedName(t *testing.T) {
	long := strings.Repeat("a", 63)
	label := strings.Repeat("c", 63)
	dotted := strings.Repeat("b", 40) + "." + label + "." + label + "." + label + "." + strings.Repeat("d", 20)
	for _, tc := range []struct {
		name                     string
		kind                     resource.Kind
		mesh, n, zone, namespace string
		want                     string
	}{
		{"service", resource.MeshService, "default", "redis", "east", "", "redis-"},
		{"namespace", resource.MeshService, "default", "redis", "east", "redis-system", "redis-"},
		{"generator", resource.HostnameGenerator, "", "synced-universal-mesh-service", "", "", "synced-universal-mesh-service-"},
		{"long-service", resource.MeshService, "default", long, "east", "", strings.Repeat("a", 48) + "-"},
		{"long-dataplane", resource.Dataplane, "default", long, "east", "", strings.Repeat("a", 48) + "-"},
		{"dotted", resource.Dataplane, "default", "web.prod", "east", "", "web.prod-"},
		{"cut-at-dash", resource.MeshService, "default", strings.Repeat("a", 47) + "-b", "east", "", strings.Repeat("a", 47) + "-"},
		{"long-subdomain", resource.Dataplane, "default", dotted, "east", "", strings.Repeat("b", 40) + "." + label + "." + label + "."},
		// The whole cut lands 52 bytes into the fourth label, which then
		// is the last and must be cut in its turn.
		{"cut-inside-an-earlier-label", resource.Dataplane, "default", strings.Repeat("g", 60) + "." + strings.Repeat("h", 60) + "." + label + "." + label + ".ii", "east", "",
			strings.Repeat("g", 60) + "." + strings.Repeat("h", 60) + "." + label + "." + strings.Repeat("c", 48) + "-"},
		{"cut-at-dot", resource.Dataplane, "default", label + "." + label + "." + label + "." + strings.Repeat("e", 45) + ".f", "east", "", label + "." + label + "." + label + "." + strings.Repeat("e", 45) + "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := HashedName(tc.kind, tc.mesh, tc.n, tc.zone, tc.namespace)
			if tc.want != "" && !strings.HasPrefix(got, tc.want) {
				t.Errorf("HashedName = %q, want prefix %q", got, tc.want)
			}
			if len(got) != len(strings.TrimSuffix(got, got[len(got)-hashLen:]))+hashLen {
				t.Errorf("HashedName = %q: no %d-character suffix", got, hashLen)
			}
			check := validate.DNS1123Subdomain
			limit := maxName
			if resource.MustLookup(tc.kind).ServiceKind {
				check, limit = validate.DNS1035Label, maxServiceName
			}
			if msg := check(got); msg != "" {
				t.Errorf("HashedName = %q is not a valid name: %s", got, msg)
			}
			if len(got) > limit {
				t.Errorf("HashedName = %q is %d bytes, over %d", got, len(got), limit)
			}
			if again := HashedName(tc.kind, tc.mesh, tc.n, tc.zone, tc.namespace); again != got {
				t.Errorf("not deterministic: %q then %q", got, again)
			}
		})
	}
}

// TestHashedName_Pinned fixes exact values.
func TestHashedName_Pinned(t *testing.T) {
	for _, tc := range []struct {
		mesh, n, zone, namespace string
		want                     string
	}{
		{"default", "redis", "east", "", "redis-fffq58zsh46p9m"},
		{"default", "redis", "west", "", "redis-csbvbpsvxtlj7k"},
		{"default", "redis", "east", "redis-system", "redis-dgjh7xd5z2vqn6"},
		{"", "synced-universal-mesh-service", "", "", "synced-universal-mesh-service-cmcqwjkw2hlz86"},
	} {
		if got := HashedName(resource.MeshService, tc.mesh, tc.n, tc.zone, tc.namespace); got != tc.want {
			t.Errorf("HashedName(%q, %q, %q, %q) = %q, want %q", tc.mesh, tc.n, tc.zone, tc.namespace, got, tc.want)
		}
	}
}

// TestHashedName_LengthDelimited shows the parts cannot run into each
// other, as Kuma's concatenation lets them.
func TestHashedName_LengthDelimited(t *testing.T) {
	for _, pair := range [][2][4]string{
		{{"default", "redis", "zone-1", "ns"}, {"default", "redis", "zone-1n", "s"}},
		{{"default", "redis", "east", ""}, {"default", "redise", "ast", ""}},
		{{"de", "fault", "", ""}, {"def", "ault", "", ""}},
		{{"default", "redis", "", "east"}, {"default", "redis", "east", ""}},
	} {
		a := HashedName(resource.Dataplane, pair[0][0], pair[0][1], pair[0][2], pair[0][3])
		b := HashedName(resource.Dataplane, pair[1][0], pair[1][1], pair[1][2], pair[1][3])
		if a[len(a)-hashLen:] == b[len(b)-hashLen:] {
			t.Errorf("%q and %q hash alike: %s", pair[0], pair[1], a)
		}
	}
}
