package zonesync

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/meshnames/meshnames/api/zonesync/v1"
	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/decode"
	"github.com/meshnames/meshnames/internal/resource"
)

func fuzzSeeds(f *testing.F) {
	ms := meshService("default", "redis", 6379)
	ms.Labels = map[string]string{resource.LabelZone: "east", "team": "db"}
	r, _ := encodeResource(ms)
	for _, c := range []*pb.Changes{
		{Revision: 7, Put: []*pb.Resource{r}},
		{Revision: 8, Delete: []*pb.Key{{Kind: "MeshService", Mesh: "default", Name: "redis"}}},
		{Revision: 9, Snapshot: true, Last: true},
		{Revision: 1, Put: []*pb.Resource{{Kind: "Dataplane", Mesh: "default", Name: "dp-1", Spec: []byte(`{"networking":{"address":"10.0.0.1","inbound":[{"port":80,"tags":{"kuma.io/service":"web"}}]}}`)}}},
		{Revision: 2, Put: []*pb.Resource{{Kind: "HostnameGenerator", Name: "g", Spec: []byte(`{"selector":{"meshService":{}},"template":"{{ .DisplayName }}.x"}`)}}},
	} {
		b, _ := proto.Marshal(c)
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0xff})
}

// FuzzDecodeChanges feeds arbitrary bytes to everything a receiver does
// with a batch before it writes: decoding, the resource decoder, the
// global's and the zone's acceptance rules, and key decoding. None may
// panic, and what they accept must be valid.
func FuzzDecodeChanges(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeChanges(b)
		if err != nil {
			return
		}
		zoneAdmit := admission.New(admission.Options{Mode: resource.ModeZone, Zone: "west"})
		for _, r := range c.Put {
			// A zone's receiver: decoded without validation, accepted,
			// then admitted, which must refuse anything invalid.
			// The object takes the message's labels, which admission may
			// change: the global's path below decodes the message as sent.
			if raw, err := decodeResource(proto.Clone(r).(*pb.Resource), false); err == nil {
				if z, err := acceptFromGlobal(raw, "west"); err == nil {
					if errs := zoneAdmit.Admit(z, admission.Writer{Source: admission.FromGlobal, Subject: "global"}); len(errs) == 0 {
						if errs := resource.Validate(z); len(errs) > 0 {
							t.Fatalf("a zone admitted an invalid resource: %v", errs)
						}
					}
				}
			}
			obj, err := DecodeResource(r)
			if err != nil {
				continue
			}
			check := *obj
			check.Name = localName(obj.Name, obj.Labels[resource.LabelNamespace])
			if errs := resource.Validate(&check); len(errs) > 0 {
				t.Fatalf("DecodeResource accepted an invalid resource: %v", errs)
			}
			if g, err := acceptFromZone(obj.Clone(), "east"); err == nil {
				if g.Labels[resource.LabelZone] != "east" || g.Labels[resource.LabelOrigin] != resource.OriginZone {
					t.Fatalf("acceptFromZone kept labels %v", g.Labels)
				}
				if errs := resource.Validate(g); len(errs) > 0 {
					t.Fatalf("acceptFromZone made an invalid resource: %v", errs)
				}
			}
			if z, err := acceptFromGlobal(obj.Clone(), "west"); err == nil {
				if z.Status != nil {
					t.Fatal("acceptFromGlobal kept the status")
				}
				if errs := resource.Validate(z); len(errs) > 0 {
					t.Fatalf("acceptFromGlobal accepted an invalid resource: %v", errs)
				}
			}
		}
		for _, k := range c.Delete {
			_, _ = decodeKey(k)
		}
	})
}

