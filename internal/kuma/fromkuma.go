package kuma

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/meshnames/meshnames/internal/decode"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/validate"
)

// readOnly are the top-level fields of a Kuma document that the server
// computes; a write ignores them, so that what kumactl reads can be sent
// back.
var readOnly = []string{"creationTime", "modificationTime", "kri", "snis", "status", "meshnames"}

// FromKuma reads a Kuma 3.x document of kind (the kind its path names) in
// JSON or YAML and returns the native object it stands for, before
// defaults and validation, which are the native write path's. Every
// problem is returned at once, each with its path in the Kuma document;
// a field that one model has and the other has not is refused by name,
// never dropped.
func FromKuma(kind resource.Kind, data []byte) (*resource.Object, validate.Errors) {
	g, err := generic(data)
	if err != nil {
		return nil, validate.Errors{{Field: resource.DocumentField, Message: err.Error()}}
	}
	m, ok := g.(map[string]any)
	if !ok {
		return nil, validate.Errors{{Field: resource.DocumentField, Message: "must be an object with type, name and the kind's fields"}}
	}
	for _, k := range readOnly {
		delete(m, k)
	}
	if t, ok := m["type"].(string); ok && t != string(kind) {
		return nil, validate.Errors{{Field: "type", Message: fmt.Sprintf("must be %s to match the path, got %q", kind, t)}}
	}
	var f from
	var o *resource.Object
	switch kind {
	case resource.Mesh:
		var d meshDoc
		f.decode(m, &d)
		o = f.object(d.Meta, &resource.MeshSpec{})
	case resource.Zone:
		var d zoneDoc
		f.decode(m, &d)
		o = f.object(d.Meta, &resource.ZoneSpec{Enabled: d.Enabled})
	case resource.Dataplane:
		var d dataplaneDoc
		f.decode(m, &d)
		o = f.object(d.Meta, f.dataplane(d.Networking))
	case resource.MeshService:
		var d meshServiceDoc
		f.decode(m, &d)
		o = f.object(d.Meta, f.meshService(d.Spec))
	case resource.MeshExternalService:
		var d meshExternalServiceDoc
		f.decode(m, &d)
		o = f.object(d.Meta, f.externalService(d.Spec))
	case resource.MeshMultiZoneService:
		var d meshMultiZoneServiceDoc
		f.decode(m, &d)
		o = f.object(d.Meta, f.multiZoneService(d.Spec))
	case resource.HostnameGenerator:
		var d hostnameGeneratorDoc
		f.decode(m, &d)
		o = f.object(d.Meta, f.hostnameGenerator(d.Spec))
	case resource.ZoneIngress:
		var d zoneIngressDoc
		f.decode(m, &d)
		o = f.object(d.Meta, f.zoneIngress(d.Networking))
		f.zone(o, d.Zone)
	default:
		return nil, validate.Errors{{Field: "type", Message: fmt.Sprintf("unknown kind %q", kind)}}
	}
	return o, f.errs
}

// generic parses JSON (what kumactl sends) or YAML.
func generic(data []byte) (any, error) {
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
		return decode.Generic(data)
	}
	return decode.YAMLGeneric(data)
}

// from collects the problems of one translation.
type from struct {
	errs validate.Errors
}

func (f *from) decode(m map[string]any, out any) {
	for _, e := range decode.Value(m, out, "") {
		if e.Message == "unknown field" {
			e.Message = "unknown field: meshnames does not keep it, so it cannot be stored (see the Kuma compatibility page for what is kept)"
		}
		f.errs = append(f.errs, e)
	}
}

func (f *from) refuse(p validate.Path, format string, args ...any) {
	f.errs.Addf(p, format, args...)
}

// object builds the native object; a write ignores the read-only fields of
// the meta.
func (f *from) object(m Meta, spec resource.Spec) *resource.Object {
	return &resource.Object{Kind: resource.Kind(m.Type), Mesh: m.Mesh, Name: m.Name, Labels: m.Labels, Spec: spec}
}

func (f *from) dataplane(n *Networking) *resource.DataplaneSpec {
	s := &resource.DataplaneSpec{}
	if n == nil {
		return s
	}
	s.Networking.Address = n.Address
	for i, in := range n.Inbound {
		if in.Tags != nil {
			f.refuse(validate.Path("networking.inbound").Index(i).Field("tags"),
				"Kuma 3.x inbounds have no tags (the service comes from the Dataplane's labels); write a Dataplane with tags through the native API")
		}
		s.Networking.Inbound = append(s.Networking.Inbound, resource.Inbound{Port: in.Port, ServicePort: in.ServicePort, ServiceAddress: in.ServiceAddress, Name: in.Name})
	}
	return s
}

