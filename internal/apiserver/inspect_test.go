package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// This file tests the inspection of a service's hostnames (_hostnames),
// on a zone and on the global.

func TestHostnames_Inspection(t *testing.T) {
	e := newEnv(t, resource.ModeStandalone)
	for _, doc := range []struct{ path, body string }{
		{"/hostnamegenerators/a-svc", "type: HostnameGenerator\nspec:\n  selector:\n    meshService: {}\n  template: '{{ .Name }}.svc.mesh.local'\n"},
		{"/hostnamegenerators/b-team", "type: HostnameGenerator\nspec:\n  selector:\n    meshService: {}\n  template: '{{ label \"team\" }}.teams.mesh.local'\n"},
		{"/hostnamegenerators/c-public", "type: HostnameGenerator\nspec:\n  selector:\n    meshService:\n      matchLabels:\n        expose: public\n  template: '{{ .Name }}.public.mesh.local'\n"},
		{"/hostnamegenerators/d-ext", "type: HostnameGenerator\nspec:\n  selector:\n    meshExternalService: {}\n  template: '{{ .Name }}.ext.mesh.local'\n"},
		{"/meshes/default/meshservices/redis", "type: MeshService\nlabels:\n  expose: private\nspec: {}\n"},
	} {
		if r := e.put(doc.path, doc.body); r.code != http.StatusCreated {
			t.Fatalf("PUT %s = %d %s", doc.path, r.code, r.body)
		}
	}
	// What the leader's controller would have written: a-svc's name lost.
	k := resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "redis"}
	cur, _ := e.st.Get(context.Background(), k)
	cur.Status = &resource.ServiceStatus{Addresses: []resource.Address{{Hostname: "redis.svc.mesh.local", Status: resource.AddressNotAvailable,
		Origin: resource.AddressOrigin{Kind: "HostnameGenerator", Name: "a-svc"}, Reason: "taken by someone older"}}}
	upd, err := store.UpdateStatus(context.Background(), e.st, cur)
	if err != nil {
		t.Fatal(err)
	}
	_ = upd
	waitStatus(t, e)

	r := e.do(http.MethodGet, "/meshes/default/meshservices/redis/_hostnames", "", "")
	var got api.HostnamesReport
	if err := json.Unmarshal(r.body, &got); err != nil || r.code != http.StatusOK {
		t.Fatalf("GET _hostnames = %d %s", r.code, r.body)
	}
	want := []api.HostnameOutcome{
		{Generator: "a-svc", Selects: true, Hostname: "redis.svc.mesh.local", Status: "NotAvailable", Reason: "taken by someone older"},
		{Generator: "b-team", Selects: true, Status: "NotAvailable", Reason: `label "team" is missing`},
		{Generator: "c-public", Reason: "selector needs expose=public (the service has private)"},
		{Generator: "d-ext", Reason: "selects MeshExternalServices"},
	}
	if d := cmp.Diff(want, got.Items); d != "" {
		t.Errorf("_hostnames items (-want +got):\n%s", d)
	}

	// Before the controller writes anything, a rendered name is Pending.
	e.put("/meshes/default/meshservices/web", "type: MeshService\nspec: {}\n")
	r = e.do(http.MethodGet, "/meshes/default/meshservices/web/_hostnames", "", "")
	_ = json.Unmarshal(r.body, &got)
	if got.Items[0].Status != api.StatusPending || got.Items[0].Hostname != "web.svc.mesh.local" {
		t.Errorf("first item before the controller ran = %+v, want web.svc.mesh.local Pending", got.Items[0])
	}

	for path, code := range map[string]int{
		"/meshes/default/dataplanes/x/_hostnames":      400,
		"/meshes/default/meshservices/nope/_hostnames": 404,
		"/meshes/default/widgets/x/_hostnames":         404,
		"/meshes/default/meshservices/web/_other":      404,
	} {
		if r := e.do(http.MethodGet, path, "", ""); r.code != code {
			t.Errorf("GET %s = %d, want %d: %s", path, r.code, code, r.body)
		}
	}
	if r := e.do(http.MethodPut, "/meshes/default/meshservices/web/_hostnames", "", ""); r.code != http.StatusMethodNotAllowed {
		t.Errorf("PUT _hostnames = %d, want 405", r.code)
	}
}

