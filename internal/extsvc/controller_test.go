package extsvc

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshnames/meshnames/internal/reconcile"
	"github.com/meshnames/meshnames/internal/reconcile/reconciletest"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlite"
)

// syncBuffer is a log sink safe for the controller's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type env struct {
	t    *testing.T
	st   store.Store
	log  *syncBuffer
	core *Core
	rt   *reconciletest.Env
}

// newEnv runs the controller over a real embedded store and cache.
func newEnv(t *testing.T) *env {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{t: t, st: st, log: &syncBuffer{}}
	if _, err := store.Create(context.Background(), st, &resource.Object{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}}); err != nil {
		t.Fatal(err)
	}
	e.start()
	return e
}

func (e *env) start() {
	log := slog.New(slog.NewTextHandler(e.log, nil))
	e.rt = reconciletest.Start(e.t, e.st, reconciletest.Options{Log: log, Cores: func() []reconcile.Core {
		e.core = New(Options{Log: log, Registerer: prometheus.NewRegistry()})
		return []reconcile.Core{e.core}
	}})
}

func (e *env) stop() { e.rt.Stop() }

// put creates or updates an external service with matches "TYPE VALUE PORT".
func (e *env) put(name string, matches ...string) {
	e.t.Helper()
	spec := &resource.MeshExternalServiceSpec{}
	for _, m := range matches {
		var em resource.ExternalMatch
		f := strings.Fields(m)
		em.Type, em.Value = f[0], f[1]
		em.Port = map[string]int{"80": 80, "443": 443}[f[2]]
		spec.Match = append(spec.Match, em)
	}
	spec.Default()
	o := &resource.Object{Kind: resource.MeshExternalService, Mesh: "default", Name: name, Spec: spec}
	if errs := resource.Validate(o); len(errs) > 0 {
		e.t.Fatalf("invalid fixture: %v", errs)
	}
	// The controller's status writes bump the version: retry a stale
	// update, as any client does.
	for attempt := 0; ; attempt++ {
		cur, err := e.st.Get(context.Background(), o.Key())
		if err == nil {
			cur.Spec = spec
			_, err = store.Update(context.Background(), e.st, cur)
		} else {
			_, err = store.Create(context.Background(), e.st, o)
		}
		if errors.Is(err, store.ErrConflict) && attempt < 10 {
			continue
		}
		if err != nil {
			e.t.Fatal(err)
		}
		return
	}
}

func (e *env) conditions(name string) []resource.Condition {
	o, err := e.st.Get(context.Background(), resource.Key{Kind: resource.MeshExternalService, Mesh: "default", Name: name})
	if err != nil {
		return nil
	}
	if st, ok := o.Status.(resource.ServiceStatusOf); ok && st != nil {
		return st.Service().Conditions
	}
	return nil
}