func (f *from) zoneIngress(n *ZoneIngressNetworking) *resource.ZoneIngressSpec {
	s := &resource.ZoneIngressSpec{}
	if n == nil {
		return s
	}
	if n.Admin != nil {
		f.refuse("networking.admin", "meshnames keeps no Envoy admin port for an ingress; leave it out")
	}
	s.Networking = resource.ZoneIngressNetworking{Address: n.Address, AdvertisedAddress: n.AdvertisedAddress, Port: n.Port, AdvertisedPort: n.AdvertisedPort}
	return s
}

// zone carries Kuma's zone field of a ZoneIngress into its kuma.io/zone
// label, where the native write path checks it against the zone it is
// written in.
func (f *from) zone(o *resource.Object, zone string) {
	if zone == "" {
		return
	}
	if l, ok := o.Labels[resource.LabelZone]; ok && l != zone {
		f.refuse("zone", "must match the label %s, %q, got %q", resource.LabelZone, l, zone)
		return
	}
	if o.Labels == nil {
		o.Labels = map[string]string{}
	}
	o.Labels[resource.LabelZone] = zone
}

func nativeSelector(s *LabelSelector) *resource.LabelSelector {
	if s == nil {
		return nil
	}
	return &resource.LabelSelector{MatchLabels: s.MatchLabels}
}

func (f *from) meshService(s *MeshServiceSpec) *resource.MeshServiceSpec {
	out := &resource.MeshServiceSpec{}
	if s == nil {
		return out
	}
	out.Ports, out.Identities, out.State = s.Ports, s.Identities, s.State
	for i, id := range s.Identities {
		if id.Type != resource.IdentitySpiffeID {
			f.refuse(validate.Path("spec.identities").Index(i).Field("type"), "must be SpiffeID, Kuma 3.x's only identity type, got %q (write ServiceTag identities through the native API)", id.Type)
		}
	}
	if s.Export != nil {
		f.refuse("spec.export", "Kuma's MeshService has no export; set the export mode through the native API")
	}
	if sel := s.Selector; sel != nil {
		out.Selector.DataplaneRef = sel.DataplaneRef
		out.Selector.DataplaneLabels = nativeSelector(sel.DataplaneLabels)
		if sel.DataplaneTags != nil {
			f.refuse("spec.selector.dataplaneTags", "Kuma 3.x removed dataplaneTags: select with dataplaneLabels, or write this MeshService through the native API, which keeps dataplaneTags")
		}
	}
	return out
}

func (f *from) multiZoneService(s *MeshMultiZoneServiceSpec) *resource.MeshMultiZoneServiceSpec {
	out := &resource.MeshMultiZoneServiceSpec{}
	if s == nil {
		return out
	}
	out.Ports = s.Ports
	if s.Selector != nil {
		out.Selector.MeshService = nativeSelector(s.Selector.MeshService)
	}
	return out
}

func (f *from) hostnameGenerator(s *HostnameGeneratorSpec) *resource.HostnameGeneratorSpec {
	out := &resource.HostnameGeneratorSpec{}
	if s == nil {
		return out
	}
	out.Template = s.Template
	if s.Extension != nil {
		f.refuse("spec.extension", "meshnames has no HostnameGenerator extensions (Kuma's open-source control plane ignores them too)")
	}
	if sel := s.Selector; sel != nil {
		out.Selector = resource.HostnameSelector{
			MeshService:          nativeSelector(sel.MeshService),
			MeshExternalService:  nativeSelector(sel.MeshExternalService),
			MeshMultiZoneService: nativeSelector(sel.MeshMultiZoneService),
		}
	}
	return out
}

// Native (seed 003) TLS version names, by Kuma's name.
var tlsVersionsFromKuma = func() map[string]string {
	m := map[string]string{}
	for native, k := range tlsVersionsToKuma {
		m[k] = native
	}
	return m
}()

var kumaTLSVersions = []string{"TLSAuto", "TLS10", "TLS11", "TLS12", "TLS13"}

