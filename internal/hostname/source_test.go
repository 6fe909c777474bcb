package hostname

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestServiceTagNames checks the names of seed 004: the tag's own name,
// then its dash and dot aliases, each once, every own name first.
func TestServiceTagNames(t *testing.T) {
	tests := []struct {
		name   string
		tags   []string
		domain string
		want   []TagName
	}{{
		name:   "Kubernetes",
		tags:   []string{"frontend_default_svc_80"},
		domain: "mesh",
		want: []TagName{
			{Host: "frontend_default_svc_80.mesh", Tag: "frontend_default_svc_80"},
			{Host: "frontend-default-svc-80.mesh", Tag: "frontend_default_svc_80", Alias: true},
			{Host: "frontend.default.svc.80.mesh", Tag: "frontend_default_svc_80", Alias: true},
		},
	}, {
		// seed 004's example: dashes in the name stay.
		name:   "Dashes",
		tags:   []string{"my-complex-service_default_svc_80"},
		domain: "mesh",
		want: []TagName{
			{Host: "my-complex-service_default_svc_80.mesh", Tag: "my-complex-service_default_svc_80"},
			{Host: "my-complex-service-default-svc-80.mesh", Tag: "my-complex-service_default_svc_80", Alias: true},
			{Host: "my-complex-service.default.svc.80.mesh", Tag: "my-complex-service_default_svc_80", Alias: true},
		},
	}, {
		name:   "NoAliasesOfACompliantTag",
		tags:   []string{"backend"},
		domain: "Mesh.",
		want:   []TagName{{Host: "backend.mesh", Tag: "backend"}},
	}, {
		name:   "DotsOnlyHaveTheDashAlias",
		tags:   []string{"Web.1"},
		domain: "mesh",
		want:   []TagName{{Host: "web.1.mesh", Tag: "Web.1"}, {Host: "web-1.mesh", Tag: "Web.1", Alias: true}},
	}, {
		// a.b is a_b's dot alias and b's own name: claimed as its own name.
		name:   "AnAliasThatIsAnotherTagsName",
		tags:   []string{"a_b", "a.b", ""},
		domain: "mesh",
		want: []TagName{
			{Host: "a_b.mesh", Tag: "a_b"}, {Host: "a.b.mesh", Tag: "a.b"},
			{Host: "a-b.mesh", Tag: "a_b", Alias: true},
		},
	}, {
		name:   "NoDomain",
		tags:   []string{"backend"},
		domain: "",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ServiceTagNames(tt.tags, tt.domain)); diff != "" {
				t.Errorf("ServiceTagNames(%q, %q) (-want +got):\n%s", tt.tags, tt.domain, diff)
			}
		})
	}
}

func tagged(host string, src Source) Address {
	return Address{Hostname: host, Source: src, Available: true}
}

