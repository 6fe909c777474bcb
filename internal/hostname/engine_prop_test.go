package hostname

import (
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The pools the property test draws from: small, so that selectors match,
// names collide and creation times tie often.
var (
	propMeshes = []string{"m1", "m2", "m3"}
	propKinds  = []string{kindMS, kindMES, kindMZS}
	propNames  = []string{"s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"}
	propGens   = []string{"g0", "g1", "g2", "g3", "g4"}
	propValues = []string{"a", "b"}
	propTimes  = []time.Time{t0, at(1), at(2)}
	propTexts  = []string{
		`{{ label "app" }}.mesh.local`,  // collides across services, fails without app
		`{{ label "team" }}.mesh.local`, // collides with the one above (same values)
		`shared.mesh.local`,             // everyone collides
		`{{ .DisplayName }}.svc.mesh.local`,
		`{{ label "team" }}.{{ .Zone }}.mesh.local`,
		`{{ .Name }}.{{ .Namespace }}.svc.mesh.local`, // empty label without a namespace
		`{{ label "app" }}_x.mesh.local`,              // never valid
		`{{ .Mesh }}.{{ label "app" }}.mesh.local`,
		`{{ if .Namespace }}{{ .Namespace }}.{{ end }}{{ name }}.mesh.local`, // text/template path
	}
	propTemplates = func() []*Template {
		out := make([]*Template, len(propTexts))
		for i, text := range propTexts {
			out[i] = mustTemplate(text)
		}
		return out
	}()
)

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.Intn(len(xs))] }

func randomGenerator(r *rand.Rand) Generator {
	g := Generator{
		Name:     pick(r, propGens),
		Kind:     pick(r, propKinds),
		Template: pick(r, propTemplates),
		Local:    r.Intn(3) == 0,
		Created:  pick(r, propTimes),
	}
	switch r.Intn(4) {
	case 0:
		g.MatchLabels = map[string]string{"app": pick(r, propValues)}
	case 1:
		g.MatchLabels = map[string]string{"team": pick(r, propValues), "app": pick(r, propValues)}
	}
	return g
}

func randomService(r *rand.Rand) Service {
	labels := map[string]string{}
	for _, l := range []struct {
		key    string
		values []string
	}{
		{"app", propValues},
		{"team", propValues},
		{"kuma.io/display-name", []string{"s0", "d"}},
		{"kuma.io/zone", []string{"east", "west"}},
		{"k8s.kuma.io/namespace", []string{"ns"}},
	} {
		if r.Intn(3) != 0 {
			labels[l.key] = pick(r, l.values)
		}
	}
	s := Service{
		Key:     ServiceKey{Kind: pick(r, propKinds), Mesh: pick(r, propMeshes), Name: pick(r, propNames)},
		Labels:  labels,
		Created: pick(r, propTimes),
	}
	// InternalVIP values, some equal to generated names, one invalid.
	if s.Key.Kind == kindMES {
		for range r.Intn(3) {
			s.OwnNames = append(s.OwnNames, pick(r, []string{"shared.mesh.local", "a.mesh.local", "db.ext.local", "s0.svc.mesh.local", "Bad.ext"}))
		}
	}
	// Service tags (seed 004) under the domain of the generated names, so
	// that their names and aliases collide with generated names
	// (a.mesh.local, shared.mesh.local, s0.svc.mesh.local), with InternalVIP
	// values, with each other (a.b is an alias of a_b; web_1 and web.1 share
	// their dash alias) and within a service; one has an invalid name.
	if s.Key.Kind == kindMS {
		var tags []string
		for range r.Intn(3) {
			tags = append(tags, pick(r, propTags))
		}
		s.TagNames = ServiceTagNames(tags, "mesh.local")
	}
	return s
}

var propTags = []string{"a", "shared", "s0.svc", "a_b", "a.b", "web_1", "web.1", "db.ext", "x..y"}

func describeGenerator(g Generator) string {
	return fmt.Sprintf("SetGenerator(%s %s match=%v local=%v created=+%v %q)",
		g.Name, g.Kind, g.MatchLabels, g.Local, g.Created.Sub(t0), g.Template.String())
}