func (f *from) externalService(s *MeshExternalServiceSpec) *resource.MeshExternalServiceSpec {
	out := &resource.MeshExternalServiceSpec{}
	if s == nil {
		s = &MeshExternalServiceSpec{}
	}
	sp := validate.Path("spec")
	switch m := s.Match; {
	case m == nil:
		f.refuse(sp.Field("match"), "must be set: the port and protocol of the traffic to the service's generated names")
	case m.Type != "" && m.Type != resource.MatchHostnameGenerator:
		f.refuse(sp.Field("match").Field("type"), "must be HostnameGenerator, Kuma's only match type, got %q (write InternalVIP, Domain, CIDR and IP matches through the native API)", m.Type)
	default:
		out.Match = []resource.ExternalMatch{{Type: resource.MatchHostnameGenerator, Port: m.Port, Protocol: m.Protocol}}
	}
	d := &resource.ExternalDestination{}
	out.Destination = d
	if s.Extension != nil {
		// The design record's Extension destination: the extension alone
		// decides where traffic goes.
		d.Type = resource.DestinationExtension
		d.Extension = s.Extension
		if len(s.Endpoints) > 0 {
			f.refuse(sp.Field("endpoints"), "must not be set together with spec.extension: in meshnames (the external services design record) an extension decides where traffic goes, so endpoints would be ignored")
		}
		if s.TLS != nil {
			f.refuse(sp.Field("tls"), "must not be set together with spec.extension: in meshnames (the external services design record) an extension decides where traffic goes, so tls would be ignored")
		}
		// What the refused sections hold is translated only for its
		// problems, so that they are reported with the rest.
		f.endpoints(s.Endpoints, sp)
		if s.TLS != nil {
			f.tls(s.TLS, sp.Field("tls"))
		}
		return out
	}
	d.Type = resource.DestinationRegular
	if len(s.Endpoints) == 0 {
		f.refuse(sp.Field("endpoints"), "must have at least one entry, unless spec.extension is set: meshnames keeps no external service without a destination")
	}
	d.Endpoints = f.endpoints(s.Endpoints, sp)
	if s.TLS != nil {
		d.TLS = f.tls(s.TLS, sp.Field("tls"))
	}
	return out
}

func (f *from) endpoints(es []Endpoint, sp validate.Path) []resource.ExternalEndpoint {
	var out []resource.ExternalEndpoint
	for i, e := range es {
		if e.Priority != nil {
			f.refuse(sp.Field("endpoints").Index(i).Field("priority"), "meshnames keeps no endpoint priorities (the external services design record has none): remove it")
		}
		out = append(out, resource.ExternalEndpoint{Address: e.Address, Port: e.Port})
	}
	return out
}

func (f *from) tls(t *TLS, p validate.Path) *resource.ExternalTLS {
	out := &resource.ExternalTLS{Enabled: t.Enabled, AllowRenegotiation: t.AllowRenegotiation}
	if v := t.Version; v != nil {
		out.Version = &resource.TLSVersion{Min: f.version(v.Min, p.Field("version").Field("min")), Max: f.version(v.Max, p.Field("version").Field("max"))}
	}
	v := t.Verification
	if v == nil {
		return out
	}
	vp := p.Field("verification")
	ver := &resource.TLSVerification{}
	switch v.Mode {
	case "", "Secured":
	case "SkipSAN":
		ver.Skip = true
	case "SkipCA", "SkipAll":
		f.refuse(vp.Field("mode"), "%s is not supported: meshnames (the external services design record) can skip only the subject alt name check (SkipSAN)", v.Mode)
	default:
		f.refuse(vp.Field("mode"), "must be one of Secured, SkipSAN, got %q", v.Mode)
	}
	if v.ServerName != nil {
		if *v.ServerName == "" {
			// Kuma refuses it too: no server name is not a DNS name.
			f.refuse(vp.Field("serverName"), "must not be empty: the server name the proxy sends (SNI)")
		}
		ver.ServerName = *v.ServerName
	}
	for i, san := range v.SubjectAltNames {
		if san.Type != "" && san.Type != "Exact" {
			f.refuse(vp.Field("subjectAltNames").Index(i).Field("type"), "must be Exact, got %q: meshnames (the external services design record) matches names exactly", san.Type)
		}
		ver.SubjectAltNames = append(ver.SubjectAltNames, san.Value)
	}
	if ver.Skip || ver.ServerName != "" || len(ver.SubjectAltNames) > 0 {
		out.Verification = ver
	}
	out.CACert = f.source(v.CACert, vp.Field("caCert"))
	out.ClientCert = f.source(v.ClientCert, vp.Field("clientCert"))
	out.ClientKey = f.source(v.ClientKey, vp.Field("clientKey"))
	return out
}