// FuzzDecodeResource feeds arbitrary fields to the resource decoder.
func FuzzDecodeResource(f *testing.F) {
	f.Add("MeshService", "default", "redis", []byte(`{"selector":{"dataplaneTags":{"app":"redis"}},"ports":[{"port":6379}]}`), []byte(`{"vips":[{"ip":"241.0.0.1"}]}`))
	f.Add("Mesh", "", "default", []byte(`{}`), []byte(nil))
	f.Add("MeshExternalService", "default", "httpbin", []byte(`{"match":{"type":"HostnameGenerator","port":80}}`), []byte(`null`))
	f.Add("Zone", "", "east", []byte(`{"enabled":false}`), []byte(`{}`))
	f.Add("ZoneIngress", "", "ingress-1", []byte(`{"networking":{"address":"192.168.0.1","port":10001}}`), []byte(nil))
	f.Fuzz(func(t *testing.T, kind, mesh, name string, spec, status []byte) {
		obj, err := DecodeResource(&pb.Resource{Kind: kind, Mesh: mesh, Name: name, Spec: spec, Status: status})
		if err != nil {
			return
		}
		if errs := resource.Validate(obj); len(errs) > 0 {
			t.Fatalf("accepted an invalid resource: %v", errs)
		}
		if _, err := encodeResource(obj); err != nil {
			t.Fatalf("cannot encode what was decoded: %v", err)
		}
	})
}

// FuzzCanonicalSpec: a spec the fast path (canonicalSpec) accepts decodes
// strictly to the same value.
func FuzzCanonicalSpec(f *testing.F) {
	for _, d := range resource.Descriptors() {
		f.Add(string(d.Kind), []byte(`{}`))
	}
	f.Add("MeshService", []byte(`{"selector":{"dataplaneTags":{"app":"redis"}},"ports":[{"port":6379,"targetPort":"redis","appProtocol":"tcp"}],"export":{"mode":"All"}}`))
	f.Add("MeshService", []byte(`{"selector":{"dataplaneTags":null},"ports":[{"port":80,"targetPort":8080}]}`))
	f.Add("MeshService", []byte(`{"selector":{"dataplaneTags":{"app":"redis"}},"ports":[{"name":"tcp","port":6379,"targetPort":6379}],"export":{"mode":"None"}}`))
	f.Add("MeshService", []byte(`{"export":{},"state":"Available","identities":[{"type":"ServiceTag","value":"redis"}]}`))
	f.Add("MeshExternalService", []byte(`{"match":{"type":"HostnameGenerator","port":80,"protocol":"tcp"},"endpoints":[{"address":"1.1.1.1","port":443}]}`))
	f.Add("ZoneIngress", []byte(`{"networking":{"address":"192.168.0.1","advertisedAddress":"10.0.0.1","port":10001,"advertisedPort":10000}}`))
	f.Add("ZoneIngress", []byte(`{"networking":{"port":10001,"address":"fd00::1"}}`))
	f.Fuzz(func(t *testing.T, kind string, spec []byte) {
		d, ok := resource.Lookup(resource.Kind(kind))
		if !ok {
			return
		}
		// Both fast paths of DecodeResource: the plain reader, then
		// encoding/json checked by re-encoding.
		plain, plainOK := resource.PlainSpec(d.Kind, spec)
		fast := d.NewSpec()
		canonicalOK := canonicalSpec(spec, fast)
		for _, c := range []struct {
			name string
			ok   bool
			got  resource.Spec
		}{{"plain", plainOK, plain}, {"canonical", canonicalOK, fast}} {
			if !c.ok {
				continue
			}
			strict := d.NewSpec()
			if errs := decode.JSON(spec, strict, "spec"); len(errs) > 0 {
				t.Fatalf("%s: the %s path accepted %s, which the strict decoder refuses: %v", kind, c.name, spec, errs)
			}
			if !reflect.DeepEqual(c.got, strict) {
				t.Fatalf("%s: %s decodes to %#v on the %s path, %#v strictly", kind, spec, c.got, c.name, strict)
			}
		}
	})
}

// FuzzReadTokenClaims feeds arbitrary text to the zone's reading of its
// own token.
func FuzzReadTokenClaims(f *testing.F) {
	f.Add("eyJhbGciOiJFZERTQSJ9.eyJyb2xlIjoiem9uZSIsInpvbmUiOiJlYXN0In0.sig")
	f.Add("a.b.c")
	f.Add("garbage")
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := readTokenClaims(raw)
		if err == nil && (c.Zone == "" || c.Role != "zone") {
			t.Fatalf("accepted claims %+v", c)
		}
	})
}
