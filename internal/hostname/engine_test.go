package hostname

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// Service kinds as the engine sees them (the user-facing names).
const (
	kindMS  = "MeshService"
	kindMES = "MeshExternalService"
	kindMZS = "MeshMultiZoneService"
)

// The rules validate.DNS1123Subdomain states; pinned here because they are
// what a user reads in the status.
const (
	ruleSyntax = "must be a lower case RFC 1123 DNS name: dot-separated labels of 1 to 63 lower case letters, digits and '-', each starting and ending with a letter or digit (e.g. 'example.com')"
	ruleLength = "must be no more than 253 characters"
	ruleEmpty  = "must not be empty"
)

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// at returns a creation time n minutes after t0.
func at(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }

func mustTemplate(text string) *Template {
	t, err := Parse(text)
	if err != nil {
		panic(fmt.Sprintf("parse %q: %v", text, err))
	}
	return t
}

func msKey(mesh, name string) ServiceKey { return ServiceKey{Kind: kindMS, Mesh: mesh, Name: name} }

// gen returns a synced generator of kind MeshService created at t0 that
// selects every service; tests adjust the fields that matter to them.
func gen(name, text string) Generator {
	return Generator{Name: name, Kind: kindMS, Template: mustTemplate(text), Created: t0}
}

func svc(k ServiceKey, created time.Time, labels map[string]string) Service {
	return Service{Key: k, Labels: labels, Created: created}
}

func avail(host, gen string) Address { return Address{Hostname: host, Generator: gen, Available: true} }

func missing(gen, label string) Address {
	return Address{Generator: gen, Reason: fmt.Sprintf("label %q is missing", label)}
}

func invalid(host, gen, rule string) Address {
	return Address{Hostname: host, Generator: gen, Reason: fmt.Sprintf("rendered hostname %q is not a valid DNS name: %s", host, rule)}
}

// taken is the address of a loser: the reason names the winner's kind,
// mesh, name and generator.
func taken(host, gen string, winner ServiceKey, winnerGen string) Address {
	return Address{Hostname: host, Generator: gen, Reason: fmt.Sprintf(
		"hostname %q is already taken by %s %s/%s (from generator %s), which has precedence",
		host, winner.Kind, winner.Mesh, winner.Name, winnerGen)}
}

// held is the address of a holder whose name one other service claims:
// the reason names that loser.
func held(host, gen string, loser ServiceKey, loserGen string) Address {
	return Address{Hostname: host, Generator: gen, Available: true, Reason: fmt.Sprintf(
		"also claimed by %s %s/%s (from generator %s), which does not get it", loser.Kind, loser.Mesh, loser.Name, loserGen)}
}

// engineCase is one state of generators and services and the addresses
// expected for some services.
type engineCase struct {
	name string
	zone string
	gens []Generator
	svcs []Service
	want map[ServiceKey][]Address
}

func newEngine(zone string, gens []Generator, svcs []Service) *Engine {
	if zone == "" {
		zone = "local"
	}
	e := NewEngine(zone)
	for _, g := range gens {
		e.SetGenerator(g)
	}
	for _, s := range svcs {
		e.SetService(s)
	}
	return e
}

// checkAddresses compares the addresses of every service in want.
func checkAddresses(t *testing.T, e *Engine, want map[ServiceKey][]Address) {
	t.Helper()
	for _, k := range slices.SortedFunc(maps.Keys(want), compareKeys) {
		got, ok := e.Addresses(k)
		if !ok {
			t.Errorf("Addresses(%s): service unknown", k)
			continue
		}
		if diff := cmp.Diff(want[k], got); diff != "" {
			t.Errorf("Addresses(%s) (-want +got):\n%s", k, diff)
		}
	}
}

func compareKeys(a, b ServiceKey) int {
	if c := strings.Compare(a.Kind, b.Kind); c != 0 {
		return c
	}
	if c := strings.Compare(a.Mesh, b.Mesh); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

func sortedKeys(ks []ServiceKey) []ServiceKey {
	ks = slices.Clone(ks)
	slices.SortFunc(ks, compareKeys)
	return ks
}

func runEngineCases(t *testing.T, tests []engineCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEngine(tt.zone, tt.gens, tt.svcs)
			checkAddresses(t, e, tt.want)
		})
	}
}

func TestEngine_TemplateFields(t *testing.T) {
	redis := msKey("default", "redis-6f7c")
	full := map[string]string{
		"kuma.io/display-name":     "redis",
		"k8s.kuma.io/namespace":    "demo-app",
		"k8s.kuma.io/service-name": "redis",
		"kuma.io/zone":             "east",
		"app":                      "cache",
	}
	bare := map[string]string{"app": "cache"}
	one := func(name string, labels map[string]string, text, want string) engineCase {
		return engineCase{
			name: name,
			zone: "west",
			gens: []Generator{gen("g", text)},
			svcs: []Service{svc(redis, t0, labels)},
			want: map[ServiceKey][]Address{redis: {avail(want, "g")}},
		}
	}
	runEngineCases(t, []engineCase{
		one("NameField", full, `{{ .Name }}.svc.mesh.local`, "redis-6f7c.svc.mesh.local"),
		one("NameFunction", full, `{{ name }}.svc.mesh.local`, "redis-6f7c.svc.mesh.local"),
		one("DisplayNameFromLabel", full, `{{ .DisplayName }}.svc.mesh.local`, "redis.svc.mesh.local"),
		// seed 001: DisplayName falls back to the name.
		one("DisplayNameFallsBackToName", bare, `{{ .DisplayName }}.svc.mesh.local`, "redis-6f7c.svc.mesh.local"),
		one("Namespace", full, `{{ .DisplayName }}.{{ .Namespace }}.svc.mesh.local`, "redis.demo-app.svc.mesh.local"),
		one("ZoneFromLabel", full, `{{ .DisplayName }}.svc.{{ .Zone }}.mesh.local`, "redis.svc.east.mesh.local"),
		one("ZoneFallsBackToEngineZone", bare, `{{ .DisplayName }}.svc.{{ .Zone }}.mesh.local`, "redis-6f7c.svc.west.mesh.local"),
		one("Mesh", bare, `{{ .Name }}.{{ .Mesh }}.mesh.local`, "redis-6f7c.default.mesh.local"),
		one("LabelFunction", full, `{{ label "app" }}.svc.mesh.local`, "cache.svc.mesh.local"),
		// seed 000's example generator.
		one("Seed000Example", full, `{{ label "k8s.kuma.io/service-name" }}.{{ label "k8s.kuma.io/namespace" }}.svc.mesh.{{ label "kuma.io/zone" }}`, "redis.demo-app.svc.mesh.east"),
		// Templates outside the fast path run through text/template and
		// must see the same values.
		one("EnginePathFields", full, `{{ if .Namespace }}{{ .DisplayName }}.{{ .Namespace }}{{ end }}.{{ .Zone }}.{{ .Mesh }}.{{ name }}`, "redis.demo-app.east.default.redis-6f7c"),
		one("EnginePathZoneFallback", bare, `{{ printf "%s.%s" .Name .Zone }}.mesh.local`, "redis-6f7c.west.mesh.local"),
		one("EnginePathLabel", full, `{{ label "app" | printf "%s-x" }}.mesh.local`, "cache-x.mesh.local"),
	})
}