func (f *from) version(v string, p validate.Path) string {
	if v == "" {
		return ""
	}
	n, ok := tlsVersionsFromKuma[v]
	if !ok {
		f.refuse(p, "must be one of %s, got %q", strings.Join(kumaTLSVersions, ", "), v)
	}
	return n
}

func (f *from) source(s *SecureSource, p validate.Path) *resource.DataSource {
	if s == nil {
		return nil
	}
	if s.File != nil || s.EnvVar != nil || s.Type == "File" || s.Type == "EnvVar" {
		f.refuse(p.Field("type"), "must be Secret or InsecureInline: meshnames (like Kuma for external services) reads no files or environment variables")
		return nil
	}
	typ := s.Type
	if typ == "" {
		switch {
		case s.SecretRef != nil && s.InsecureInline == nil:
			typ = "Secret"
		case s.InsecureInline != nil && s.SecretRef == nil:
			typ = "InsecureInline"
		}
	}
	switch typ {
	case "Secret":
		if s.InsecureInline != nil {
			f.refuse(p.Field("insecureInline"), "must not be set when type is Secret")
		}
		if s.SecretRef == nil {
			f.refuse(p.Field("secretRef"), "must be set when type is Secret")
			return nil
		}
		if s.SecretRef.Kind != "" && s.SecretRef.Kind != "Secret" {
			f.refuse(p.Field("secretRef").Field("kind"), "must be Secret, got %q", s.SecretRef.Kind)
		}
		name := s.SecretRef.Name
		return &resource.DataSource{Secret: &name}
	case "InsecureInline":
		if s.SecretRef != nil {
			f.refuse(p.Field("secretRef"), "must not be set when type is InsecureInline")
		}
		if s.InsecureInline == nil {
			f.refuse(p.Field("insecureInline"), "must be set when type is InsecureInline")
			return nil
		}
		value := s.InsecureInline.Value
		return &resource.DataSource{InlineString: &value}
	}
	f.refuse(p.Field("type"), "must be Secret or InsecureInline, got %q", s.Type)
	return nil
}

// KumaPath maps a field path of the native document of kind to the path of
// the same field in its Kuma document, so that the native write path's
// violations name what the Kuma user wrote.
func KumaPath(kind resource.Kind, native string) string {
	rules := pathRules[kind]
	for _, r := range rules {
		if rest, ok := strings.CutPrefix(native, r.native); ok && (rest == "" || rest[0] == '.' || rest[0] == '[') {
			return r.kuma + rest
		}
	}
	return native
}

type pathRule struct{ native, kuma string }

// pathRules are tried in order; the longest prefixes come first.
var pathRules = map[resource.Kind][]pathRule{
	resource.Dataplane:   {{"spec.networking", "networking"}, {"spec", "networking"}},
	resource.Zone:        {{"spec.enabled", "enabled"}},
	resource.ZoneIngress: {{"spec.networking", "networking"}, {"spec", "networking"}},
	resource.MeshExternalService: {
		{"spec.match[0]", "spec.match"},
		{"spec.destination.endpoints", "spec.endpoints"},
		{"spec.destination.extension", "spec.extension"},
		{"spec.destination.tls.caCert.secret", "spec.tls.verification.caCert.secretRef.name"},
		{"spec.destination.tls.clientCert.secret", "spec.tls.verification.clientCert.secretRef.name"},
		{"spec.destination.tls.clientKey.secret", "spec.tls.verification.clientKey.secretRef.name"},
		{"spec.destination.tls.caCert.inlineString", "spec.tls.verification.caCert.insecureInline.value"},
		{"spec.destination.tls.clientCert.inlineString", "spec.tls.verification.clientCert.insecureInline.value"},
		{"spec.destination.tls.clientKey.inlineString", "spec.tls.verification.clientKey.insecureInline.value"},
		{"spec.destination.tls.caCert", "spec.tls.verification.caCert"},
		{"spec.destination.tls.clientCert", "spec.tls.verification.clientCert"},
		{"spec.destination.tls.clientKey", "spec.tls.verification.clientKey"},
		{"spec.destination.tls.verification.skip", "spec.tls.verification.mode"},
		{"spec.destination.tls", "spec.tls"},
		{"spec.destination", "spec"},
	},
}