// TestEngine_IncrementalEqualsFromScratch applies random sequences of
// changes and checks after each one that the incremental engine agrees with
// an engine built from scratch (in a shuffled order), that every service
// whose addresses changed is reported dirty, and that no name is available
// to two services of a mesh.
func TestEngine_IncrementalEqualsFromScratch(t *testing.T) {
	const seeds, ops = 150, 100
	for seed := range seeds {
		t.Run(fmt.Sprintf("seed%03d", seed), func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewSource(int64(seed)))
			e := NewEngine("local")
			// Narrow the hashes for two seeds in three so that names and keys
			// share hashes (all, or two by hash), which exercises the
			// collisions of the claims index and of the service index.
			e.hashMask = [3]uint64{^uint64(0), 0, 1}[seed%3]
			gens := map[string]Generator{}
			svcs := map[ServiceKey]Service{}
			prev := map[ServiceKey][]Address{}
			// history describes the ops so far, formatted only on failure.
			var history []func() string

			for op := range ops {
				switch n := r.Intn(20); {
				case n < 9:
					s := randomService(r)
					// Sometimes set a known service again unchanged.
					if n == 0 && len(svcs) > 0 {
						s = svcs[pick(r, slices.SortedFunc(maps.Keys(svcs), compareKeys))]
					}
					svcs[s.Key] = s
					e.SetService(s)
					history = append(history, func() string {
						return fmt.Sprintf("SetService(%s %v created=+%v own=%v tags=%v)", s.Key, s.Labels, s.Created.Sub(t0), s.OwnNames, s.TagNames)
					})
				case n < 12:
					// Mostly a known service; sometimes an unknown one.
					k := randomService(r).Key
					if len(svcs) > 0 && r.Intn(4) != 0 {
						k = pick(r, slices.SortedFunc(maps.Keys(svcs), compareKeys))
					}
					delete(svcs, k)
					e.DeleteService(k)
					history = append(history, func() string { return fmt.Sprintf("DeleteService(%s)", k) })
				case n < 17:
					g := randomGenerator(r)
					gens[g.Name] = g
					e.SetGenerator(g)
					history = append(history, func() string { return describeGenerator(g) })
				default:
					name := pick(r, propGens)
					delete(gens, name)
					e.DeleteGenerator(name)
					history = append(history, func() string { return "DeleteGenerator(" + name + ")" })
				}

				fail := func(format string, args ...any) {
					t.Helper()
					var ops strings.Builder
					for _, h := range history {
						ops.WriteString("\n  " + h())
					}
					t.Fatalf("seed %d, after op %d:%s\n"+format, append([]any{seed, op, ops.String()}, args...)...)
				}

				// Sometimes let changes pile up before TakeDirty, as the
				// controller does while it batches.
				takeDirty := r.Intn(3) != 0
				dirty := map[ServiceKey]bool{}
				if takeDirty {
					for _, k := range e.TakeDirty() {
						if _, ok := svcs[k]; !ok {
							fail("TakeDirty reports %s, which does not exist", k)
						}
						if dirty[k] {
							fail("TakeDirty reports %s twice", k)
						}
						dirty[k] = true
					}
				}

				fresh := fromScratch(r, gens, svcs)
				cur := map[ServiceKey][]Address{}
				for _, k := range slices.SortedFunc(maps.Keys(svcs), compareKeys) {
					got, ok := e.Addresses(k)
					if !ok {
						fail("Addresses(%s): unknown to the incremental engine", k)
					}
					// slices.Equal first: cmp is too slow for every check
					// of every op.
					if want, _ := fresh.Addresses(k); !slices.Equal(want, got) {
						fail("Addresses(%s) (-from scratch +incremental):\n%s", k, cmp.Diff(want, got))
					}
					cur[k] = got
					// prev holds the addresses at the last TakeDirty.
					if old, ok := prev[k]; takeDirty && (!ok || !slices.Equal(old, got)) && !dirty[k] {
						fail("Addresses(%s) changed from %v to %v but it is not dirty (dirty: %v)", k, old, got, dirty)
					}
				}
				if takeDirty {
					prev = cur
				}

				// Within a mesh a name is available to one service, the
				// first claimant, and both engines agree on who claims it. A
				// service-tag name or alias is available only when no
				// InternalVIP value or generated name claims it.
				holders := map[[2]string]ServiceKey{}
				for k, addrs := range cur {
					for _, a := range addrs {
						if !a.Available {
							continue
						}
						hk := [2]string{k.Mesh, a.Hostname}
						if h, ok := holders[hk]; ok && h != k {
							fail("%s is available to both %s and %s", a.Hostname, h, k)
						}
						holders[hk] = k
						claims := e.Claimants(k.Mesh, a.Hostname)
						if len(claims) == 0 || claims[0].Service != k || claims[0].Generator != a.Generator || claims[0].Source != a.Source {
							fail("Claimants(%s, %s) = %v, want %s (%s %s) first", k.Mesh, a.Hostname, claims, k, a.Source, a.Generator)
						}
						if a.Source.isTag() && slices.ContainsFunc(claims, func(c Claimant) bool { return !c.Source.isTag() }) {
							fail("%s holds %s by %s although %v claim it", k, a.Hostname, a.Source, claims)
						}
						if want := fresh.Claimants(k.Mesh, a.Hostname); !slices.Equal(want, claims) {
							fail("Claimants(%s, %s) (-from scratch +incremental):\n%s", k.Mesh, a.Hostname, cmp.Diff(want, claims))
						}
					}
				}
				wg, ws, wh := fresh.Sizes()
				if g, s, h := e.Sizes(); g != wg || s != ws || h != wh {
					fail("Sizes() = %d, %d, %d; from scratch %d, %d, %d", g, s, h, wg, ws, wh)
				}
			}
		})
	}
}

// fromScratch builds an engine from the current generators and services,
// set in a random interleaved order.
func fromScratch(r *rand.Rand, gens map[string]Generator, svcs map[ServiceKey]Service) *Engine {
	var steps []func(*Engine)
	for _, name := range slices.Sorted(maps.Keys(gens)) {
		g := gens[name]
		steps = append(steps, func(e *Engine) { e.SetGenerator(g) })
	}
	for _, k := range slices.SortedFunc(maps.Keys(svcs), compareKeys) {
		s := svcs[k]
		steps = append(steps, func(e *Engine) { e.SetService(s) })
	}
	r.Shuffle(len(steps), func(i, j int) { steps[i], steps[j] = steps[j], steps[i] })
	e := NewEngine("local")
	for _, step := range steps {
		step(e)
	}
	return e
}