// TestEngine_ServiceTags checks service-tag names and aliases (seed 004) in
// the per-mesh table of names: they lose to generated names and InternalVIP
// values whatever their age, a tag's own name beats an alias, the older
// service wins between two of the same source, and each side's status says
// so.
func TestEngine_ServiceTags(t *testing.T) {
	front, front2 := msKey("default", "frontend"), msKey("default", "frontend-2")
	web := msKey("default", "web")
	mes := ServiceKey{Kind: kindMES, Mesh: "default", Name: "db"}
	withTags := func(k ServiceKey, created int, tags ...string) Service {
		return Service{Key: k, Created: at(created), TagNames: ServiceTagNames(tags, "mesh")}
	}
	frontNames := []Address{
		tagged("frontend_default_svc_80.mesh", ServiceTag),
		tagged("frontend-default-svc-80.mesh", ServiceTagAlias),
		tagged("frontend.default.svc.80.mesh", ServiceTagAlias),
	}
	runEngineCases(t, []engineCase{{
		name: "Alone",
		svcs: []Service{withTags(front, 0, "frontend_default_svc_80")},
		want: map[ServiceKey][]Address{front: frontNames},
	}, {
		// The generated name is newer, and still wins: a tag is the
		// proxies' identity, a hostname a name someone chose.
		name: "GeneratedNameBeatsAnOlderServiceTag",
		gens: []Generator{{Name: "g", Kind: kindMS, Template: mustTemplate(`{{ .Name }}.default.svc.80.mesh`), Created: at(5)}},
		svcs: []Service{withTags(front2, 0, "frontend_default_svc_80"), svc(msKey("default", "frontend"), at(3), nil)},
		want: map[ServiceKey][]Address{
			front: {{Hostname: "frontend.default.svc.80.mesh", Generator: "g", Available: true,
				Reason: "also claimed by MeshService default/frontend-2 (an alias of its service tag), which does not get it"}},
			front2: {
				avail("frontend-2.default.svc.80.mesh", "g"),
				tagged("frontend_default_svc_80.mesh", ServiceTag),
				tagged("frontend-default-svc-80.mesh", ServiceTagAlias),
				{Hostname: "frontend.default.svc.80.mesh", Source: ServiceTagAlias,
					Reason: `hostname "frontend.default.svc.80.mesh" is already taken by MeshService default/frontend (from generator g), which has precedence`},
			},
		},
	}, {
		name: "InternalVIPValueBeatsAServiceTag",
		svcs: []Service{withTags(front, 0, "db.ext"), {Key: mes, Created: at(1), OwnNames: []string{"db.ext.mesh"}}},
		want: map[ServiceKey][]Address{
			mes: {{Hostname: "db.ext.mesh", Source: InternalVIP, Available: true,
				Reason: "also claimed by MeshService default/frontend (its service tag), which does not get it"}},
			front: {
				{Hostname: "db.ext.mesh", Source: ServiceTag,
					Reason: `hostname "db.ext.mesh" is already taken by MeshExternalService default/db (its InternalVIP match), which has precedence`},
				tagged("db-ext.mesh", ServiceTagAlias),
			},
		},
	}, {
		// frontend.default.svc.80 is the newer service's own tag and the
		// older one's alias: the tag's own name wins.
		name: "ServiceTagBeatsAnOlderAlias",
		svcs: []Service{withTags(front, 0, "frontend_default_svc_80"), withTags(front2, 1, "frontend.default.svc.80")},
		want: map[ServiceKey][]Address{
			front: {
				tagged("frontend_default_svc_80.mesh", ServiceTag),
				{Hostname: "frontend-default-svc-80.mesh", Source: ServiceTagAlias, Available: true,
					Reason: "also claimed by MeshService default/frontend-2 (an alias of its service tag), which does not get it"},
				{Hostname: "frontend.default.svc.80.mesh", Source: ServiceTagAlias,
					Reason: `hostname "frontend.default.svc.80.mesh" is already taken by MeshService default/frontend-2 (its service tag), which has precedence`},
			},
			front2: {
				{Hostname: "frontend.default.svc.80.mesh", Source: ServiceTag, Available: true,
					Reason: "also claimed by MeshService default/frontend (an alias of its service tag), which does not get it"},
				{Hostname: "frontend-default-svc-80.mesh", Source: ServiceTagAlias,
					Reason: `hostname "frontend-default-svc-80.mesh" is already taken by MeshService default/frontend (an alias of its service tag), which has precedence`},
			},
		},
	}, {
		name: "OlderServiceWinsATag",
		svcs: []Service{withTags(front2, 1, "frontend_default_svc_80"), withTags(front, 0, "frontend_default_svc_80")},
		want: map[ServiceKey][]Address{
			front2: {
				{Hostname: "frontend_default_svc_80.mesh", Source: ServiceTag,
					Reason: `hostname "frontend_default_svc_80.mesh" is already taken by MeshService default/frontend (its service tag), which has precedence`},
				{Hostname: "frontend-default-svc-80.mesh", Source: ServiceTagAlias,
					Reason: `hostname "frontend-default-svc-80.mesh" is already taken by MeshService default/frontend (an alias of its service tag), which has precedence`},
				{Hostname: "frontend.default.svc.80.mesh", Source: ServiceTagAlias,
					Reason: `hostname "frontend.default.svc.80.mesh" is already taken by MeshService default/frontend (an alias of its service tag), which has precedence`},
			},
		},
	}, {
		// The service's own hostname equal to its alias: listed once, as
		// the hostname.
		name: "OwnHostnameEqualToItsAlias",
		gens: []Generator{gen("g", `{{ .Name }}.mesh`)},
		svcs: []Service{withTags(web, 0, "web_x"), withTags(msKey("default", "web-x"), 1)},
		want: map[ServiceKey][]Address{
			msKey("default", "web-x"): {{Hostname: "web-x.mesh", Generator: "g", Available: true,
				Reason: "also claimed by MeshService default/web (an alias of its service tag), which does not get it"}},
			web: {
				avail("web.mesh", "g"),
				tagged("web_x.mesh", ServiceTag),
				{Hostname: "web-x.mesh", Source: ServiceTagAlias,
					Reason: `hostname "web-x.mesh" is already taken by MeshService default/web-x (from generator g), which has precedence`},
				tagged("web.x.mesh", ServiceTagAlias),
			},
		},
	}, {
		name: "AliasEqualToTheServicesHostname",
		gens: []Generator{gen("g", `{{ .Name }}.default.svc.80.mesh`)},
		svcs: []Service{withTags(front, 0, "frontend_default_svc_80")},
		want: map[ServiceKey][]Address{front: {
			avail("frontend.default.svc.80.mesh", "g"),
			tagged("frontend_default_svc_80.mesh", ServiceTag),
			tagged("frontend-default-svc-80.mesh", ServiceTagAlias),
		}},
	}, {
		name: "Invalid",
		svcs: []Service{withTags(front, 0, "a..b")},
		want: map[ServiceKey][]Address{front: {
			{Hostname: "a..b.mesh", Source: ServiceTag, Reason: `the name "a..b.mesh" of service tag "a..b" is not a valid DNS name: an empty label`},
			tagged("a--b.mesh", ServiceTagAlias),
		}},
	}})
}

