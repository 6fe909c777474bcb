package zonesync

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/meshnames/meshnames/api/zonesync/v1"
	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store/storetest"
)

// The property of the MeshService multizone design record that nothing a
// control plane acknowledged is lost on the way: a resource a zone admits
// is admitted by the global as the zone sends it, and, when it flows on
// (an exported MeshService), by every other zone as the global sends it;
// a resource the global admits is admitted by every zone. The documents
// are random and lean to the limits (the longest names, the most labels),
// where the control plane's derived names and labels could overflow. The
// path is the real one, in process: the sending side's preparation and
// wire encoding, the store's encoding of what is kept between, the
// receiving side's decoding, acceptance (renaming, labelling) and
// admission.

// agreement is a global with two zones, east sending and west receiving;
// east is sometimes a Kubernetes zone (eastKube), which names a
// namespaced resource "<object>.<namespace>" and gives it the display
// name of its object.
type agreement struct {
	east, eastKube, west *admission.Admitter
	global               *admission.Admitter
	eastSide             *zoneSide   // east's end of its stream
	fromEast             *globalSide // the global's end of east's stream
	westSide             *zoneSide   // west's end of its stream
	toWest               *globalSide // the global's end of west's stream
	user                 admission.Writer
}

func newAgreement() *agreement {
	return &agreement{
		east:     admission.New(admission.Options{Mode: resource.ModeZone, Zone: "east"}),
		eastKube: admission.New(admission.Options{Mode: resource.ModeZone, Zone: "east", DisplayName: objectName}),
		west:     admission.New(admission.Options{Mode: resource.ModeZone, Zone: "west"}),
		global:   admission.New(admission.Options{Mode: resource.ModeGlobal}),
		eastSide: &zoneSide{zone: "east", out: zoneOut{env: resource.EnvUniversal, exportDefault: resource.ExportAll}},
		fromEast: &globalSide{zone: "east", out: globalOut{exportDefault: resource.ExportAll}},
		westSide: &zoneSide{zone: "west", out: zoneOut{env: resource.EnvUniversal, exportDefault: resource.ExportAll}},
		toWest:   &globalSide{zone: "west", out: globalOut{exportDefault: resource.ExportAll}},
		user:     admission.Writer{Source: admission.User, Subject: "test"},
	}
}

// check writes obj where it may be written and follows it wherever it
// flows. It returns "" when obj was not admitted where it was written (the
// property says nothing then), and otherwise what refused a copy, or
// "ok".
func (a *agreement) check(obj *resource.Object) (string, error) {
	if admission.Owner(obj.Kind, resource.ModeZone) == "" {
		return a.fromZone(obj)
	}
	return a.fromGlobal(obj)
}

// objectName is the Kubernetes store's display name of k (its
// DisplayName): the object's name, without the namespace.
func objectName(k resource.Key) string {
	if i := strings.LastIndexByte(k.Name, '.'); i > 0 {
		return k.Name[:i]
	}
	return k.Name
}

func (a *agreement) fromZone(obj *resource.Object) (string, error) {
	east := a.east
	if ns := obj.Labels[resource.LabelNamespace]; ns != "" && strings.HasSuffix(obj.Name, "."+ns) &&
		(obj.Kind == resource.MeshService || obj.Kind == resource.Dataplane) {
		east = a.eastKube
	}
	if errs := east.Admit(obj, a.user); len(errs) > 0 {
		return "", nil
	}
	item, err := a.eastSide.prepare(storeRoundTrip(obj))
	if err != nil || item == nil {
		return "ok", err // the kind does not flow to the global
	}
	got, err := receive(a.fromEast, a.global, item, "the global")
	if err != nil {
		return "", err
	}
	return a.toZone(storeRoundTrip(got))
}

func (a *agreement) fromGlobal(obj *resource.Object) (string, error) {
	if errs := a.global.Admit(obj, a.user); len(errs) > 0 {
		return "", nil
	}
	return a.toZone(storeRoundTrip(obj))
}