// On the global, which computes no hostnames, a zone's service is
// explained by what its zone gives it (its synced status), each name with
// that zone; no generator here is rendered for it, so no name that no zone
// gives it (its global name, <name>-<hash>) appears. A service created on
// the global, which every zone names for itself, gets no items.
func TestHostnames_InspectionOnTheGlobal(t *testing.T) {
	e := newEnv(t, resource.ModeGlobal)
	ctx := context.Background()
	// East's default generator as the global keeps it, and one of the
	// global's own: both would select the service.
	for _, g := range []*resource.Object{
		{Kind: resource.HostnameGenerator, Name: "local-universal-mesh-service-fjbkg9q7z2cdnj",
			Labels: map[string]string{resource.LabelOrigin: resource.OriginZone, resource.LabelZone: "east", resource.LabelDisplayName: "local-universal-mesh-service"},
			Spec: &resource.HostnameGeneratorSpec{Template: "{{ .Name }}.svc.mesh.local", Selector: resource.HostnameSelector{
				MeshService: &resource.LabelSelector{MatchLabels: map[string]string{resource.LabelOrigin: resource.OriginZone}}}}},
		{Kind: resource.HostnameGenerator, Name: "everything", Labels: map[string]string{resource.LabelOrigin: resource.OriginGlobal},
			Spec: &resource.HostnameGeneratorSpec{Template: "{{ .Name }}.all.mesh.local", Selector: resource.HostnameSelector{
				MeshService: &resource.LabelSelector{}}}},
	} {
		if _, err := store.Create(ctx, e.st, g); err != nil {
			t.Fatal(err)
		}
	}
	redis, err := store.Create(ctx, e.st, &resource.Object{Kind: resource.MeshService, Mesh: "default", Name: "redis-fffq58zsh46p9m",
		Labels: map[string]string{resource.LabelOrigin: resource.OriginZone, resource.LabelZone: "east", resource.LabelDisplayName: "redis", resource.LabelMesh: "default"},
		Spec:   &resource.MeshServiceSpec{Ports: []resource.Port{{Port: 6379}}}})
	if err != nil {
		t.Fatal(err)
	}
	redis.Status = &resource.ServiceStatus{Addresses: []resource.Address{
		{Hostname: "redis.svc.mesh.local", Status: resource.AddressAvailable, Origin: resource.AddressOrigin{Kind: resource.OriginHostnameGenerator, Name: "local-universal-mesh-service"}},
		{Hostname: "cache.teams.mesh.local", Status: resource.AddressNotAvailable, Origin: resource.AddressOrigin{Kind: resource.OriginHostnameGenerator, Name: "teams"}, Reason: "taken"},
	}}
	if _, err := store.UpdateStatus(ctx, e.st, redis); err != nil {
		t.Fatal(err)
	}
	if r := e.put("/meshes/default/meshexternalservices/httpbin", "type: MeshExternalService\nspec:\n  match:\n  - {type: Domain, value: httpbin.org, port: 443, protocol: tls}\n"); r.code != http.StatusCreated {
		t.Fatalf("PUT httpbin = %d %s", r.code, r.body)
	}
	want := map[string][]api.HostnameOutcome{
		"/meshes/default/meshservices/redis-fffq58zsh46p9m/_hostnames": {
			{Generator: "local-universal-mesh-service", Selects: true, Hostname: "redis.svc.mesh.local", Status: "Available", Zone: "east"},
			{Generator: "teams", Selects: true, Hostname: "cache.teams.mesh.local", Status: "NotAvailable", Reason: "taken", Zone: "east"},
		},
		"/meshes/default/meshexternalservices/httpbin/_hostnames": {},
	}
	for path, items := range want {
		var got api.HostnamesReport
		deadline := time.Now().Add(10 * time.Second)
		for {
			r := e.do(http.MethodGet, path, "", "")
			if err := json.Unmarshal(r.body, &got); err == nil && r.code == http.StatusOK && cmp.Equal(items, got.Items) || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond) // until the cache has the status
		}
		if d := cmp.Diff(items, got.Items); d != "" {
			t.Errorf("GET %s items (-want +got):\n%s", path, d)
		}
	}
}

func waitStatus(t *testing.T, e *env) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r := e.do(http.MethodGet, "/meshes/default/meshservices/redis", "", "")
		var o resource.Object
		if json.Unmarshal(r.body, &o) == nil && o.Status != nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the cache never showed the status of redis")
}