func TestEngine_MissingLabel(t *testing.T) {
	web := msKey("default", "web")
	other := msKey("default", "other")
	runEngineCases(t, []engineCase{{
		name: "FastPath",
		gens: []Generator{gen("g", `{{ label "k8s.kuma.io/service-name" }}.svc.mesh.local`)},
		svcs: []Service{
			svc(web, t0, map[string]string{"app": "web"}),
			svc(other, t0, map[string]string{"k8s.kuma.io/service-name": "other"}),
		},
		want: map[ServiceKey][]Address{
			web:   {missing("g", "k8s.kuma.io/service-name")},
			other: {avail("other.svc.mesh.local", "g")},
		},
	}, {
		name: "EnginePath",
		gens: []Generator{gen("g", `{{ label "team" | printf "%s" }}.svc.mesh.local`)},
		svcs: []Service{svc(web, t0, map[string]string{"app": "web"})},
		want: map[ServiceKey][]Address{web: {missing("g", "team")}},
	}, {
		// Each generator is judged on its own: one failing does not hide
		// the other's name.
		name: "OtherGeneratorStillNames",
		gens: []Generator{
			gen("a", `{{ label "missing" }}.svc.mesh.local`),
			{Name: "b", Kind: kindMS, Template: mustTemplate(`{{ .Name }}.svc.mesh.local`), Created: at(1)},
		},
		svcs: []Service{svc(web, t0, nil)},
		want: map[ServiceKey][]Address{web: {missing("a", "missing"), avail("web.svc.mesh.local", "b")}},
	}})
}

func TestEngine_InvalidRenderedNames(t *testing.T) {
	label63 := strings.Repeat("a", 63)
	name253 := label63 + "." + label63 + "." + label63 + "." + strings.Repeat("b", 61)
	name254 := name253 + "b"
	tests := []struct {
		name     string
		rendered string
		// wantHost is what the status shows: the rendered name, cut at
		// 253 bytes with "..." when longer.
		wantHost string
		rule     string
	}{
		{"Uppercase", "Redis.mesh.local", "Redis.mesh.local", ruleSyntax},
		{"Underscore", "redis_1.mesh.local", "redis_1.mesh.local", ruleSyntax},
		{"Label64Bytes", strings.Repeat("a", 64) + ".mesh.local", strings.Repeat("a", 64) + ".mesh.local", ruleSyntax},
		{"Total254Bytes", name254, name253 + "...", ruleLength},
		{"EmptyLabel", "a..b", "a..b", ruleSyntax},
		{"LeadingDot", ".mesh.local", ".mesh.local", ruleSyntax},
		{"TrailingHyphen", "redis-.mesh.local", "redis-.mesh.local", ruleSyntax},
		{"Empty", "", "", ruleEmpty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad1, bad2, good := msKey("default", "bad1"), msKey("default", "bad2"), msKey("default", "good")
			e := newEngine("", []Generator{gen("g", `{{ label "host" }}`)}, []Service{
				svc(bad1, t0, map[string]string{"host": tt.rendered}),
				// The same invalid name twice is not a collision: neither
				// claims it.
				svc(bad2, at(1), map[string]string{"host": tt.rendered}),
				svc(good, at(2), map[string]string{"host": "good.mesh.local"}),
			})
			checkAddresses(t, e, map[ServiceKey][]Address{
				bad1: {invalid(tt.wantHost, "g", tt.rule)},
				bad2: {invalid(tt.wantHost, "g", tt.rule)},
				good: {avail("good.mesh.local", "g")},
			})
			for _, h := range []string{tt.rendered, tt.wantHost} {
				if got := e.Claimants("default", h); len(got) != 0 {
					t.Errorf("Claimants(%q) = %v, want none: invalid names are never claimed", h, got)
				}
			}
			if _, _, hosts := e.Sizes(); hosts != 1 {
				t.Errorf("Sizes: %d hostnames claimed, want 1", hosts)
			}
		})
	}

	// Boundaries that are valid.
	runEngineCases(t, []engineCase{{
		name: "Label63Bytes",
		gens: []Generator{gen("g", `{{ label "host" }}`)},
		svcs: []Service{svc(msKey("m", "s"), t0, map[string]string{"host": label63 + ".mesh.local"})},
		want: map[ServiceKey][]Address{msKey("m", "s"): {avail(label63+".mesh.local", "g")}},
	}, {
		name: "Total253Bytes",
		gens: []Generator{gen("g", `{{ label "host" }}`)},
		svcs: []Service{svc(msKey("m", "s"), t0, map[string]string{"host": name253})},
		want: map[ServiceKey][]Address{msKey("m", "s"): {avail(name253, "g")}},
	}})
}

func TestEngine_GeneratorPrecedence(t *testing.T) {
	// Two services claim web.mesh.local, each through its own generator.
	// The newer service's generator has precedence in every case, so the
	// generator rule must decide before the service rule would.
	older, newer := msKey("default", "a-older"), msKey("default", "b-newer")
	svcs := []Service{
		svc(older, t0, map[string]string{"who": "older"}),
		svc(newer, at(10), map[string]string{"who": "newer"}),
	}
	pair := func(name string, winner, loser Generator) engineCase {
		winner.MatchLabels = map[string]string{"who": "newer"}
		loser.MatchLabels = map[string]string{"who": "older"}
		winner.Template = mustTemplate(`web.mesh.local`)
		loser.Template = mustTemplate(`web.mesh.local`)
		winner.Kind, loser.Kind = kindMS, kindMS
		return engineCase{
			name: name,
			gens: []Generator{loser, winner},
			svcs: svcs,
			want: map[ServiceKey][]Address{
				newer: {held("web.mesh.local", winner.Name, older, loser.Name)},
				older: {taken("web.mesh.local", loser.Name, newer, winner.Name)},
			},
		}
	}
	runEngineCases(t, []engineCase{
		// seed 000: generators created in this zone win, even when newer
		// and later by name.
		pair("LocalBeatsSyncedEvenWhenNewer",
			Generator{Name: "z-local", Local: true, Created: at(5)},
			Generator{Name: "a-synced", Local: false, Created: t0}),
		pair("OlderBeatsNewer",
			Generator{Name: "z-old", Created: t0},
			Generator{Name: "a-new", Created: at(5)}),
		pair("OlderBeatsNewerBothLocal",
			Generator{Name: "z-old", Local: true, Created: t0},
			Generator{Name: "a-new", Local: true, Created: at(5)}),
		pair("NameBreaksTie",
			Generator{Name: "a-gen", Created: t0},
			Generator{Name: "b-gen", Created: t0}),
	})
}

func TestEngine_ServicePrecedence(t *testing.T) {
	g := gen("g", `{{ label "app" }}.mesh.local`)
	web := map[string]string{"app": "web"}
	zzOld, aaNew := msKey("default", "zz"), msKey("default", "aa")
	aa, bb := msKey("default", "aa"), msKey("default", "bb")
	runEngineCases(t, []engineCase{{
		name: "OlderServiceWins",
		gens: []Generator{g},
		svcs: []Service{svc(aaNew, at(1), web), svc(zzOld, t0, web)},
		want: map[ServiceKey][]Address{
			zzOld: {held("web.mesh.local", "g", aaNew, "g")},
			aaNew: {taken("web.mesh.local", "g", zzOld, "g")},
		},
	}, {
		name: "NameBreaksTie",
		gens: []Generator{g},
		svcs: []Service{svc(bb, t0, web), svc(aa, t0, web)},
		want: map[ServiceKey][]Address{
			aa: {held("web.mesh.local", "g", bb, "g")},
			bb: {taken("web.mesh.local", "g", aa, "g")},
		},
	}})
}