// toZone follows obj, a resource of the global, to west.
func (a *agreement) toZone(obj *resource.Object) (string, error) {
	item, err := a.toWest.prepare(obj)
	if err != nil || item == nil || item.wire == nil {
		return "ok", err // it does not flow to zones, or as a deletion
	}
	if send, asDelete := a.toWest.pass(item); !send || asDelete {
		return "ok", nil
	}
	if _, err := receive(a.westSide, a.west, item, "west"); err != nil {
		return "", err
	}
	return "ok", nil
}

// receiver is the receiving end of a stream.
type receiver interface {
	decode(*pb.Resource) (*resource.Object, error)
	accept(*resource.Object) (*resource.Object, error)
	writer() admission.Writer
}

// receive is what rec, admitting with adm, makes of item; an error says
// that who refused it, and why.
func receive(rec receiver, adm *admission.Admitter, item *outItem, who string) (*resource.Object, error) {
	r, err := onTheWire(item)
	if err != nil {
		return nil, err
	}
	got, err := rec.decode(r)
	if err == nil {
		got, err = rec.accept(got)
	}
	if err != nil {
		return nil, fmt.Errorf("%s refused what was sent: %w", who, err)
	}
	if errs := adm.Admit(got, rec.writer()); len(errs) > 0 {
		return nil, fmt.Errorf("%s did not admit %s as it was sent: %v", who, got.Key(), errs)
	}
	return got, nil
}

// onTheWire is what the peer decodes of item.
func onTheWire(item *outItem) (*pb.Resource, error) {
	r := &pb.Resource{}
	return r, proto.Unmarshal(item.wire, r)
}

// storeRoundTrip is obj as a store keeps it and a reader gets it back: its
// spec encoded and decoded, its labels copied.
func storeRoundTrip(obj *resource.Object) *resource.Object {
	c := obj.Clone()
	b, err := resource.MarshalSpec(obj.Spec)
	if err != nil {
		panic(err)
	}
	if c.Spec, err = resource.UnmarshalSpec(obj.Kind, b); err != nil {
		panic(err)
	}
	return c
}

func TestAgreement_WhatAZoneAdmitsEveryoneAdmits(t *testing.T) {
	a := newAgreement()
	kinds := []resource.Kind{resource.Mesh, resource.Dataplane, resource.MeshService, resource.MeshExternalService, resource.MeshMultiZoneService, resource.HostnameGenerator, resource.ZoneIngress}
	n := 600
	if testing.Short() {
		n = 100
	}
	for _, k := range kinds {
		admitted, flowed := 0, 0
		for i := range n {
			g := docGen{rand.New(rand.NewPCG(uint64(i), uint64(len(k))))}
			obj := g.object(k)
			doc := document(obj)
			res, err := a.check(obj)
			if err != nil {
				t.Fatalf("%s #%d: %v\ndocument: %s", k, i, err, doc)
			}
			if res != "" {
				admitted++
			}
			if res == "ok" {
				flowed++
			}
		}
		// The generator must mostly make valid documents, or the property
		// holds of nothing.
		if admitted < n/2 {
			t.Errorf("%s: only %d of %d random documents were admitted where they were written", k, admitted, n)
		}
		t.Logf("%s: %d of %d admitted and followed", k, flowed, n)
	}
}

// FuzzAgreement explores the property beyond the test's fixed seeds: the
// input seeds the document generator.
func FuzzAgreement(f *testing.F) {
	f.Add(uint64(1), uint8(0))
	f.Add(uint64(42), uint8(2))
	f.Add(uint64(7), uint8(5))
	a := newAgreement()
	kinds := []resource.Kind{resource.Mesh, resource.Dataplane, resource.MeshService, resource.MeshExternalService, resource.MeshMultiZoneService, resource.HostnameGenerator, resource.ZoneIngress}
	f.Fuzz(func(t *testing.T, seed uint64, kind uint8) {
		k := kinds[int(kind)%len(kinds)]
		obj := docGen{rand.New(rand.NewPCG(seed, uint64(kind)))}.object(k)
		doc := document(obj)
		if _, err := a.check(obj); err != nil {
			t.Fatalf("%v\ndocument: %s", err, doc)
		}
	})
}

