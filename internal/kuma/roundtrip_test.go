package kuma

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"

	"github.com/meshnames/meshnames/internal/resource"
)

// gen builds random native objects of every kind, from small vocabularies
// so that the interesting shapes (every selector, TLS field, destination
// type and data source) come up often.
type gen struct{ r *rand.Rand }

func (g gen) pick(n int) int { return g.r.IntN(n) }
func (g gen) coin() bool     { return g.r.IntN(2) == 0 }

func pickOf[T any](g gen, xs ...T) T { return xs[g.pick(len(xs))] }

func (g gen) labels() map[string]string {
	m := map[string]string{}
	for _, kv := range [][2]string{{"team", "storage"}, {"app", "redis"}, {resource.LabelZone, "east"}, {resource.LabelNamespace, "redis-system"}, {"tier", ""}} {
		if g.pick(3) == 0 {
			m[kv[0]] = kv[1]
		}
	}
	if len(m) == 0 && g.coin() {
		return nil
	}
	return m
}

func (g gen) selector() *resource.LabelSelector {
	if g.pick(4) == 0 {
		return &resource.LabelSelector{}
	}
	return &resource.LabelSelector{MatchLabels: map[string]string{pickOf(g, "app", "kuma.io/origin", "team"): pickOf(g, "redis", "zone", "a")}}
}

func (g gen) ports(targets bool) []resource.Port {
	var ps []resource.Port
	for i := range g.pick(4) {
		p := resource.Port{Port: 6379 + i, AppProtocol: pickOf(g, "", "TCP", "http", "grpc")}
		if g.coin() {
			p.Name = fmt.Sprintf("p%d", i)
		}
		if targets {
			switch g.pick(3) {
			case 0:
				p.TargetPort = &resource.IntOrString{Int: 16379 + i}
			case 1:
				p.TargetPort = &resource.IntOrString{String: "main", IsName: true}
			}
		}
		ps = append(ps, p)
	}
	return ps
}

func (g gen) source() *resource.DataSource {
	s := pickOf(g, "ca", "cert-1")
	switch g.pick(4) {
	case 0:
		return nil
	case 1:
		return &resource.DataSource{Secret: &s}
	case 2:
		return &resource.DataSource{InlineString: &s}
	}
	b := "Y2VydA=="
	return &resource.DataSource{Inline: &b}
}

func (g gen) tls() *resource.ExternalTLS {
	t := &resource.ExternalTLS{Enabled: g.coin(), AllowRenegotiation: g.coin(), CACert: g.source()}
	if g.coin() {
		t.ClientCert, t.ClientKey = g.source(), g.source()
	}
	if g.coin() {
		t.Version = &resource.TLSVersion{Min: pickOf(g, "", resource.TLSAuto, resource.TLS10, resource.TLS12), Max: pickOf(g, "", resource.TLSAuto, resource.TLS13)}
	}
	if g.coin() {
		t.Verification = &resource.TLSVerification{Skip: g.coin(), ServerName: pickOf(g, "", "httpbin.org")}
		for range g.pick(3) {
			t.Verification.SubjectAltNames = append(t.Verification.SubjectAltNames, pickOf(g, "httpbin.org", "spiffe://x/y"))
		}
	}
	return t
}