func TestEngine_Collisions(t *testing.T) {
	web := map[string]string{"app": "web"}
	ms1, ms2 := msKey("default", "web-1"), msKey("default", "web-2")
	mes := ServiceKey{Kind: kindMES, Mesh: "default", Name: "web-ext"}
	mzs := ServiceKey{Kind: kindMZS, Mesh: "default", Name: "web-mz"}
	perKind := func(name, kind string, created time.Time) Generator {
		return Generator{Name: name, Kind: kind, Template: mustTemplate(`{{ label "app" }}.mesh.local`), Created: created}
	}
	runEngineCases(t, []engineCase{{
		name: "TwoMeshServices",
		gens: []Generator{gen("g", `{{ label "app" }}.mesh.local`)},
		svcs: []Service{svc(ms2, at(1), web), svc(ms1, t0, web)},
		want: map[ServiceKey][]Address{
			ms1: {held("web.mesh.local", "g", ms2, "g")},
			ms2: {taken("web.mesh.local", "g", ms1, "g")},
		},
	}, {
		// Kuma checks per kind only; here the MeshExternalService's
		// generator is older, so it holds the name and the MeshService's
		// reason names it, kind included.
		name: "MeshServiceAndMeshExternalService",
		gens: []Generator{perKind("ms", kindMS, at(1)), perKind("mes", kindMES, t0)},
		svcs: []Service{svc(ms1, t0, web), svc(mes, at(5), web)},
		want: map[ServiceKey][]Address{
			mes: {held("web.mesh.local", "mes", ms1, "ms")},
			ms1: {taken("web.mesh.local", "ms", mes, "mes")},
		},
	}, {
		name: "ThreeKinds",
		gens: []Generator{perKind("mzs", kindMZS, t0), perKind("ms", kindMS, at(1)), perKind("mes", kindMES, at(2))},
		svcs: []Service{svc(ms1, t0, web), svc(mes, t0, web), svc(mzs, t0, web)},
		want: map[ServiceKey][]Address{
			mzs: {{Hostname: "web.mesh.local", Generator: "mzs", Available: true,
				Reason: "also claimed by MeshService default/web-1 (from generator ms) and 1 more, which do not get it"}},
			ms1: {taken("web.mesh.local", "ms", mzs, "mzs")},
			mes: {taken("web.mesh.local", "mes", mzs, "mzs")},
		},
	}, {
		name: "NoCollisionAcrossMeshes",
		gens: []Generator{gen("g", `{{ label "app" }}.mesh.local`), perKind("mes", kindMES, t0)},
		svcs: []Service{
			svc(msKey("a", "web"), t0, web),
			svc(msKey("b", "web"), at(1), web),
			svc(ServiceKey{Kind: kindMES, Mesh: "c", Name: "web"}, at(2), web),
		},
		want: map[ServiceKey][]Address{
			msKey("a", "web"):                       {avail("web.mesh.local", "g")},
			msKey("b", "web"):                       {avail("web.mesh.local", "g")},
			{Kind: kindMES, Mesh: "c", Name: "web"}: {avail("web.mesh.local", "mes")},
		},
	}})
}

// own is the address of an InternalVIP value its service holds alone.
func own(host string) Address { return Address{Hostname: host, Source: InternalVIP, Available: true} }

// TestEngine_OwnNames checks InternalVIP values (seed 003): they share the
// per-mesh uniqueness of generated names, come before them, and the clash
// is reported on both sides.
func TestEngine_OwnNames(t *testing.T) {
	ms := msKey("default", "mongo")
	mes := ServiceKey{Kind: kindMES, Mesh: "default", Name: "mongo-ext"}
	mes2 := ServiceKey{Kind: kindMES, Mesh: "default", Name: "a-mongo"}
	g := gen("g", `{{ .Name }}.svc.mesh.local`)
	mesGen := Generator{Name: "ext", Kind: kindMES, Template: mustTemplate(`{{ .Name }}.extsvc.mesh.local`), Created: t0}
	withOwn := func(k ServiceKey, created time.Time, names ...string) Service {
		return Service{Key: k, Created: created, OwnNames: names}
	}
	runEngineCases(t, []engineCase{{
		name: "Alone",
		gens: []Generator{mesGen},
		svcs: []Service{withOwn(mes, t0, "mongo.ext.local", "mongo-ro.ext.local", "mongo.ext.local")},
		want: map[ServiceKey][]Address{mes: {own("mongo.ext.local"), own("mongo-ro.ext.local"), avail("mongo-ext.extsvc.mesh.local", "ext")}},
	}, {
		// The external service is newer: the name the MeshService holds
		// stays with it, and the value is NotAvailable naming the holder.
		name: "NewerValueDoesNotTakeAHeldName",
		gens: []Generator{g},
		svcs: []Service{svc(ms, t0, nil), withOwn(mes, at(5), "mongo.svc.mesh.local")},
		want: map[ServiceKey][]Address{
			ms: {{Hostname: "mongo.svc.mesh.local", Generator: "g", Available: true,
				Reason: "also claimed by MeshExternalService default/mongo-ext (its InternalVIP match), which does not get it"}},
			mes: {{Hostname: "mongo.svc.mesh.local", Source: InternalVIP,
				Reason: `hostname "mongo.svc.mesh.local" is already taken by MeshService default/mongo (from generator g), which has precedence`}},
		},
	}, {
		// The value came first: a newer service rendering the same name
		// through an older generator does not take it.
		name: "OlderValueKeepsItsName",
		gens: []Generator{g},
		svcs: []Service{withOwn(mes, at(1), "mongo.svc.mesh.local"), svc(ms, at(5), nil)},
		want: map[ServiceKey][]Address{
			mes: {{Hostname: "mongo.svc.mesh.local", Source: InternalVIP, Available: true,
				Reason: "also claimed by MeshService default/mongo (from generator g), which does not get it"}},
			ms: {{Hostname: "mongo.svc.mesh.local", Generator: "g",
				Reason: `hostname "mongo.svc.mesh.local" is already taken by MeshExternalService default/mongo-ext (its InternalVIP match), which has precedence`}},
		},
	}, {
		// A generator newer than the value: its claim came to be when the
		// generator was created, after the value, whatever the service's age.
		name: "NewerGeneratorDoesNotTakeAValue",
		gens: []Generator{{Name: "late", Kind: kindMS, Template: mustTemplate(`{{ .Name }}.svc.mesh.local`), Created: at(9)}},
		svcs: []Service{svc(ms, t0, nil), withOwn(mes, at(5), "mongo.svc.mesh.local")},
		want: map[ServiceKey][]Address{
			mes: {{Hostname: "mongo.svc.mesh.local", Source: InternalVIP, Available: true,
				Reason: "also claimed by MeshService default/mongo (from generator late), which does not get it"}},
			ms: {{Hostname: "mongo.svc.mesh.local", Generator: "late",
				Reason: `hostname "mongo.svc.mesh.local" is already taken by MeshExternalService default/mongo-ext (its InternalVIP match), which has precedence`}},
		},
	}, {
		name: "TwoExternalServicesOlderWins",
		svcs: []Service{withOwn(mes2, at(1), "db.ext.local"), withOwn(mes, t0, "db.ext.local")},
		want: map[ServiceKey][]Address{
			mes: {{Hostname: "db.ext.local", Source: InternalVIP, Available: true,
				Reason: "also claimed by MeshExternalService default/a-mongo (its InternalVIP match), which does not get it"}},
			mes2: {{Hostname: "db.ext.local", Source: InternalVIP,
				Reason: `hostname "db.ext.local" is already taken by MeshExternalService default/mongo-ext (its InternalVIP match), which has precedence`}},
		},
	}, {
		name: "TwoExternalServicesNameBreaksTie",
		svcs: []Service{withOwn(mes, t0, "db.ext.local"), withOwn(mes2, t0, "db.ext.local")},
		want: map[ServiceKey][]Address{
			mes2: {{Hostname: "db.ext.local", Source: InternalVIP, Available: true,
				Reason: "also claimed by MeshExternalService default/mongo-ext (its InternalVIP match), which does not get it"}},
		},
	}, {
		// A generator giving the service its own value again adds nothing.
		name: "GeneratedEqualToOwn",
		gens: []Generator{{Name: "ext", Kind: kindMES, Template: mustTemplate(`db.ext.local`), Created: t0}},
		svcs: []Service{withOwn(mes, t0, "db.ext.local")},
		want: map[ServiceKey][]Address{mes: {own("db.ext.local")}},
	}, {
		name: "OtherMesh",
		gens: []Generator{g},
		svcs: []Service{svc(msKey("other", "mongo"), t0, nil), withOwn(mes, at(1), "mongo.svc.mesh.local")},
		want: map[ServiceKey][]Address{
			msKey("other", "mongo"): {avail("mongo.svc.mesh.local", "g")},
			mes:                     {own("mongo.svc.mesh.local")},
		},
	}, {
		// Admission refuses it; a value stored under older rules names nothing.
		name: "Invalid",
		svcs: []Service{withOwn(mes, t0, "DB.ext")},
		want: map[ServiceKey][]Address{mes: {{Hostname: "DB.ext", Source: InternalVIP,
			Reason: `InternalVIP value "DB.ext" is not a valid DNS name: ` + ruleSyntax}}},
	}})
}