func document(obj *resource.Object) string {
	b, err := obj.MarshalJSON()
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// docGen makes random documents that are mostly valid, leaning to the
// limits: names of the greatest length, the most labels, long values.
type docGen struct{ r *rand.Rand }

func (g docGen) chance(p float64) bool { return g.r.Float64() < p }

// length returns a length up to max, often max itself.
func (g docGen) length(max int) int {
	switch g.r.IntN(4) {
	case 0:
		return max
	case 1:
		return 1 + g.r.IntN(min(max, 8))
	}
	return 1 + g.r.IntN(max)
}

const (
	lowerAlnum = "abcdefghijklmnopqrstuvwxyz0123456789"
	letters    = "abcdefghijklmnopqrstuvwxyz"
)

// label returns a DNS-1123 label of n bytes (a DNS-1035 one when
// letterFirst).
func (g docGen) label(n int, letterFirst bool) string {
	b := make([]byte, n)
	for i := range b {
		switch {
		case i == 0 && letterFirst:
			b[i] = letters[g.r.IntN(len(letters))]
		case i > 0 && i < n-1 && g.chance(0.15):
			b[i] = '-'
		default:
			b[i] = lowerAlnum[g.r.IntN(len(lowerAlnum))]
		}
	}
	return string(b)
}

// subdomain returns a DNS-1123 subdomain of at most max bytes, often of
// several labels of the longest length (four labels of 61-62 bytes make
// 250).
func (g docGen) subdomain(max int) string {
	if g.chance(0.3) {
		return g.label(g.length(min(max, 63)), false)
	}
	var parts []string
	total := 0
	for total < max {
		n := min(g.length(63), max-total)
		if n < 1 {
			break
		}
		parts = append(parts, g.label(n, false))
		total += n + 1
		if g.chance(0.2) {
			break
		}
	}
	return strings.Join(parts, ".")
}

func (g docGen) serviceName() string { return g.label(g.length(63), true) }

func (g docGen) meshName() string {
	if g.chance(0.5) {
		return "default"
	}
	return g.subdomain(63)
}

// labelValue is a label value of up to 63 bytes, sometimes empty.
func (g docGen) labelValue() string {
	if g.chance(0.1) {
		return ""
	}
	return g.label(g.length(63), false)
}

// labels are a resource's own labels: up to MaxLabels, often that many,
// sometimes with the keys the control plane sets, written as it would.
func (g docGen) labels(obj *resource.Object) map[string]string {
	m := map[string]string{}
	n := g.r.IntN(4)
	if g.chance(0.3) {
		n = resource.MaxLabels
	}
	for i := 0; len(m) < n; i++ {
		key := g.label(g.length(63), false)
		if g.chance(0.5) {
			key = g.subdomain(40) + "/" + key
		}
		m[key] = g.labelValue()
	}
	if g.chance(0.3) {
		m[resource.LabelEnv] = resource.EnvUniversal
	}
	if g.chance(0.2) {
		m[resource.LabelDisplayName] = obj.Name // as Kuma writes it
	}
	if g.chance(0.1) {
		m[resource.LabelNamespace] = g.label(g.length(63), false)
	}
	return m
}

func (g docGen) object(k resource.Kind) *resource.Object {
	obj := &resource.Object{Kind: k}
	d := resource.MustLookup(k)
	switch {
	case d.ServiceKind:
		obj.Name = g.serviceName()
	case k == resource.Mesh:
		obj.Name = g.meshName()
	default:
		obj.Name = g.subdomain(253)
	}
	if d.MeshScoped {
		obj.Mesh = g.meshName()
	}
	obj.Labels = g.labels(obj)
	if (k == resource.MeshService || k == resource.Dataplane) && g.chance(0.3) {
		// A Kubernetes zone's namespaced resource: "<object>.<namespace>",
		// with the namespace label its store sets.
		ns := g.label(g.length(63), false)
		obj.Name += "." + ns
		obj.Labels[resource.LabelNamespace] = ns
	}
	switch k {
	case resource.Mesh:
		obj.Spec = &resource.MeshSpec{}
	case resource.Dataplane:
		obj.Spec = g.dataplane()
	case resource.MeshService:
		obj.Spec = g.meshService()
	case resource.MeshExternalService:
		obj.Spec = g.externalService()
	case resource.MeshMultiZoneService:
		obj.Spec = &resource.MeshMultiZoneServiceSpec{
			Selector: resource.MultiZoneSelector{MeshService: &resource.LabelSelector{MatchLabels: g.selector(1)}},
			Ports:    g.ports(false),
		}
	case resource.HostnameGenerator:
		obj.Spec = g.generator()
	case resource.ZoneIngress:
		obj.Spec = g.zoneIngress()
	}
	return obj
}

func (g docGen) selector(least int) map[string]string {
	m := map[string]string{}
	for len(m) < least+g.r.IntN(3) {
		m[g.label(g.length(63), false)] = g.labelValue()
	}
	return m
}

func (g docGen) portName() string { return g.label(g.length(15), true) }

func (g docGen) ports(target bool) []resource.Port {
	var out []resource.Port
	used := map[int]bool{}
	names := map[string]bool{}
	for range g.r.IntN(5) {
		p := resource.Port{Port: 1 + g.r.IntN(65535)}
		if used[p.Port] {
			continue
		}
		used[p.Port] = true
		if g.chance(0.6) {
			if name := g.portName(); !names[name] {
				names[name] = true
				p.Name = name
			}
		}
		if target && g.chance(0.5) {
			if g.chance(0.5) {
				p.TargetPort = &resource.IntOrString{Int: 1 + g.r.IntN(65535)}
			} else {
				p.TargetPort = &resource.IntOrString{String: g.portName(), IsName: true}
			}
		}
		p.AppProtocol = []string{"", "tcp", "HTTP", "http2", "gRPC"}[g.r.IntN(5)]
		out = append(out, p)
	}
	return out
}

func (g docGen) meshService() *resource.MeshServiceSpec {
	s := &resource.MeshServiceSpec{Ports: g.ports(true)}
	switch g.r.IntN(4) {
	case 0:
		s.Selector.DataplaneTags = map[string]string{resource.TagService: g.label(g.length(63), false)}
	case 1:
		s.Selector.DataplaneRef = &resource.DataplaneRef{Name: g.subdomain(253)}
	case 2:
		s.Selector.DataplaneLabels = &resource.LabelSelector{MatchLabels: g.selector(0)}
	}
	if g.chance(0.3) {
		s.Identities = []resource.Identity{{Type: resource.IdentityServiceTag, Value: g.label(g.length(63), false)},
			{Type: resource.IdentitySpiffeID, Value: "spiffe://" + g.subdomain(100) + "/" + g.label(10, false)}}
	}
	s.State = []string{"", resource.StateAvailable, resource.StateUnavailable}[g.r.IntN(3)]
	if g.chance(0.5) {
		s.Export = &resource.Export{Mode: []string{resource.ExportAll, resource.ExportNone}[g.r.IntN(2)]}
	}
	return s
}

func (g docGen) ip() string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], g.r.Uint32()|0x01000000)
	return fmt.Sprintf("%d.%d.%d.%d", b[0]%223+1, b[1], b[2], b[3]%254+1)
}

