package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const hostnamesInput = `type: HostnameGenerator
name: teams
spec:
  selector:
    meshService:
      matchLabels:
        tier: backend
  template: '{{ label "team" }}.teams.mesh.local'
---
type: MeshService
name: alpha
mesh: default
labels:
  tier: backend
  team: blue
spec:
  ports:
  - port: 80
---
type: MeshService
name: beta
mesh: default
labels:
  tier: backend
  team: blue
spec:
  ports:
  - port: 80
---
type: MeshService
name: gamma
mesh: default
labels:
  tier: backend
spec:
  ports:
  - port: 80
---
type: MeshExternalService
name: httpbin
mesh: default
spec:
  match:
  - type: Domain
    value: httpbin.org
    port: 443
    protocol: tls
`

type address struct {
	Hostname string `json:"hostname"`
	Status   string `json:"status"`
	Origin   struct {
		Name string `json:"name"`
	} `json:"origin"`
	Reason string `json:"reason"`
}

func addresses(t *testing.T, api, collection, name string) ([]address, error) {
	resp, err := http.Get(api + "/meshes/default/" + collection + "/" + name)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var doc struct {
		Status struct {
			Addresses []address `json:"addresses"`
		} `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return nil, err
	}
	return doc.Status.Addresses, nil
}

// waitAddresses polls the API until the service's addresses, summarised as
// "hostname=Status", equal want.
func waitAddresses(t *testing.T, api, collection, name string, want ...string) []address {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var got []string
	for time.Now().Before(deadline) {
		addrs, err := addresses(t, api, collection, name)
		if err == nil {
			got = got[:0]
			for _, a := range addrs {
				got = append(got, a.Hostname+"="+a.Status)
			}
			if cmp.Equal(want, got) {
				return addrs
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("addresses of %s %s = %v, want %v", collection, name, got, want)
	return nil
}

// TestHostnames_ApplyThenReadStatus applies a generator and services with
// `meshnames apply` against a real server and reads the hostnames, the
// collision and its resolution back through the API and the CLI.
func TestHostnames_ApplyThenReadStatus(t *testing.T) {
	t.Parallel() // no timing bound that other processes could break
	p := start(t, "server", "--data-dir", t.TempDir())
	p.waitReady(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// apply creates services in parallel, so which of two services in one
	// input is older is not defined: alpha, which must hold the shared
	// name, goes first on its own.
	docs := strings.Split(hostnamesInput, "---\n")
	for _, input := range []string{strings.Join(docs[:2], "---\n"), strings.Join(docs[2:], "---\n")} {
		if out, stderr, err := run(t, ctx, []byte(input), "apply", "-f", "-", "--server", p.api); err != nil {
			t.Fatalf("apply: %v\n%s%s", err, out, stderr)
		}
	}

	// The default generator names every service; "teams" gives alpha and
	// beta the same name, and alpha, created first, holds it.
	waitAddresses(t, p.api, "meshservices", "alpha", "alpha.svc.mesh.local=Available", "blue.teams.mesh.local=Available")
	beta := waitAddresses(t, p.api, "meshservices", "beta", "beta.svc.mesh.local=Available", "blue.teams.mesh.local=NotAvailable")
	if !strings.Contains(beta[1].Reason, "MeshService default/alpha") {
		t.Errorf("beta's reason does not name the holder: %q", beta[1].Reason)
	}
	gamma := waitAddresses(t, p.api, "meshservices", "gamma", "gamma.svc.mesh.local=Available", "=NotAvailable")
	if gamma[1].Reason != `label "team" is missing` {
		t.Errorf("gamma's reason = %q, want the missing label", gamma[1].Reason)
	}
	waitAddresses(t, p.api, "meshexternalservices", "httpbin", "httpbin.extsvc.mesh.local=Available")

	out, stderr, err := run(t, ctx, nil, "inspect", "hostnames", "-o", "json", "--server", p.api)
	if err != nil {
		t.Fatalf("inspect hostnames: %v\n%s", err, stderr)
	}
	var listing struct {
		Hostnames []struct{ Hostname, Kind, Service, Generator, Status, Reason string } `json:"hostnames"`
	}
	if err := json.Unmarshal([]byte(out), &listing); err != nil {
		t.Fatalf("inspect hostnames -o json: %v\n%s", err, out)
	}
	var rows []string
	for _, h := range listing.Hostnames {
		rows = append(rows, h.Hostname+" "+h.Kind+"/"+h.Service+" "+h.Generator+" "+h.Status)
	}
	wantRows := []string{
		" MeshService/gamma teams NotAvailable",
		"alpha.svc.mesh.local MeshService/alpha local-universal-mesh-service Available",
		"beta.svc.mesh.local MeshService/beta local-universal-mesh-service Available",
		"blue.teams.mesh.local MeshService/alpha teams Available",
		"blue.teams.mesh.local MeshService/beta teams NotAvailable",
		"gamma.svc.mesh.local MeshService/gamma local-universal-mesh-service Available",
		"httpbin.extsvc.mesh.local MeshExternalService/httpbin local-mesh-external-service Available",
	}
	if d := cmp.Diff(wantRows, rows); d != "" {
		t.Errorf("inspect hostnames rows (-want +got):\n%s", d)
	}
	out, _, err = run(t, ctx, nil, "inspect", "hostnames", "meshservice", "gamma", "--server", p.api)
	if err != nil || !strings.Contains(out, `label "team" is missing`) || !strings.Contains(out, "selects MeshExternalServices") {
		t.Errorf("inspect hostnames meshservice gamma (%v):\n%s", err, out)
	}

	// Deleting the holder promotes beta with no other change.
	if _, stderr, err := run(t, ctx, nil, "delete", "meshservice", "alpha", "--server", p.api); err != nil {
		t.Fatalf("delete: %v\n%s", err, stderr)
	}
	waitAddresses(t, p.api, "meshservices", "beta", "beta.svc.mesh.local=Available", "blue.teams.mesh.local=Available")

	// Giving gamma the label makes its name render.
	gammaDoc := strings.Replace(strings.Split(hostnamesInput, "---\n")[3], "tier: backend", "tier: backend\n  team: green", 1)
	if _, stderr, err := run(t, ctx, []byte(gammaDoc), "apply", "-f", "-", "--server", p.api); err != nil {
		t.Fatalf("apply gamma: %v\n%s", err, stderr)
	}
	waitAddresses(t, p.api, "meshservices", "gamma", "gamma.svc.mesh.local=Available", "green.teams.mesh.local=Available")
}
