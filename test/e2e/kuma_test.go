package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// kumactl is an HTTP client shaped as kumactl 3.x talks to a control plane
// (kuma-facts section 23): the control plane's address joined with the API
// path, JSON bodies carrying kri and snis on every PUT, and the response
// decoded into Kuma's types, where an address's origin is a string.
type kumactl struct {
	t    *testing.T
	base string // the address given to `kumactl config control-planes add`
}

func (k kumactl) do(method, path string, body any) (int, []byte) {
	k.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			k.t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, k.base+path, r)
	if err != nil {
		k.t.Fatal(err)
	}
	req.Header.Set("User-Agent", "kumactl/3.0.0-dev")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		k.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// The Kuma types kumactl decodes a MeshService list into, as far as this
// test reads them; Origin is a string, so the native object shape fails.
type kumaList struct {
	Total int `json:"total"`
	Items []struct {
		Type   string `json:"type"`
		Mesh   string `json:"mesh"`
		Name   string `json:"name"`
		KRI    string `json:"kri"`
		Status struct {
			Addresses []struct {
				Hostname             string `json:"hostname"`
				Origin               string `json:"origin"`
				HostnameGeneratorRef struct {
					CoreName string `json:"coreName"`
				} `json:"hostnameGeneratorRef"`
			} `json:"addresses"`
			VIPs []struct {
				IP string `json:"ip"`
			} `json:"vips"`
			HostnameGenerators []struct {
				HostnameGeneratorRef struct {
					CoreName string `json:"coreName"`
				} `json:"hostnameGeneratorRef"`
				Conditions []struct {
					Type, Status, Reason, Message string
				} `json:"conditions"`
			} `json:"hostnameGenerators"`
		} `json:"status"`
	} `json:"items"`
}