func (g docGen) externalService() *resource.MeshExternalServiceSpec {
	s := &resource.MeshExternalServiceSpec{}
	dest := &resource.ExternalDestination{Type: []string{resource.DestinationPassthrough, resource.DestinationRegular, resource.DestinationExtension}[g.r.IntN(3)]}
	if g.chance(0.2) && dest.Type == resource.DestinationPassthrough {
		dest = nil // the default
	}
	protocols := map[int]string{}
	for range 1 + g.r.IntN(4) {
		m := resource.ExternalMatch{Port: 1 + g.r.IntN(65535)}
		if p, ok := protocols[m.Port]; ok {
			m.Protocol = p // one protocol per port
		} else {
			m.Protocol = []string{"tcp", "tls", "http", "http2", "grpc"}[g.r.IntN(5)]
			protocols[m.Port] = m.Protocol
		}
		switch g.r.IntN(5) {
		case 0:
			m.Type, m.Value = resource.MatchInternalVIP, g.subdomain(253)
		case 1:
			m.Type, m.Value = resource.MatchDomain, g.subdomain(200)
		case 2:
			m.Type, m.Value = resource.MatchCIDR, fmt.Sprintf("10.%d.0.0/16", g.r.IntN(256))
		case 3:
			m.Type, m.Value = resource.MatchIP, g.ip()
		default:
			m.Type = resource.MatchHostnameGenerator
		}
		s.Match = append(s.Match, m)
	}
	if dest != nil {
		switch dest.Type {
		case resource.DestinationRegular:
			for range 1 + g.r.IntN(3) {
				e := resource.ExternalEndpoint{Address: g.ip(), Port: 1 + g.r.IntN(65535)}
				switch g.r.IntN(3) {
				case 0:
					e.Address = g.subdomain(253)
				case 1:
					e.Address, e.Port = "unix:///run/"+g.label(20, false)+".sock", 0
				}
				dest.Endpoints = append(dest.Endpoints, e)
			}
			if g.chance(0.5) {
				ca := base64.StdEncoding.EncodeToString([]byte(storetest.CACertPEM))
				secret := g.subdomain(253)
				dest.TLS = &resource.ExternalTLS{Enabled: true, Version: &resource.TLSVersion{Min: resource.TLS12, Max: resource.TLS13},
					Verification: &resource.TLSVerification{SubjectAltNames: []string{g.subdomain(100)}},
					CACert:       &resource.DataSource{Inline: &ca}, ClientCert: &resource.DataSource{Secret: &secret}, ClientKey: &resource.DataSource{Secret: &secret}}
			}
		case resource.DestinationExtension:
			dest.Extension = &resource.Extension{Type: g.label(g.length(30), true), Config: []byte(`{"region":"eu"}`)}
		}
	}
	s.Destination = dest
	return s
}

