package hostname

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Outcome is what one generator makes of one service, for inspection.
type Outcome struct {
	Generator string
	// Selects tells whether the generator selects the service; when it
	// does not, NotSelected says why.
	Selects     bool
	NotSelected string
	// Hostname and Err are the render's result, as in Address.
	Hostname string
	Err      string
}

// Explain reports, for every generator in precedence order, whether it
// selects s and what it renders for it, using the same rules as the engine.
// Whether a rendered name is held or lost to another service is not known
// here: that needs every service of the mesh, and is what the controller
// writes into the service's status.
func Explain(gens []Generator, s Service, zone string) []Outcome {
	states := make([]*genState, len(gens))
	for i := range gens {
		states[i] = newGenState(gens[i])
	}
	sort.SliceStable(states, func(i, j int) bool { return states[i].before(states[j]) })
	e := Engine{zone: zone}
	labels := labelSetOf(s.Key.Name, s.Labels)
	vars := e.vars(s.Key, labels)
	out := make([]Outcome, 0, len(states))
	for _, g := range states {
		o := Outcome{Generator: g.Name}
		switch {
		case g.Kind != s.Key.Kind:
			o.NotSelected = "selects " + g.Kind + "s"
		case !g.selects(s.Key, labels):
			o.NotSelected = "selector needs " + unmatched(g.MatchLabels, s.Labels)
		default:
			o.Selects = true
			host, err := g.Template.Render(*vars)
			o.Hostname = host
			if err != nil {
				o.Err = err.Error()
				if inv, ok := err.(*InvalidNameError); ok {
					o.Hostname = inv.Hostname
				}
			}
		}
		out = append(out, o)
	}
	return out
}

// unmatched describes the selector labels a service lacks or has otherwise.
func unmatched(want, have map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		got, ok := have[k]
		switch {
		case !ok:
			parts = append(parts, fmt.Sprintf("%s=%s (the service has no %s label)", k, want[k], k))
		case got != want[k]:
			parts = append(parts, fmt.Sprintf("%s=%s (the service has %s)", k, want[k], got))
		}
	}
	return strings.Join(parts, ", ")
}