// TestKuma_KumactlAgainstTheAdapter drives a real server's /kuma as kumactl
// does: the index check, applies of every kind with kri and snis, lists and
// gets decoded into Kuma's types once the controllers have named the
// services, an apply refused with invalid_parameters, and deletes. A real
// kumactl cannot be built here (the Go module proxy does not serve Kuma),
// so the requests are made as it makes them.
func TestKuma_KumactlAgainstTheAdapter(t *testing.T) {
	p := start(t, "server", "--data-dir", t.TempDir())
	p.waitReady(30 * time.Second)
	k := kumactl{t: t, base: p.api + "/kuma"}

	// `kumactl config control-planes add` reads the index.
	code, body := k.do(http.MethodGet, "", nil)
	var idx struct{ Product, Version, Tagline string }
	if code != http.StatusOK || json.Unmarshal(body, &idx) != nil || idx.Product != "meshnames" || idx.Version == "" {
		t.Fatalf("GET /kuma = %d %s", code, body)
	}

	// `kumactl apply -f` of each document: kri and snis are always sent.
	applies := []struct {
		path string
		doc  map[string]any
	}{
		{"/meshes/default/dataplanes/redis-1", map[string]any{"type": "Dataplane", "mesh": "default", "name": "redis-1", "kri": "kri_dp_default___redis-1_",
			"labels": map[string]string{"app": "redis"}, "networking": map[string]any{"address": "10.0.0.12",
				"inbound": []any{map[string]any{"port": 16379, "servicePort": 6379, "name": "main"}}}}},
		{"/meshes/default/meshservices/redis", map[string]any{"type": "MeshService", "mesh": "default", "name": "redis", "kri": "", "snis": []any{},
			"spec": map[string]any{"selector": map[string]any{"dataplaneLabels": map[string]any{"matchLabels": map[string]string{"app": "redis"}}},
				"ports": []any{map[string]any{"name": "main", "port": 6379, "targetPort": "main", "appProtocol": "tcp"}}}}},
		{"/meshes/default/meshexternalservices/httpbin", map[string]any{"type": "MeshExternalService", "mesh": "default", "name": "httpbin", "kri": "", "snis": []any{},
			"spec": map[string]any{"match": map[string]any{"type": "HostnameGenerator", "port": 443, "protocol": "tcp"},
				"endpoints": []any{map[string]any{"address": "httpbin.org", "port": 443}}, "tls": map[string]any{"enabled": true}}}},
		{"/meshes/default/meshmultizoneservices/redis-all", map[string]any{"type": "MeshMultiZoneService", "mesh": "default", "name": "redis-all", "kri": "",
			"spec": map[string]any{"selector": map[string]any{"meshService": map[string]any{"matchLabels": map[string]string{"kuma.io/display-name": "redis"}}},
				"ports": []any{map[string]any{"port": 6379, "appProtocol": "tcp"}}}}},
		{"/hostnamegenerators/by-app", map[string]any{"type": "HostnameGenerator", "name": "by-app", "kri": "",
			"spec": map[string]any{"selector": map[string]any{"meshService": map[string]any{"matchLabels": map[string]string{"kuma.io/origin": "zone"}}},
				"template": "{{ .DisplayName }}.app.mesh"}}},
		{"/zones/west", map[string]any{"type": "Zone", "name": "west", "enabled": false}},
		{"/zoneingresses/ingress-1", map[string]any{"type": "ZoneIngress", "name": "ingress-1", "zone": "default",
			"networking": map[string]any{"address": "192.168.0.1", "advertisedAddress": "10.0.0.1", "port": 10001, "advertisedPort": 10000}}},
	}
	for _, a := range applies {
		code, body := k.do(http.MethodPut, a.path, a.doc)
		var res struct{ Warnings []string }
		if code != http.StatusCreated || json.Unmarshal(body, &res) != nil || res.Warnings == nil {
			t.Fatalf("PUT %s = %d %s", a.path, code, body)
		}
	}

	// `kumactl get meshservices`: the list decodes into Kuma's types once
	// the hostnames and VIPs controllers have written the status.
	deadline := time.Now().Add(30 * time.Second)
	var list kumaList
	for {
		code, body := k.do(http.MethodGet, "/meshes/default/meshservices", nil)
		if code != http.StatusOK {
			t.Fatalf("GET meshservices = %d %s", code, body)
		}
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatalf("the list does not decode into Kuma's types: %v\n%s", err, body)
		}
		if list.Total == 1 && len(list.Items[0].Status.Addresses) == 2 && len(list.Items[0].Status.VIPs) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis not named within 30s: %s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := map[string]string{}
	for _, a := range list.Items[0].Status.Addresses {
		if a.Origin != "HostnameGenerator" {
			t.Errorf("address %s has origin %q, want HostnameGenerator", a.Hostname, a.Origin)
		}
		got[a.Hostname] = a.HostnameGeneratorRef.CoreName
	}
	if got["redis.svc.mesh.local"] != "local-universal-mesh-service" || got["redis.app.mesh"] != "by-app" {
		t.Errorf("addresses %v", got)
	}
	if gens := list.Items[0].Status.HostnameGenerators; len(gens) != 2 || gens[0].Conditions[0].Type != "Generated" || gens[0].Conditions[0].Status != "True" {
		t.Errorf("hostnameGenerators %+v", gens)
	}
	if list.Items[0].KRI != "kri_msvc_default_default__redis_" {
		t.Errorf("kri = %q", list.Items[0].KRI)
	}

	// The external service, the multi-zone service and the cross-mesh
	// lists decode too.
	for _, path := range []string{"/meshes/default/meshexternalservices", "/meshes/default/meshmultizoneservices", "/meshservices", "/dataplanes", "/hostnamegenerators", "/zones", "/zones/_overview", "/zoneingresses"} {
		code, body := k.do(http.MethodGet, path, nil)
		var l kumaList
		if code != http.StatusOK || json.Unmarshal(body, &l) != nil || l.Total == 0 {
			t.Errorf("GET %s = %d %s", path, code, body)
		}
	}
	code, body = k.do(http.MethodGet, "/meshes/default/meshexternalservices/httpbin", nil)
	var mes struct {
		Spec struct {
			Match     struct{ Type string }
			Endpoints []struct{ Address string }
		}
	}
	if code != http.StatusOK || json.Unmarshal(body, &mes) != nil || mes.Spec.Match.Type != "HostnameGenerator" || len(mes.Spec.Endpoints) != 1 {
		t.Errorf("GET meshexternalservices/httpbin = %d %s", code, body)
	}

	// `kumactl get zone-ingresses`: Kuma's flat ZoneIngress, its zone
	// this control plane's.
	code, body = k.do(http.MethodGet, "/zoneingresses/ingress-1", nil)
	var zi struct {
		Zone       string
		Networking struct {
			Address, AdvertisedAddress string
			Port, AdvertisedPort       int
		}
	}
	if code != http.StatusOK || json.Unmarshal(body, &zi) != nil || zi.Zone != "default" || zi.Networking.AdvertisedAddress != "10.0.0.1" || zi.Networking.AdvertisedPort != 10000 {
		t.Errorf("GET zoneingresses/ingress-1 = %d %s", code, body)
	}

	// `kumactl get meshservice redis -o yaml | kumactl apply -f -` stores
	// nothing new.
	code, body = k.do(http.MethodGet, "/meshes/default/meshservices/redis", nil)
	var doc map[string]any
	if code != http.StatusOK || json.Unmarshal(body, &doc) != nil {
		t.Fatalf("GET redis = %d %s", code, body)
	}
	before := nativeVersion(t, p.api+"/meshes/default/meshservices/redis")
	if code, body := k.do(http.MethodPut, "/meshes/default/meshservices/redis", doc); code != http.StatusOK {
		t.Fatalf("PUT back = %d %s", code, body)
	}
	if after := nativeVersion(t, p.api+"/meshes/default/meshservices/redis"); after != before {
		t.Errorf("applying what was read changed redis: ETag %s -> %s", before, after)
	}

	// An invalid apply: kumactl prints invalid_parameters.
	code, body = k.do(http.MethodPut, "/meshes/default/meshservices/bad", map[string]any{"type": "MeshService", "name": "bad", "mesh": "default",
		"spec": map[string]any{"ports": []any{map[string]any{"port": 0, "appProtocol": "udp"}}}})
	var e struct {
		Title             string
		InvalidParameters []struct{ Field, Reason string } `json:"invalid_parameters"`
	}
	if code != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || len(e.InvalidParameters) != 2 ||
		e.InvalidParameters[0].Field != "spec.ports[0].port" || !strings.Contains(e.InvalidParameters[1].Reason, "udp") {
		t.Errorf("invalid apply = %d %s", code, body)
	}

	// `kumactl delete`.
	for _, path := range []string{"/meshes/default/meshservices/redis", "/meshes/default/dataplanes/redis-1"} {
		if code, body := k.do(http.MethodDelete, path, nil); code != http.StatusOK {
			t.Errorf("DELETE %s = %d %s", path, code, body)
		}
	}
	if code, _ := k.do(http.MethodGet, "/meshes/default/meshservices/redis", nil); code != http.StatusNotFound {
		t.Errorf("GET after delete = %d", code)
	}
}

func nativeVersion(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.Header.Get("ETag")
}
