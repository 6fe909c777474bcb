package hostname

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
