package server

import (
	"os"
	"runtime/debug"
	"testing"
)

// gcPercent reads the collector's target without changing it.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestLoadGC_Phases(t *testing.T) {
	t.Setenv("GOGC", "") // restored after the test; unset below
	unsetenv(t, "GOGC")
	const started = 80
	prev := debug.SetGCPercent(started)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	g := newLoadGC(false)
	var dones []func()
	pass := func() { dones = append(dones, g.firstPass()) }
	steps := []struct {
		name string
		do   func()
		want int
	}{
		{"the load starts eager", func() {}, loadGCPercent},
		{"a first pass runs at the start's target", pass, started},
		{"a second concurrent pass", pass, started},
		{"one pass ends (its done called twice), the other runs", func() { dones[0](); dones[0]() }, started},
		{"both ended: eager again", func() { dones[1]() }, loadGCPercent},
		{"the load ends", g.end, started},
		{"a first pass after the load changes nothing", pass, started},
		{"its end neither", func() { dones[2]() }, started},
		{"end again changes nothing", g.end, started},
	}
	for _, s := range steps {
		s.do()
		if got := gcPercent(); got != s.want {
			t.Fatalf("%s: GOGC %d, want %d", s.name, got, s.want)
		}
	}
}

func TestLoadGC_ListedEndsASmallOrFederatedLoad(t *testing.T) {
	t.Setenv("GOGC", "")
	unsetenv(t, "GOGC")
	const started = 80
	prev := debug.SetGCPercent(started)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	for _, tc := range []struct {
		name      string
		federated bool
		n         int
		want      int
	}{
		{"a standalone store of eagerMin stays eager", false, eagerMin, loadGCPercent},
		{"a small standalone store ends the load", false, eagerMin - 1, started},
		{"a federated store ends the load whatever its size", true, 10 * eagerMin, started},
		{"a small federated store too", true, 1, started},
	} {
		g := newLoadGC(tc.federated)
		g.listed(tc.n)
		if got := gcPercent(); got != tc.want {
			t.Errorf("%s: GOGC %d, want %d", tc.name, got, tc.want)
		}
		g.end()
	}
}

func TestLoadGC_OperatorsGOGCIsLeftAlone(t *testing.T) {
	t.Setenv("GOGC", "150")
	prev := debug.SetGCPercent(150)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	g := newLoadGC(false)
	done := g.firstPass()
	done()
	g.end()
	if got := gcPercent(); got != 150 {
		t.Fatalf("GOGC %d, want the operator's 150", got)
	}
}

// unsetenv unsets an environment variable for the test (t.Setenv, which
// restores it, must have been called for it first).
func unsetenv(t *testing.T, name string) {
	t.Helper()
	if err := os.Unsetenv(name); err != nil {
		t.Fatal(err)
	}
}
