package xds

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/meshnames/meshnames/internal/resource"
)

// externalSpec decodes a MeshExternalService spec as the API takes it,
// with defaults; it must be valid.
func externalSpec(t *testing.T, spec any) *resource.MeshExternalServiceSpec {
	t.Helper()
	doc, err := json.Marshal(map[string]any{"type": "MeshExternalService", "mesh": "default", "name": "x", "spec": spec})
	if err != nil {
		t.Fatal(err)
	}
	o, err := resource.Decode(doc)
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	o.Spec.Default()
	if errs := resource.Validate(o); len(errs) > 0 {
		t.Fatalf("spec: %v", errs)
	}
	return o.Spec.(*resource.MeshExternalServiceSpec)
}

// TestRenderShared_Golden renders the listeners the external services of
// testdata/extlisteners/*.txtar share, per port: services.yaml lists
// them from the oldest to the newest.
func TestRenderShared_Golden(t *testing.T) {
	goldenRender(t, "testdata/extlisteners", "services.yaml", func(t *testing.T, input []byte) []Resource {
		var svcs []struct {
			Name string         `yaml:"name"`
			Spec map[string]any `yaml:"spec"`
		}
		decodeStrict(t, "services.yaml", input, &svcs)
		x := newExtIndex()
		created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for i, s := range svcs {
			x.set(&resource.Object{Kind: resource.MeshExternalService, Mesh: "default", Name: s.Name, CreationTime: created.Add(time.Duration(i) * time.Second)},
				externalSpec(t, s.Spec))
		}
		var out []Resource
		for _, port := range sortedPorts(x) {
			var cs []claim
			for _, c := range x.claims[port] {
				cs = append(cs, c...)
			}
			out = append(out, renderShared(port, cs)...)
		}
		return out
	})
}

func sortedPorts(x *extIndex) []int {
	var ports []int
	for port := range x.claims {
		ports = append(ports, port)
	}
	slices.Sort(ports)
	return ports
}

// TestExternalService_Served follows MeshExternalServices through the
// builder to what proxies get: clusters, listeners on their InternalVIP
// VIPs, the listener they share per port, secrets by SDS (with the key
// redacted in inspection), notes on what is not served, proxies whose
// reachableBackends leave them out, and deletion.
func TestExternalService_Served(t *testing.T) {
	e := newEnv(t, nil)
	p := newPKI(t)
	certPEM, keyPEM := p.leaf(x509.ExtKeyUsageClientAuth)
	e.dataplane("caller", "caller", 9999)
	e.create(&resource.Object{Kind: resource.Dataplane, Mesh: "default", Name: "limited", Spec: &resource.DataplaneSpec{Networking: resource.DataplaneNetworking{
		Address:             "127.0.0.1",
		TransparentProxying: &resource.TransparentProxying{ReachableBackends: &resource.ReachableBackends{Refs: []resource.BackendRef{{Kind: resource.MeshService, Name: "web"}}}},
	}}})
	e.create(&resource.Object{Kind: resource.MeshExternalService, Mesh: "default", Name: "httpbin", Spec: &resource.MeshExternalServiceSpec{
		Match: []resource.ExternalMatch{{Type: resource.MatchDomain, Value: "httpbin.org", Port: 443, Protocol: resource.ProtocolTLS}},
	}})
	str := func(b []byte) *string { s := string(b); return &s }
	api := e.create(&resource.Object{Kind: resource.MeshExternalService, Mesh: "default", Name: "api", Spec: &resource.MeshExternalServiceSpec{
		Match: []resource.ExternalMatch{{Type: resource.MatchInternalVIP, Value: "api.ext.local", Port: 80, Protocol: resource.ProtocolHTTP}},
		Destination: &resource.ExternalDestination{
			Type:      resource.DestinationRegular,
			Endpoints: []resource.ExternalEndpoint{{Address: "api.example.com", Port: 443}},
			TLS: &resource.ExternalTLS{Enabled: true, CACert: &resource.DataSource{InlineString: str(p.caPEM)},
				ClientCert: &resource.DataSource{InlineString: str(certPEM)}, ClientKey: &resource.DataSource{InlineString: str(keyPEM)}},
		},
	}})
	api.Status = &resource.ServiceStatus{
		Addresses: []resource.Address{{Hostname: "api.ext.local", Status: resource.AddressAvailable, Origin: resource.AddressOrigin{Kind: resource.OriginInternalVIP, Name: "api"}}},
		VIPs:      []resource.VIP{{IP: "242.0.0.1", Type: resource.VIPKuma, Hostname: "api.ext.local"}},
	}
	e.updateStatus(api)
	e.create(&resource.Object{Kind: resource.MeshExternalService, Mesh: "default", Name: "fn", Spec: &resource.MeshExternalServiceSpec{
		Match:       []resource.ExternalMatch{{Type: resource.MatchInternalVIP, Value: "fn.ext.local", Port: 80, Protocol: resource.ProtocolHTTP}},
		Destination: &resource.ExternalDestination{Type: resource.DestinationExtension, Extension: &resource.Extension{Type: "Lambda"}},
	}})

	want := map[string][]string{
		ClusterURL:  {"api_80", "extsvc:passthrough:443", "httpbin_443"},
		ListenerURL: {"outbound:api_80", "outbound:extsvc:443"},
		SecretURL:   {"api_80:ca", "api_80:client"},
	}
	waitNames(t, e, "default.caller", want)
	waitNames(t, e, "default.limited", map[string][]string{ClusterURL: nil, ListenerURL: nil, SecretURL: nil})

	in, err := e.srv.Inspect(Proxy{Mesh: "default", Name: "caller"})
	if err != nil {
		t.Fatal(err)
	}
	key := strings.Join(strings.Split(strings.TrimSpace(string(keyPEM)), "\n")[1:2], "")
	config := string(in.Config)
	if strings.Contains(config, key) || strings.Contains(config, base64.StdEncoding.EncodeToString(keyPEM)) {
		t.Errorf("the inspection shows the client key")
	}
	if !strings.Contains(config, `"privateKey":{"inlineString":"[redacted]"}`) || !strings.Contains(config, base64.StdEncoding.EncodeToString(certPEM)) {
		t.Errorf("the inspection does not show the client secret with its key redacted:\n%s", config)
	}
	wantNote := `MeshExternalService fn is not served: its destination is the extension "Lambda", and meshnames runs no extensions`
	if !slices.Contains(in.Notes, wantNote) {
		t.Errorf("notes %q do not say that fn is not served", in.Notes)
	}

	e.delete(resource.Key{Kind: resource.MeshExternalService, Mesh: "default", Name: "httpbin"})
	want[ClusterURL], want[ListenerURL] = []string{"api_80"}, []string{"outbound:api_80"}
	waitNames(t, e, "default.caller", want)
	e.delete(api.Key())
	waitNames(t, e, "default.caller", map[string][]string{ClusterURL: nil, ListenerURL: nil, SecretURL: nil})
}

// waitNames waits until a state-of-the-world client of node gets exactly
// the named resources of each type URL of want.
func waitNames(t *testing.T, e *env, node string, want map[string][]string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := map[string][]string{}
		for url := range want {
			got[url] = nil
			var names []string
			if url == SecretURL {
				names = want[url] // Envoy asks for secrets by name
				if len(names) == 0 {
					names = []string{"api_80:ca"}
				}
			}
			for _, m := range fetch(t, e, node, url, names...) {
				got[url] = append(got[url], nameOf(m))
			}
			slices.Sort(got[url])
		}
		d := cmp.Diff(want, got, cmpopts.EquateEmpty())
		if d == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s gets other resources (-want +got):\n%s", node, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