func (g gen) externalService() *resource.MeshExternalServiceSpec {
	s := &resource.MeshExternalServiceSpec{}
	switch g.pick(5) {
	case 0: // the design record's matches
		s.Match = []resource.ExternalMatch{
			{Type: resource.MatchDomain, Value: "httpbin.org", Port: 443, Protocol: "tls"},
			{Type: pickOf(g, resource.MatchIP, resource.MatchCIDR), Value: pickOf(g, "10.0.0.0/8", "10.1.1.1"), Port: 443, Protocol: "tls"},
		}
	case 1: // two of Kuma's on different ports
		s.Match = []resource.ExternalMatch{{Type: resource.MatchHostnameGenerator, Port: 80}, {Type: resource.MatchHostnameGenerator, Port: 443}}
	default:
		s.Match = []resource.ExternalMatch{{Type: resource.MatchHostnameGenerator, Port: pickOf(g, 80, 443), Protocol: pickOf(g, "", "http", "HTTP2", "tls")}}
	}
	d := &resource.ExternalDestination{}
	switch g.pick(4) {
	case 0:
		d.Type = pickOf(g, "", resource.DestinationPassthrough)
	case 1:
		d.Type = resource.DestinationExtension
		d.Extension = &resource.Extension{Type: "Lambda"}
		if g.coin() {
			d.Extension.Config = json.RawMessage(`{"arn":"a","n":[1,2]}`)
		}
	default:
		d.Type = resource.DestinationRegular
		for i := range 1 + g.pick(3) {
			e := resource.ExternalEndpoint{Address: pickOf(g, "httpbin.org", "1.1.1.1", "fd00::1"), Port: 443 + i}
			if g.pick(6) == 0 {
				e = resource.ExternalEndpoint{Address: "unix:///run/app.sock"}
			}
			d.Endpoints = append(d.Endpoints, e)
		}
		if g.coin() {
			d.TLS = g.tls()
		}
	}
	if g.pick(5) > 0 {
		s.Destination = d
	}
	return s
}

func (g gen) object() *resource.Object {
	kinds := resource.Descriptors()
	d := kinds[g.pick(len(kinds))]
	o := &resource.Object{Kind: d.Kind, Name: pickOf(g, "redis", "web-1"), Labels: g.labels(), Spec: d.NewSpec()}
	if d.MeshScoped {
		o.Mesh = pickOf(g, "default", "payments")
	}
	switch s := o.Spec.(type) {
	case *resource.ZoneSpec:
		if g.coin() {
			s.Enabled = new(g.coin())
		}
	case *resource.DataplaneSpec:
		s.Networking.Address = pickOf(g, "10.0.0.1", "dp-1.example.com", "fd00::2")
		for i := range g.pick(3) {
			in := resource.Inbound{Port: 8080 + i, ServicePort: pickOf(g, 0, 80), ServiceAddress: pickOf(g, "", "127.0.0.1")}
			if g.coin() {
				in.Name = fmt.Sprintf("in%d", i)
			}
			if g.pick(3) == 0 {
				in.Tags = map[string]string{resource.TagService: "web_default_svc_80"}
			}
			s.Networking.Inbound = append(s.Networking.Inbound, in)
		}
	case *resource.MeshServiceSpec:
		switch g.pick(5) {
		case 0:
			s.Selector.DataplaneRef = &resource.DataplaneRef{Name: "redis-0.redis-system"}
		case 1:
			s.Selector.DataplaneLabels = g.selector()
		case 2:
			s.Selector.DataplaneTags = map[string]string{resource.TagService: "redis"}
		}
		s.Ports = g.ports(true)
		if g.coin() {
			s.Identities = []resource.Identity{pickOf(g, resource.Identity{Type: resource.IdentitySpiffeID, Value: "spiffe://a/b"}, resource.Identity{Type: resource.IdentityServiceTag, Value: "redis"})}
		}
		s.State = pickOf(g, "", resource.StateAvailable, resource.StateUnavailable)
		if g.pick(4) == 0 {
			s.Export = &resource.Export{Mode: pickOf(g, resource.ExportAll, resource.ExportNone)}
		}
	case *resource.MeshExternalServiceSpec:
		*s = *g.externalService()
	case *resource.MeshMultiZoneServiceSpec:
		s.Selector.MeshService = &resource.LabelSelector{MatchLabels: map[string]string{"app": "redis"}}
		s.Ports = g.ports(false)
	case *resource.HostnameGeneratorSpec:
		switch g.pick(3) {
		case 0:
			s.Selector.MeshService = g.selector()
		case 1:
			s.Selector.MeshExternalService = g.selector()
		default:
			s.Selector.MeshMultiZoneService = g.selector()
		}
		s.Template = pickOf(g, "{{ .DisplayName }}.svc.mesh.local", `{{ label "app" }}.{{ .Zone }}.mesh`)
	case *resource.ZoneIngressSpec:
		s.Networking = resource.ZoneIngressNetworking{Address: pickOf(g, "192.168.0.1", "ingress.east.internal", "fd00::3"), Port: pickOf(g, 10001, 443)}
		if g.coin() {
			s.Networking.AdvertisedAddress, s.Networking.AdvertisedPort = pickOf(g, "10.0.0.1", "lb.example.com"), pickOf(g, 10001, 30001)
		}
	}
	return o
}