// TestEngine_ServiceTagPromotion checks that a service-tag name lost to a
// generated name comes back, in the same operation, when the generator
// goes, and that both services are reported dirty.
func TestEngine_ServiceTagPromotion(t *testing.T) {
	front, other := msKey("default", "frontend"), msKey("default", "other")
	g := Generator{Name: "g", Kind: kindMS, MatchLabels: map[string]string{"app": "x"}, Template: mustTemplate(`frontend.default.svc.80.mesh`), Created: t0}
	e := newEngine("", []Generator{g}, []Service{
		{Key: front, Created: t0, TagNames: ServiceTagNames([]string{"frontend_default_svc_80"}, "mesh")},
		svc(other, at(1), map[string]string{"app": "x"}),
	})
	e.TakeDirty()
	e.DeleteGenerator("g")
	if diff := cmp.Diff([]ServiceKey{front, other}, sortedKeys(e.TakeDirty())); diff != "" {
		t.Errorf("TakeDirty (-want +got):\n%s", diff)
	}
	checkAddresses(t, e, map[ServiceKey][]Address{
		other: {},
		front: {
			tagged("frontend_default_svc_80.mesh", ServiceTag),
			tagged("frontend-default-svc-80.mesh", ServiceTagAlias),
			tagged("frontend.default.svc.80.mesh", ServiceTagAlias),
		},
	})
	// The same tags again change nothing.
	e.SetService(Service{Key: front, Created: t0, TagNames: ServiceTagNames([]string{"frontend_default_svc_80"}, "mesh")})
	if got := e.TakeDirty(); len(got) != 0 {
		t.Errorf("TakeDirty after setting the same tags = %v, want none", got)
	}
	want := []Claimant{{Service: front, Source: ServiceTagAlias}}
	if diff := cmp.Diff(want, e.Claimants("default", "frontend.default.svc.80.mesh")); diff != "" {
		t.Errorf("Claimants (-want +got):\n%s", diff)
	}
}