// waitMessage waits until name's Overlapping condition has message want
// ("" for no condition).
func (e *env) waitMessage(name, want string) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	got := ""
	for time.Now().Before(deadline) {
		got = ""
		for _, c := range e.conditions(name) {
			if c.Type == resource.ConditionOverlapping {
				got = c.Message
			}
		}
		if got == want {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.t.Fatalf("Overlapping condition of %s = %q, want %q", name, got, want)
}

func TestController_ReportsOverlapsOnBothSidesAndLogs(t *testing.T) {
	e := newEnv(t)
	e.put("external-service1", "CIDR 10.1.1.0/24 80")
	e.put("external-service2", "IP 10.1.1.7 80", "IP 10.9.9.9 443")
	e.put("other-port", "IP 10.1.1.7 443")

	sentence := "external-service1 and external-service2 have overlapping IPs 10.1.1.7, which can disrupt your traffic."
	e.waitMessage("external-service1", sentence)
	e.waitMessage("external-service2", "external-service2 and external-service1 have overlapping IPs 10.1.1.7, which can disrupt your traffic.")
	e.waitMessage("other-port", "")
	want := resource.Condition{Type: "Overlapping", Status: "True", Reason: "OverlappingIPs", Message: sentence}
	if d := cmp.Diff([]resource.Condition{want}, e.conditions("external-service1")); d != "" {
		t.Errorf("conditions (-want +got):\n%s", d)
	}
	// The log line is seed 003's sentence, with the real names and range.
	if !strings.Contains(e.log.String(), `level=WARN msg="`+sentence+`" mesh=default ports=[80]`) {
		t.Errorf("log does not hold seed 003's sentence:\n%s", e.log.String())
	}

	// The overlap ends: both conditions go.
	e.put("external-service2", "IP 10.2.0.1 80")
	e.waitMessage("external-service1", "")
	e.waitMessage("external-service2", "")
	if n := testutil.ToFloat64(e.core.pairs); n != 0 {
		t.Errorf("overlapping pairs gauge = %v, want 0", n)
	}
}

// TestController_KeepsOtherConditions checks the controller owns its
// condition only: another controller's condition survives its writes, and
// its condition survives theirs (each writes a patch of its own parts).
func TestController_KeepsOtherConditions(t *testing.T) {
	e := newEnv(t)
	e.put("a", "CIDR 10.0.0.0/8 443")
	e.put("b", "CIDR 10.1.0.0/16 443")
	msg := "a and b have overlapping IPs 10.1.0.0/16, which can disrupt your traffic."
	e.waitMessage("a", msg)

	cur, err := e.st.Get(context.Background(), resource.Key{Kind: resource.MeshExternalService, Mesh: "default", Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	svc := cur.Status.(resource.ServiceStatusOf).Service()
	other := resource.Condition{Type: "VIPsAllocated", Status: "False", Reason: "PoolExhausted", Message: "full"}
	svc.Conditions = append(svc.Conditions, other)
	svc.VIPs = []resource.VIP{{IP: "242.0.0.1", Type: resource.VIPKuma, Hostname: "a.ext.local"}}
	// Written as the VIP controller writes: a patch of its own parts.
	rs, err := e.st.Apply(context.Background(), store.Op{Type: store.OpPatchStatus, Object: cur,
		Patch: &store.StatusPatch{Fields: []string{"vips"}, Conditions: []string{"VIPsAllocated"}}})
	if err != nil || rs[0].Err != nil {
		t.Fatal(err, rs)
	}
	e.put("b", "CIDR 10.2.0.0/16 443")
	e.waitMessage("a", "a and b have overlapping IPs 10.2.0.0/16, which can disrupt your traffic.")
	got := e.conditions("a")
	if len(got) != 2 || got[0] != other {
		t.Errorf("conditions = %+v, want the other controller's first, then Overlapping", got)
	}
}

func TestController_RebuildsOnRestart(t *testing.T) {
	e := newEnv(t)
	e.put("a", "IP 2001:db8::1 443")
	e.stop()
	// While no controller runs, an overlapping service arrives.
	e.put("b", "CIDR 2001:db8::/32 443")
	e.start()
	e.waitMessage("a", "a and b have overlapping IPs 2001:db8::1, which can disrupt your traffic.")
	e.waitMessage("b", "b and a have overlapping IPs 2001:db8::1, which can disrupt your traffic.")
}

// TestController_ReportsSameDomains: two services that match the same
// domain on a port carry the condition with reason OverlappingDomains,
// which gives way to OverlappingIPs when their IPs overlap too.
func TestController_ReportsSameDomains(t *testing.T) {
	e := newEnv(t)
	e.put("httpbin", "Domain httpbin.org 443")
	e.put("httpbin-2", "Domain httpbin.org 443", "Domain other.org 443")
	sentence := "httpbin and httpbin-2 both match the domain httpbin.org, which can disrupt your traffic."
	e.waitMessage("httpbin", sentence)
	want := resource.Condition{Type: "Overlapping", Status: "True", Reason: "OverlappingDomains", Message: sentence}
	if d := cmp.Diff([]resource.Condition{want}, e.conditions("httpbin")); d != "" {
		t.Errorf("conditions (-want +got):\n%s", d)
	}
	if !strings.Contains(e.log.String(), `level=WARN msg="httpbin and httpbin-2 both match the domain httpbin.org, which can disrupt your traffic." mesh=default ports=[443]`) {
		t.Errorf("log does not say that the domains overlap:\n%s", e.log.String())
	}
	e.put("httpbin-2", "Domain httpbin.org 443", "IP 10.0.0.1 80")
	e.put("httpbin", "Domain httpbin.org 443", "CIDR 10.0.0.0/24 80")
	e.waitMessage("httpbin", "httpbin and httpbin-2 have overlapping IPs 10.0.0.1, which can disrupt your traffic. "+sentence)
	if got := e.conditions("httpbin")[0].Reason; got != "OverlappingIPs" {
		t.Errorf("reason with IPs and domains = %q, want OverlappingIPs", got)
	}
}

func TestCondition_ListsAtMostFive(t *testing.T) {
	var overlaps []Overlap
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h"} {
		overlaps = append(overlaps, Overlap{Other: n, Ports: []int{80}, IPs: []string{"10.0.0.1"}})
	}
	c := condition("a", overlaps)
	if strings.Count(c.Message, "which can disrupt your traffic.") != 5 || !strings.HasSuffix(c.Message, " And 2 more external services.") {
		t.Errorf("message = %q, want five sentences and the count of the rest", c.Message)
	}
	if condition("a", nil) != nil {
		t.Error("condition without overlaps is not nil")
	}
}
