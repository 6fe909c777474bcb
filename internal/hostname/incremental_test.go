package hostname

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

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