// checkRoundTrip is the property: a valid native object whose Kuma view
// leaves nothing out comes back from native -> Kuma -> native exactly as it
// is stored; one whose view leaves something out does not (the omissions
// are real). It reports whether o was representable.
func checkRoundTrip(t testing.TB, o *resource.Object) bool {
	t.Helper()
	omitted := Omitted(o)
	back, err := roundTrip(t, o)
	if len(omitted) == 0 {
		if err != nil {
			t.Fatalf("a representable %s did not come back: %v\nnative: %s", o.Kind, err, stored(t, o))
		}
		if d := cmp.Diff(stored(t, o), stored(t, back)); d != "" {
			t.Fatalf("native -> Kuma -> native changed what is stored (-before +after):\n%s", d)
		}
		if errs := resource.Validate(back); len(errs) > 0 {
			t.Fatalf("round trip of a valid %s is invalid: %v", o.Kind, errs)
		}
		return true
	}
	if err == nil && stored(t, o) == stored(t, back) {
		t.Fatalf("Kuma view lists omissions %v but loses nothing: %s", omitted, stored(t, o))
	}
	return false
}

// TestRoundTrip_Property runs the round-trip property over random native
// objects of every kind.
func TestRoundTrip_Property(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(20, 11))}
	n := 3000
	if testing.Short() {
		n = 500
	}
	representable := map[resource.Kind]int{}
	omitting := map[resource.Kind]int{}
	for range n {
		o := g.object()
		o.Spec.Default()
		if errs := resource.Validate(o); len(errs) > 0 {
			continue
		}
		if checkRoundTrip(t, o) {
			representable[o.Kind]++
		} else {
			omitting[o.Kind]++
		}
	}
	// The generator must reach every kind whole, and the kinds that have
	// native-only fields with some.
	for _, d := range resource.Descriptors() {
		if representable[d.Kind] < 10 {
			t.Errorf("only %d representable %s generated", representable[d.Kind], d.Kind)
		}
	}
	for _, k := range []resource.Kind{resource.Dataplane, resource.MeshService, resource.MeshExternalService} {
		if omitting[k] < 10 {
			t.Errorf("only %d %s with omissions generated", omitting[k], k)
		}
	}
	t.Logf("representable %v, with omissions %v", representable, omitting)
}

// FuzzRoundTrip checks the property on native documents the fuzzer makes
// from the golden inputs.
func FuzzRoundTrip(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "tokuma", "*.txtar"))
	for _, file := range files {
		ar, err := txtar.ParseFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(ar.Files[0].Data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := resource.Decode(data)
		if err != nil {
			return
		}
		o.Spec.Default()
		if errs := resource.Validate(o); len(errs) > 0 {
			return
		}
		checkRoundTrip(t, o)
	})
}

// FuzzFromKuma feeds arbitrary documents to FromKuma for every kind: it
// must not panic, every problem names a field, and a document it accepts
// and the native rules accept translates back to itself (FromKuma of its
// Kuma view stores the same).
func FuzzFromKuma(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "fromkuma", "*.txtar"))
	for _, file := range files {
		ar, err := txtar.ParseFile(file)
		if err != nil {
			f.Fatal(err)
		}
		for k := range resource.Descriptors() {
			f.Add(uint8(k), ar.Files[0].Data)
		}
	}
	kinds := resource.Descriptors()
	f.Fuzz(func(t *testing.T, k uint8, data []byte) {
		kind := kinds[int(k)%len(kinds)].Kind
		o, errs := FromKuma(kind, data)
		for _, e := range errs {
			if e.Field == "" || e.Message == "" {
				t.Fatalf("violation without a field or message: %+v", e)
			}
		}
		if len(errs) > 0 {
			return
		}
		if o.Kind != kind {
			return // a missing type: the native write path refuses it
		}
		o.Spec.Default()
		if errs := resource.Validate(o); len(errs) > 0 {
			return
		}
		checkRoundTrip(t, o)
	})
}