// TestEngine_OwnNameRemoved checks that removing an InternalVIP value gives
// the name to the generated claimant at once, and marks both dirty.
func TestEngine_OwnNameRemoved(t *testing.T) {
	ms := msKey("default", "mongo")
	mes := ServiceKey{Kind: kindMES, Mesh: "default", Name: "mongo-ext"}
	e := newEngine("", []Generator{gen("g", `{{ .Name }}.svc.mesh.local`)},
		[]Service{svc(ms, t0, nil), {Key: mes, Created: at(1), OwnNames: []string{"mongo.svc.mesh.local"}}})
	e.TakeDirty()
	// The same service with the same labels, only its values changed.
	e.SetService(Service{Key: mes, Created: at(1), OwnNames: []string{"mongo.ext.local"}})
	if diff := cmp.Diff([]ServiceKey{mes, ms}, sortedKeys(e.TakeDirty())); diff != "" {
		t.Errorf("TakeDirty (-want +got):\n%s", diff)
	}
	checkAddresses(t, e, map[ServiceKey][]Address{
		ms:  {avail("mongo.svc.mesh.local", "g")},
		mes: {own("mongo.ext.local")},
	})
	want := []Claimant{{Service: mes, Source: InternalVIP}}
	if diff := cmp.Diff(want, e.Claimants("default", "mongo.ext.local")); diff != "" {
		t.Errorf("Claimants (-want +got):\n%s", diff)
	}
}

// TestEngine_Claimants checks the claims index: every claimant of a name,
// the holder first, across kinds.
func TestEngine_Claimants(t *testing.T) {
	web := map[string]string{"app": "web"}
	a, b := msKey("default", "a"), msKey("default", "b")
	mes := ServiceKey{Kind: kindMES, Mesh: "default", Name: "x"}
	e := newEngine("", []Generator{
		gen("g", `{{ label "app" }}.mesh.local`),
		{Name: "mes", Kind: kindMES, Template: mustTemplate(`{{ label "app" }}.mesh.local`), Created: at(1)},
	}, []Service{svc(b, at(1), web), svc(mes, t0, web), svc(a, at(2), web)})
	want := []Claimant{{Service: b, Generator: "g"}, {Service: a, Generator: "g"}, {Service: mes, Generator: "mes"}}
	if diff := cmp.Diff(want, e.Claimants("default", "web.mesh.local")); diff != "" {
		t.Errorf("Claimants (-want +got):\n%s", diff)
	}
	if got := e.Claimants("other", "web.mesh.local"); len(got) != 0 {
		t.Errorf("Claimants in another mesh = %v, want none", got)
	}
	if g, s, h := e.Sizes(); g != 2 || s != 3 || h != 1 {
		t.Errorf("Sizes() = %d, %d, %d, want 2, 3, 1", g, s, h)
	}
}

