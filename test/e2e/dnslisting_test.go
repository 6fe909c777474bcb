package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/meshnames/meshnames/internal/api"
)

// listingInput makes names of every source and every reason not to answer
// one: generated hostnames of every kind, an external service without
// InternalVIP matches (answered with its own VIP), an InternalVIP value, a
// value that collides with a held name, a synthesised service whose tag
// is not a DNS label, and one whose tag makes a label longer than 63 bytes.
var listingInput = `type: MeshExternalService
name: httpbin
mesh: default
spec:
  match:
  - type: Domain
    value: httpbin.org
    port: 443
    protocol: tls
---
type: MeshExternalService
name: db
mesh: default
spec:
  match:
  - type: InternalVIP
    value: db.ext.local
    port: 5432
    protocol: tcp
  - type: InternalVIP
    value: cache.svc.mesh.local
    port: 6380
    protocol: tcp
---
type: Dataplane
name: frontend-1
mesh: default
networking:
  address: 10.0.0.7
  inbound:
  - port: 8080
    tags:
      kuma.io/service: frontend_default_svc_80
---
type: Dataplane
name: long-1
mesh: default
networking:
  address: 10.0.0.8
  inbound:
  - port: 8080
    tags:
      kuma.io/service: ` + strings.Repeat("a", 56) + `_svc_800
`

// TestDNS_ListingIsWhatDNSAnswers checks inspect dns against the DNS
// server itself: every name it lists as answered is answered with the
// listed addresses, and every name it lists as not answered (and answered
// for no one else) gets no address, with a reason.
func TestDNS_ListingIsWhatDNSAnswers(t *testing.T) {
	p := start(t, "server", "--data-dir", t.TempDir())
	p.waitReady(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// cache holds its name before db's InternalVIP value claims it.
	cache := "type: MeshService\nname: cache\nmesh: default\nspec:\n  ports:\n  - port: 6379\n"
	if _, stderr, err := run(t, ctx, []byte(cache), "apply", "-f", "-", "--server", p.api); err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	for deadline := time.Now().Add(20 * time.Second); !slices.ContainsFunc(listing(t, p.api).Names, func(n api.DNSName) bool { return n.Name == "cache.svc.mesh.local." }); {
		if time.Now().After(deadline) {
			t.Fatal("cache.svc.mesh.local is never answered")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, stderr, err := run(t, ctx, []byte(listingInput), "apply", "-f", "-", "--server", p.api); err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	// Wait until the listing is complete: every expected name is in it.
	want := []string{"cache.svc.mesh.local.", "httpbin.extsvc.mesh.local.", "db.ext.local.", "db.extsvc.mesh.local.",
		"frontend-default-svc-80.svc.mesh.local.", "frontend_default_svc_80.mesh.", "frontend.default.svc.80.mesh."}
	var l api.DNSListing
	deadline := time.Now().Add(20 * time.Second)
	for {
		l = listing(t, p.api)
		var names []string
		for _, n := range l.Names {
			names = append(names, n.Name)
		}
		missing := slices.DeleteFunc(slices.Clone(want), func(w string) bool { return slices.Contains(names, w) })
		// Settled: every name listed, the refusals there, and no refusal
		// only waiting for a VIP (the leader allocates them just after).
		waiting := slices.ContainsFunc(l.NotAnswered, func(n api.DNSNotAnswer) bool { return strings.Contains(n.Reason, "no VIP yet") })
		if len(missing) == 0 && len(l.NotAnswered) >= 3 && !waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("listing never held %v (and the refusals): %+v", missing, l)
		}
		time.Sleep(20 * time.Millisecond)
	}
	answered := map[string]bool{}
	for _, n := range l.Names {
		answered[n.Name] = true
		if len(n.A) == 0 {
			continue // an SRV name
		}
		r := query(t, p.dns, n.Name, dns.TypeA)
		var got []string
		for _, rr := range r.Answer {
			if a, ok := rr.(*dns.A); ok {
				got = append(got, a.A.String())
			}
		}
		slices.Sort(got)
		wantA := slices.Sorted(slices.Values(n.A))
		if r.Rcode != dns.RcodeSuccess || !slices.Equal(got, wantA) {
			t.Errorf("%s listed with %v; DNS answers %s %v", n.Name, wantA, dns.RcodeToString[r.Rcode], got)
		}
	}
	reasons := map[string]string{}
	for _, n := range l.NotAnswered {
		if n.Reason == "" && n.Source != "internalVIP" {
			t.Errorf("%s is not answered for %s %s and no reason is given", n.Name, n.Kind, n.Service)
		}
		reasons[n.Name] = n.Reason
		if answered[n.Name] {
			continue // held by another service
		}
		if _, ok := dns.IsDomainName(n.Name); !ok || strings.Contains(n.Reason, "not a valid DNS name") {
			continue // the DNS library cannot even ask it
		}
		if r := query(t, p.dns, n.Name, dns.TypeA); len(r.Answer) > 0 {
			t.Errorf("%s is listed as not answered (%s), yet DNS answers %v", n.Name, n.Reason, r.Answer)
		}
	}
	// The collision: the held name stays with the MeshService.
	if got := reasons["cache.svc.mesh.local."]; !strings.Contains(got, "already taken by MeshService default/cache") {
		t.Errorf("cache.svc.mesh.local. refused for db with reason %q, want the holder named", got)
	}
	long := strings.Repeat("a", 56) + "_svc_800.mesh."
	if got := reasons[long]; !strings.Contains(got, "more than 63") {
		t.Errorf("%s: reason %q, want the label rule", long, got)
	}
}

func listing(t *testing.T, server string) api.DNSListing {
	t.Helper()
	resp, err := http.Get(server + "/meshes/default/_dns")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l api.DNSListing
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		t.Fatal(err)
	}
	return l
}