func (g docGen) generator() *resource.HostnameGeneratorSpec {
	templates := []string{
		"{{ .DisplayName }}.svc.mesh.local",
		"{{ .Name }}.{{ .Mesh }}.mesh",
		"{{ .DisplayName }}.svc.{{ .Zone }}.mesh.local",
		`{{ label "kuma.io/display-name" }}.x.mesh`,
	}
	s := &resource.HostnameGeneratorSpec{Template: templates[g.r.IntN(len(templates))]}
	sel := &resource.LabelSelector{MatchLabels: g.selector(0)}
	switch g.r.IntN(3) {
	case 0:
		s.Selector.MeshService = sel
	case 1:
		s.Selector.MeshExternalService = sel
	default:
		s.Selector.MeshMultiZoneService = sel
	}
	return s
}

func (g docGen) dataplane() *resource.DataplaneSpec {
	s := &resource.DataplaneSpec{Networking: resource.DataplaneNetworking{Address: g.ip()}}
	if g.chance(0.3) {
		s.Networking.Address = g.subdomain(253)
	}
	used := map[int]bool{}
	for range g.r.IntN(4) {
		in := resource.Inbound{Port: 1 + g.r.IntN(65535)}
		if used[in.Port] {
			continue
		}
		used[in.Port] = true
		if g.chance(0.5) {
			in.Name = g.portName()
		}
		if g.chance(0.5) {
			in.ServicePort = 1 + g.r.IntN(65535)
		}
		in.Tags = map[string]string{resource.TagService: g.label(g.length(63), false)}
		s.Networking.Inbound = append(s.Networking.Inbound, in)
	}
	return s
}

func (g docGen) zoneIngress() *resource.ZoneIngressSpec {
	address := func() string {
		if g.chance(0.3) {
			return g.subdomain(253)
		}
		return g.ip()
	}
	s := &resource.ZoneIngressSpec{Networking: resource.ZoneIngressNetworking{Address: address(), Port: 1 + g.r.IntN(65535)}}
	if g.chance(0.5) {
		s.Networking.AdvertisedAddress, s.Networking.AdvertisedPort = address(), 1+g.r.IntN(65535)
	}
	return s
}