// TestEngine_Promotion checks that when the holder of a name goes away in
// any way, the next claimant gets it in the same operation and is reported
// dirty.
func TestEngine_Promotion(t *testing.T) {
	expose := Generator{Name: "g", Kind: kindMS, MatchLabels: map[string]string{"expose": "yes"}, Template: mustTemplate(`{{ label "app" }}.mesh.local`), Created: t0}
	winner, loser := msKey("default", "winner"), msKey("default", "loser")
	base := []Service{
		svc(winner, t0, map[string]string{"expose": "yes", "app": "web"}),
		svc(loser, at(1), map[string]string{"expose": "yes", "app": "web"}),
	}
	// For the generator case the winner holds the name through a local
	// generator although it is the newer service.
	teamA := Generator{Name: "team-a", Kind: kindMS, Local: true, MatchLabels: map[string]string{"team": "a"}, Template: mustTemplate(`web.mesh.local`), Created: at(5)}
	teamB := Generator{Name: "team-b", Kind: kindMS, MatchLabels: map[string]string{"team": "b"}, Template: mustTemplate(`web.mesh.local`), Created: t0}
	byGen := []Service{
		svc(winner, at(1), map[string]string{"team": "a"}),
		svc(loser, t0, map[string]string{"team": "b"}),
	}
	byGenBefore := map[ServiceKey][]Address{
		winner: {held("web.mesh.local", "team-a", loser, "team-b")},
		loser:  {taken("web.mesh.local", "team-b", winner, "team-a")},
	}

	tests := []struct {
		name       string
		gens       []Generator
		svcs       []Service
		before     map[ServiceKey][]Address
		change     func(e *Engine)
		want       map[ServiceKey][]Address
		wantDirty  []ServiceKey
		wantClaims []Claimant
	}{{
		name:   "WinnerDeleted",
		gens:   []Generator{expose},
		svcs:   base,
		change: func(e *Engine) { e.DeleteService(winner) },
		want:   map[ServiceKey][]Address{loser: {avail("web.mesh.local", "g")}},
		// A deleted service has no status to write.
		wantDirty:  []ServiceKey{loser},
		wantClaims: []Claimant{{Service: loser, Generator: "g"}},
	}, {
		name: "WinnerStopsBeingSelected",
		gens: []Generator{expose},
		svcs: base,
		change: func(e *Engine) {
			e.SetService(svc(winner, t0, map[string]string{"expose": "no", "app": "web"}))
		},
		want: map[ServiceKey][]Address{
			winner: {},
			loser:  {avail("web.mesh.local", "g")},
		},
		wantDirty:  []ServiceKey{loser, winner},
		wantClaims: []Claimant{{Service: loser, Generator: "g"}},
	}, {
		name: "WinnerRendersAnotherName",
		gens: []Generator{expose},
		svcs: base,
		change: func(e *Engine) {
			e.SetService(svc(winner, t0, map[string]string{"expose": "yes", "app": "api"}))
		},
		want: map[ServiceKey][]Address{
			winner: {avail("api.mesh.local", "g")},
			loser:  {avail("web.mesh.local", "g")},
		},
		wantDirty:  []ServiceKey{loser, winner},
		wantClaims: []Claimant{{Service: loser, Generator: "g"}},
	}, {
		name: "WinnerLosesTheLabelItsNameNeeds",
		gens: []Generator{expose},
		svcs: base,
		change: func(e *Engine) {
			e.SetService(svc(winner, t0, map[string]string{"expose": "yes"}))
		},
		want: map[ServiceKey][]Address{
			winner: {missing("g", "app")},
			loser:  {avail("web.mesh.local", "g")},
		},
		wantDirty:  []ServiceKey{loser, winner},
		wantClaims: []Claimant{{Service: loser, Generator: "g"}},
	}, {
		// Same labels, new creation time: the winner is re-created and is
		// now the newer service.
		name: "WinnerRecreated",
		gens: []Generator{expose},
		svcs: base,
		change: func(e *Engine) {
			e.SetService(svc(winner, at(5), map[string]string{"expose": "yes", "app": "web"}))
		},
		want: map[ServiceKey][]Address{
			winner: {taken("web.mesh.local", "g", loser, "g")},
			loser:  {held("web.mesh.local", "g", winner, "g")},
		},
		wantDirty:  []ServiceKey{loser, winner},
		wantClaims: []Claimant{{Service: loser, Generator: "g"}, {Service: winner, Generator: "g"}},
	}, {
		name:   "WinningGeneratorDeleted",
		gens:   []Generator{teamA, teamB},
		svcs:   byGen,
		before: byGenBefore,
		change: func(e *Engine) { e.DeleteGenerator("team-a") },
		want: map[ServiceKey][]Address{
			winner: {},
			loser:  {avail("web.mesh.local", "team-b")},
		},
		wantDirty:  []ServiceKey{loser, winner},
		wantClaims: []Claimant{{Service: loser, Generator: "team-b"}},
	}, {
		name:   "WinningGeneratorStopsSelecting",
		gens:   []Generator{teamA, teamB},
		svcs:   byGen,
		before: byGenBefore,
		change: func(e *Engine) {
			g := teamA
			g.MatchLabels = map[string]string{"team": "c"}
			e.SetGenerator(g)
		},
		want: map[ServiceKey][]Address{
			winner: {},
			loser:  {avail("web.mesh.local", "team-b")},
		},
		wantDirty:  []ServiceKey{loser, winner},
		wantClaims: []Claimant{{Service: loser, Generator: "team-b"}},
	}, {
		// The winning generator is re-created in global: it loses its
		// precedence, and the older service wins through the other one.
		name:   "WinningGeneratorLosesPrecedence",
		gens:   []Generator{teamA, teamB},
		svcs:   byGen,
		before: byGenBefore,
		change: func(e *Engine) {
			g := teamA
			g.Local = false
			e.SetGenerator(g)
		},
		want: map[ServiceKey][]Address{
			winner: {taken("web.mesh.local", "team-a", loser, "team-b")},
			loser:  {held("web.mesh.local", "team-b", winner, "team-a")},
		},
		wantDirty:  []ServiceKey{loser, winner},
		wantClaims: []Claimant{{Service: loser, Generator: "team-b"}, {Service: winner, Generator: "team-a"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEngine("", tt.gens, tt.svcs)
			before := tt.before
			if before == nil {
				before = map[ServiceKey][]Address{
					winner: {held("web.mesh.local", "g", loser, "g")},
					loser:  {taken("web.mesh.local", "g", winner, "g")},
				}
			}
			checkAddresses(t, e, before)
			e.TakeDirty()

			tt.change(e)
			if diff := cmp.Diff(tt.wantDirty, sortedKeys(e.TakeDirty())); diff != "" {
				t.Errorf("TakeDirty (-want +got):\n%s", diff)
			}
			checkAddresses(t, e, tt.want)
			if diff := cmp.Diff(tt.wantClaims, e.Claimants("default", "web.mesh.local")); diff != "" {
				t.Errorf("Claimants (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEngine_GeneratorChange checks that SetGenerator on an existing name
// replaces the generator: the services it selected before and after are
// re-rendered, and only those.
func TestEngine_GeneratorChange(t *testing.T) {
	web, api := msKey("default", "web"), msKey("default", "api")
	g := Generator{Name: "g", Kind: kindMS, MatchLabels: map[string]string{"app": "web"}, Template: mustTemplate(`{{ .Name }}.svc.mesh.local`), Created: t0}
	svcs := []Service{
		svc(web, t0, map[string]string{"app": "web"}),
		svc(api, t0, map[string]string{"app": "api"}),
	}
	tests := []struct {
		name      string
		change    func(g Generator) Generator
		want      map[ServiceKey][]Address
		wantDirty []ServiceKey
		// wantHosts are the names claimed in mesh default afterwards.
		wantHosts []string
	}{{
		name:      "SelectorStopsMatching",
		change:    func(g Generator) Generator { g.MatchLabels = map[string]string{"app": "db"}; return g },
		want:      map[ServiceKey][]Address{web: {}, api: {}},
		wantDirty: []ServiceKey{web},
	}, {
		name:      "SelectorMovesToAnotherService",
		change:    func(g Generator) Generator { g.MatchLabels = map[string]string{"app": "api"}; return g },
		want:      map[ServiceKey][]Address{web: {}, api: {avail("api.svc.mesh.local", "g")}},
		wantDirty: []ServiceKey{api, web},
		wantHosts: []string{"api.svc.mesh.local"},
	}, {
		name:      "SelectorWidens",
		change:    func(g Generator) Generator { g.MatchLabels = nil; return g },
		want:      map[ServiceKey][]Address{web: {avail("web.svc.mesh.local", "g")}, api: {avail("api.svc.mesh.local", "g")}},
		wantDirty: []ServiceKey{api, web},
		wantHosts: []string{"api.svc.mesh.local", "web.svc.mesh.local"},
	}, {
		name:      "TemplateChangeRerenders",
		change:    func(g Generator) Generator { g.Template = mustTemplate(`{{ .Name }}.v2.svc.mesh.local`); return g },
		want:      map[ServiceKey][]Address{web: {avail("web.v2.svc.mesh.local", "g")}, api: {}},
		wantDirty: []ServiceKey{web},
		wantHosts: []string{"web.v2.svc.mesh.local"},
	}, {
		name:      "TemplateStartsFailing",
		change:    func(g Generator) Generator { g.Template = mustTemplate(`{{ label "team" }}.svc.mesh.local`); return g },
		want:      map[ServiceKey][]Address{web: {missing("g", "team")}, api: {}},
		wantDirty: []ServiceKey{web},
	}, {
		name:      "KindChanges",
		change:    func(g Generator) Generator { g.Kind = kindMES; return g },
		want:      map[ServiceKey][]Address{web: {}, api: {}},
		wantDirty: []ServiceKey{web},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEngine("", []Generator{g}, svcs)
			checkAddresses(t, e, map[ServiceKey][]Address{web: {avail("web.svc.mesh.local", "g")}, api: {}})
			e.TakeDirty()

			e.SetGenerator(tt.change(g))
			if diff := cmp.Diff(tt.wantDirty, sortedKeys(e.TakeDirty())); diff != "" {
				t.Errorf("TakeDirty (-want +got):\n%s", diff)
			}
			checkAddresses(t, e, tt.want)
			for _, h := range []string{"web.svc.mesh.local", "api.svc.mesh.local", "web.v2.svc.mesh.local"} {
				claimed := len(e.Claimants("default", h)) > 0
				if want := slices.Contains(tt.wantHosts, h); claimed != want {
					t.Errorf("%s claimed = %v, want %v", h, claimed, want)
				}
			}
			if gens, _, hosts := e.Sizes(); gens != 1 || hosts != len(tt.wantHosts) {
				t.Errorf("Sizes: %d generators, %d hostnames, want 1, %d", gens, hosts, len(tt.wantHosts))
			}
		})
	}
}

// TestEngine_KeepsNoReferenceToCallerMaps checks that the engine copies the
// label maps it is given: a caller that reuses and edits a map between two
// calls (as a cache handing out the same object might) must not change
// what the engine believes it set before.
func TestEngine_KeepsNoReferenceToCallerMaps(t *testing.T) {
	web := msKey("default", "web")
	t.Run("GeneratorMatchLabels", func(t *testing.T) {
		match := map[string]string{"app": "web"}
		g := Generator{Name: "g", Kind: kindMS, MatchLabels: match, Template: mustTemplate(`{{ .Name }}.svc.mesh.local`), Created: t0}
		e := newEngine("", []Generator{g}, []Service{svc(web, t0, map[string]string{"app": "web"})})
		checkAddresses(t, e, map[ServiceKey][]Address{web: {avail("web.svc.mesh.local", "g")}})
		e.TakeDirty()

		match["app"] = "api"
		e.SetGenerator(g)
		if diff := cmp.Diff([]ServiceKey{web}, e.TakeDirty()); diff != "" {
			t.Errorf("TakeDirty (-want +got):\n%s", diff)
		}
		checkAddresses(t, e, map[ServiceKey][]Address{web: {}})
		if _, _, hosts := e.Sizes(); hosts != 0 {
			t.Errorf("Sizes: %d hostnames claimed, want 0", hosts)
		}
	})
	t.Run("ServiceLabels", func(t *testing.T) {
		labels := map[string]string{"app": "web"}
		e := newEngine("", []Generator{gen("g", `{{ label "app" }}.mesh.local`)}, []Service{svc(web, t0, labels)})
		e.TakeDirty()

		labels["app"] = "api"
		e.SetService(svc(web, t0, labels))
		if diff := cmp.Diff([]ServiceKey{web}, e.TakeDirty()); diff != "" {
			t.Errorf("TakeDirty (-want +got):\n%s", diff)
		}
		checkAddresses(t, e, map[ServiceKey][]Address{web: {avail("api.mesh.local", "g")}})
	})
	t.Run("ServiceOwnNames", func(t *testing.T) {
		mes := ServiceKey{Kind: kindMES, Mesh: "default", Name: "db"}
		names := []string{"db.ext.local"}
		e := newEngine("", nil, []Service{{Key: mes, Created: t0, OwnNames: names}})
		e.TakeDirty()

		names[0] = "other.ext.local"
		e.SetService(Service{Key: mes, Created: t0, OwnNames: names})
		if diff := cmp.Diff([]ServiceKey{mes}, e.TakeDirty()); diff != "" {
			t.Errorf("TakeDirty (-want +got):\n%s", diff)
		}
		checkAddresses(t, e, map[ServiceKey][]Address{mes: {own("other.ext.local")}})
	})
}

// TestEngine_SetServiceAgain checks what SetService counts as a change of
// a service it knows: labels, own names (repeats aside) and the instant of
// creation. An unchanged service marks nothing dirty; a changed one ends
// with the addresses an engine given only its new state computes.
func TestEngine_SetServiceAgain(t *testing.T) {
	k := ServiceKey{Kind: kindMES, Mesh: "default", Name: "db"}
	gens := []Generator{{Name: "g", Kind: kindMES, Template: mustTemplate(`{{ label "app" }}.ext.local`), Created: t0}}
	labels := map[string]string{"app": "db", "team": "a"}
	first := Service{Key: k, Labels: labels, Created: t0, OwnNames: []string{"a.ext.local", "b.ext.local"}}
	with := func(f func(s *Service)) Service {
		s := first
		s.Labels = maps.Clone(labels)
		s.OwnNames = slices.Clone(first.OwnNames)
		f(&s)
		return s
	}
	tests := []struct {
		name      string
		next      Service
		wantDirty bool
	}{
		{"Same", first, false},
		{"EqualMaps", with(func(*Service) {}), false},
		{"OwnNameRepeated", with(func(s *Service) { s.OwnNames = []string{"a.ext.local", "a.ext.local", "b.ext.local", "a.ext.local"} }), false},
		{"SameInstantOtherLocation", with(func(s *Service) { s.Created = t0.In(time.FixedZone("x", 3600)) }), false},
		{"LabelValue", with(func(s *Service) { s.Labels["team"] = "b" }), true},
		{"LabelAdded", with(func(s *Service) { s.Labels["x"] = "" }), true},
		{"LabelRemoved", with(func(s *Service) { delete(s.Labels, "team") }), true},
		{"NoLabels", with(func(s *Service) { s.Labels = nil }), true},
		{"OwnNameAdded", with(func(s *Service) { s.OwnNames = append(s.OwnNames, "c.ext.local") }), true},
		{"OwnNameRemoved", with(func(s *Service) { s.OwnNames = s.OwnNames[:1] }), true},
		{"OwnNamesReordered", with(func(s *Service) { s.OwnNames = []string{"b.ext.local", "a.ext.local"} }), true},
		{"NoOwnNames", with(func(s *Service) { s.OwnNames = nil }), true},
		{"OwnNameIsGenerated", with(func(s *Service) { s.OwnNames = []string{"db.ext.local"} }), true},
		{"Created", with(func(s *Service) { s.Created = t0.Add(time.Nanosecond) }), true},
		{"CreatedEarlier", with(func(s *Service) { s.Created = t0.Add(-time.Second) }), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEngine("", gens, []Service{first})
			e.TakeDirty()
			e.SetService(tt.next)
			var want []ServiceKey
			if tt.wantDirty {
				want = []ServiceKey{k}
			}
			if diff := cmp.Diff(want, e.TakeDirty(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("TakeDirty (-want +got):\n%s", diff)
			}
			fresh := newEngine("", gens, []Service{tt.next})
			wantAddrs, _ := fresh.Addresses(k)
			checkAddresses(t, e, map[ServiceKey][]Address{k: wantAddrs})
		})
	}
}

// TestEngine_NameHashCollisions checks the claims index and the service
// index when every name and every service key has the same hash (one in
// the map by hash, the others in collided): they are found, released and
// claimed again whatever the order.
func TestEngine_NameHashCollisions(t *testing.T) {
	keys := make([]ServiceKey, 5)
	for i := range keys {
		keys[i] = msKey("default", fmt.Sprintf("s%d", i))
	}
	tests := []struct {
		name    string
		deletes []int // indexes into keys, in order
	}{
		{"NewestFirst", []int{4, 3, 2, 1, 0}},
		{"OldestFirst", []int{0, 1, 2, 3, 4}},
		{"MiddleFirst", []int{2, 1, 3, 0, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := NewEngine("zone")
			e.hashMask = 0
			e.SetGenerator(gen("g", `{{ .Name }}.mesh.local`))
			for _, k := range keys {
				e.SetService(svc(k, t0, nil))
			}
			live := map[int]bool{0: true, 1: true, 2: true, 3: true, 4: true}
			check := func(step string) {
				t.Helper()
				for i, k := range keys {
					host := k.Name + ".mesh.local"
					var want []Claimant
					if live[i] {
						want = []Claimant{{Service: k, Generator: "g"}}
					}
					if diff := cmp.Diff(want, e.Claimants("default", host), cmpEmpty); diff != "" {
						t.Errorf("%s: Claimants(%s) (-want +got):\n%s", step, host, diff)
					}
				}
				if _, svcs, hosts := e.Sizes(); hosts != len(live) || svcs != len(live) {
					t.Errorf("%s: Sizes: %d services, %d hostnames, want %d of each", step, svcs, hosts, len(live))
				}
				for i, k := range keys {
					if _, ok := e.Addresses(k); ok != live[i] {
						t.Errorf("%s: Addresses(%s): known = %v, want %v", step, k, ok, live[i])
					}
				}
			}
			check("initially")
			for _, i := range tt.deletes {
				e.DeleteService(keys[i])
				delete(live, i)
				check("after deleting " + keys[i].Name)
			}
			// Claim them again, in the other order.
			for i := len(keys) - 1; i >= 0; i-- {
				e.SetService(svc(keys[i], t0, nil))
				live[i] = true
			}
			check("after adding them again")
			// A second service claiming a name of the same hash joins its list.
			late := msKey("default", "late")
			e.SetService(svc(late, at(1), map[string]string{"kuma.io/display-name": "s2"}))
			e.SetGenerator(gen("g", `{{ .DisplayName }}.mesh.local`))
			checkAddresses(t, e, map[ServiceKey][]Address{
				keys[2]: {held("s2.mesh.local", "g", late, "g")},
				late:    {taken("s2.mesh.local", "g", keys[2], "g")},
			})
		})
	}
}

// cmpEmpty treats nil and empty slices alike, for Claimants.
var cmpEmpty = cmp.FilterValues(func(x, y []Claimant) bool { return len(x) == 0 && len(y) == 0 }, cmp.Ignore())

// TestEngine_SameNameFromTwoGenerators checks that a name two generators
// give one service is listed once, under the generator with precedence,
// and is not a collision.
func TestEngine_SameNameFromTwoGenerators(t *testing.T) {
	s := msKey("default", "web")
	other := msKey("default", "zz-other")
	first := Generator{Name: "first", Kind: kindMS, Template: mustTemplate(`{{ .Name }}.svc.mesh.local`), Created: t0}
	second := Generator{Name: "second", Kind: kindMS, Template: mustTemplate(`{{ .DisplayName }}.svc.mesh.local`), Created: at(1)}
	third := Generator{Name: "third", Kind: kindMS, Template: mustTemplate(`{{ .Name }}.third.mesh.local`), Created: at(2)}
	// other renders web.svc.mesh.local too through second (display name),
	// and is newer: it loses to s whichever generator s holds it by.
	e := newEngine("", []Generator{third, second, first}, []Service{
		svc(s, t0, nil),
		svc(other, at(1), map[string]string{"kuma.io/display-name": "web"}),
	})
	checkAddresses(t, e, map[ServiceKey][]Address{
		s: {held("web.svc.mesh.local", "first", other, "second"), avail("web.third.mesh.local", "third")},
		other: {
			avail("zz-other.svc.mesh.local", "first"),
			taken("web.svc.mesh.local", "second", s, "first"),
			avail("zz-other.third.mesh.local", "third"),
		},
	})
	wantClaims := []Claimant{{Service: s, Generator: "first"}, {Service: other, Generator: "second"}}
	if diff := cmp.Diff(wantClaims, e.Claimants("default", "web.svc.mesh.local")); diff != "" {
		t.Errorf("Claimants (-want +got):\n%s", diff)
	}
	e.TakeDirty()

	e.DeleteGenerator("first")
	if diff := cmp.Diff([]ServiceKey{s, other}, sortedKeys(e.TakeDirty())); diff != "" {
		t.Errorf("TakeDirty after DeleteGenerator (-want +got):\n%s", diff)
	}
	checkAddresses(t, e, map[ServiceKey][]Address{
		s: {held("web.svc.mesh.local", "second", other, "second"), avail("web.third.mesh.local", "third")},
		other: {
			taken("web.svc.mesh.local", "second", s, "second"),
			avail("zz-other.third.mesh.local", "third"),
		},
	})
	wantClaims = []Claimant{{Service: s, Generator: "second"}, {Service: other, Generator: "second"}}
	if diff := cmp.Diff(wantClaims, e.Claimants("default", "web.svc.mesh.local")); diff != "" {
		t.Errorf("Claimants after DeleteGenerator (-want +got):\n%s", diff)
	}
}

// TestEngine_TakeDirty checks that the dirty set is exact enough for the
// controller not to rewrite statuses that cannot have changed.
func TestEngine_TakeDirty(t *testing.T) {
	a, b, c := msKey("default", "a"), msKey("default", "b"), msKey("default", "c")
	other := msKey("other", "b")
	g := gen("g", `{{ label "app" }}.mesh.local`)
	gens := []Generator{g}
	tests := []struct {
		name   string
		gens   []Generator
		svcs   []Service
		change func(e *Engine)
		want   []ServiceKey
	}{{
		name: "UnchangedServiceSetAgain",
		gens: gens,
		svcs: []Service{svc(a, t0, map[string]string{"app": "web"}), svc(b, at(1), map[string]string{"app": "web"})},
		// A fresh but equal label map.
		change: func(e *Engine) { e.SetService(svc(a, t0, map[string]string{"app": "web"})) },
		want:   []ServiceKey{},
	}, {
		name: "UnchangedServiceWithoutLabelsSetAgain",
		gens: gens,
		svcs: []Service{svc(a, t0, nil)},
		change: func(e *Engine) {
			e.SetService(svc(a, t0, map[string]string{}))
			e.SetService(svc(a, t0, nil))
		},
		want: []ServiceKey{},
	}, {
		name:   "ChangeTouchingNoNameOfOthers",
		gens:   gens,
		svcs:   []Service{svc(a, t0, map[string]string{"app": "web"}), svc(b, t0, map[string]string{"app": "api"})},
		change: func(e *Engine) { e.SetService(svc(a, t0, map[string]string{"app": "db"})) },
		want:   []ServiceKey{a},
	}, {
		name:   "SameNameInAnotherMesh",
		gens:   gens,
		svcs:   []Service{svc(a, t0, map[string]string{"app": "web"}), svc(other, t0, map[string]string{"app": "web"})},
		change: func(e *Engine) { e.SetService(svc(a, t0, map[string]string{"app": "db"})) },
		want:   []ServiceKey{a},
	}, {
		name: "ReleaseMarksWaiter",
		gens: gens,
		svcs: []Service{svc(a, t0, map[string]string{"app": "web"}), svc(b, at(1), map[string]string{"app": "web"})},
		// a releases web.mesh.local, which b was waiting for.
		change: func(e *Engine) { e.SetService(svc(a, t0, map[string]string{"app": "db"})) },
		want:   []ServiceKey{a, b},
	}, {
		name: "NewClaimantMarksHolder",
		gens: gens,
		svcs: []Service{svc(b, at(1), map[string]string{"app": "web"}), svc(a, t0, map[string]string{"app": "api"})},
		// a takes web.mesh.local from b.
		change: func(e *Engine) { e.SetService(svc(a, t0, map[string]string{"app": "web"})) },
		want:   []ServiceKey{a, b},
	}, {
		name: "GeneratorChangeMarksOnlyItsServices",
		gens: []Generator{
			{Name: "ga", Kind: kindMS, MatchLabels: map[string]string{"app": "a"}, Template: mustTemplate(`{{ .Name }}.a.mesh.local`), Created: t0},
			{Name: "gb", Kind: kindMS, MatchLabels: map[string]string{"app": "b"}, Template: mustTemplate(`{{ .Name }}.b.mesh.local`), Created: t0},
		},
		svcs: []Service{svc(a, t0, map[string]string{"app": "a"}), svc(b, t0, map[string]string{"app": "b"})},
		change: func(e *Engine) {
			e.SetGenerator(Generator{Name: "ga", Kind: kindMS, MatchLabels: map[string]string{"app": "a"}, Template: mustTemplate(`{{ .Name }}.a2.mesh.local`), Created: t0})
		},
		want: []ServiceKey{a},
	}, {
		name: "LoserLeavingDoesNotMarkOtherLosers",
		gens: gens,
		svcs: []Service{
			svc(a, t0, map[string]string{"app": "web"}),
			svc(b, at(1), map[string]string{"app": "web"}),
			svc(c, at(2), map[string]string{"app": "web"}),
		},
		// The holder stays a, so b's address does not change; a's reason
		// counts the other claimants, so a is marked.
		change: func(e *Engine) { e.SetService(svc(c, at(2), map[string]string{"app": "db"})) },
		want:   []ServiceKey{a, c},
	}, {
		name: "LoserJoiningDoesNotMarkOthers",
		gens: gens,
		svcs: []Service{
			svc(a, t0, map[string]string{"app": "web"}),
			svc(b, at(1), map[string]string{"app": "web"}),
			svc(c, at(2), map[string]string{"app": "db"}),
		},
		change: func(e *Engine) { e.SetService(svc(c, at(2), map[string]string{"app": "web"})) },
		want:   []ServiceKey{a, c}, // the holder, whose reason counts claimants, and c
	}, {
		name: "LabelChangeKeepingNames",
		gens: gens,
		svcs: []Service{
			svc(a, t0, map[string]string{"app": "web"}),
			svc(b, at(1), map[string]string{"app": "web"}),
		},
		change: func(e *Engine) { e.SetService(svc(a, t0, map[string]string{"app": "web", "version": "2"})) },
		want:   []ServiceKey{a},
	}, {
		// A service set and deleted between two TakeDirty calls has no
		// status to write.
		name: "SetThenDeleted",
		gens: gens,
		svcs: []Service{svc(a, t0, map[string]string{"app": "web"})},
		change: func(e *Engine) {
			e.SetService(svc(b, t0, map[string]string{"app": "api"}))
			e.DeleteService(b)
		},
		want: []ServiceKey{},
	}, {
		name: "ChangedThenDeletedThenAddedAgain",
		gens: gens,
		svcs: []Service{svc(a, t0, map[string]string{"app": "web"})},
		change: func(e *Engine) {
			e.SetService(svc(a, t0, map[string]string{"app": "api"}))
			e.DeleteService(a)
			e.SetService(svc(a, t0, map[string]string{"app": "web"}))
		},
		want: []ServiceKey{a},
	}, {
		name: "GeneratorOfAnotherKind",
		gens: gens,
		svcs: []Service{svc(a, t0, map[string]string{"app": "web"})},
		change: func(e *Engine) {
			e.SetGenerator(Generator{Name: "mes", Kind: kindMES, Template: mustTemplate(`web.mesh.local`), Created: t0})
		},
		want: []ServiceKey{},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEngine("", tt.gens, tt.svcs)
			e.TakeDirty()
			tt.change(e)
			if diff := cmp.Diff(tt.want, sortedKeys(e.TakeDirty())); diff != "" {
				t.Errorf("TakeDirty (-want +got):\n%s", diff)
			}
			if got := e.TakeDirty(); len(got) != 0 {
				t.Errorf("second TakeDirty = %v, want none", got)
			}
		})
	}
}

func TestEngine_UnknownDeletesAreNoops(t *testing.T) {
	web := msKey("default", "web")
	e := newEngine("", []Generator{gen("g", `{{ .Name }}.svc.mesh.local`)}, []Service{svc(web, t0, nil)})
	e.TakeDirty()

	e.DeleteService(msKey("default", "nope"))
	e.DeleteService(msKey("other", "web"))                                   // same name, other mesh
	e.DeleteService(ServiceKey{Kind: kindMES, Mesh: "default", Name: "web"}) // same name, other kind
	e.DeleteGenerator("nope")

	if got := e.TakeDirty(); len(got) != 0 {
		t.Errorf("TakeDirty = %v, want none", got)
	}
	if g, s, h := e.Sizes(); g != 1 || s != 1 || h != 1 {
		t.Errorf("Sizes() = %d, %d, %d, want 1, 1, 1", g, s, h)
	}
	checkAddresses(t, e, map[ServiceKey][]Address{web: {avail("web.svc.mesh.local", "g")}})
	if got, ok := e.Addresses(msKey("default", "nope")); ok || got != nil {
		t.Errorf("Addresses of an unknown service = %v, %v, want nil, false", got, ok)
	}
}

// TestEngine_EmptyGeneratorAndServiceSets covers the edges of an engine
// with nothing in it.
func TestEngine_EmptyGeneratorAndServiceSets(t *testing.T) {
	e := NewEngine("zone")
	if got := e.TakeDirty(); len(got) != 0 {
		t.Errorf("TakeDirty of a new engine = %v", got)
	}
	web := msKey("default", "web")
	e.SetService(svc(web, t0, nil))
	if diff := cmp.Diff([]ServiceKey{web}, e.TakeDirty()); diff != "" {
		t.Errorf("TakeDirty after the first SetService (-want +got):\n%s", diff)
	}
	checkAddresses(t, e, map[ServiceKey][]Address{web: {}})
	e.SetGenerator(gen("g", `{{ .Name }}.svc.mesh.local`))
	if diff := cmp.Diff([]ServiceKey{web}, e.TakeDirty()); diff != "" {
		t.Errorf("TakeDirty after SetGenerator (-want +got):\n%s", diff)
	}
	checkAddresses(t, e, map[ServiceKey][]Address{web: {avail("web.svc.mesh.local", "g")}})
}
