package kuma

import (
	"cmp"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/validate"
)

// ToKuma renders a native object as Kuma 3.x's document of its kind. What
// the Kuma shape cannot carry is left out of the Kuma fields and listed in
// the document's meshnames.omitted, so that nothing is hidden; FromKuma of
// the result gives back the native object exactly when that list is empty.
func ToKuma(o *resource.Object) any {
	v := &view{}
	meta := v.meta(o)
	switch s := o.Spec.(type) {
	case *resource.MeshSpec:
		return v.done(&meshDoc{Meta: meta}, o)
	case *resource.ZoneSpec:
		return v.done(&zoneDoc{Meta: meta, Enabled: cloneBool(s.Enabled)}, o)
	case *resource.DataplaneSpec:
		return v.done(&dataplaneDoc{Meta: meta, Networking: v.networking(s)}, o)
	case *resource.MeshServiceSpec:
		return v.done(&meshServiceDoc{Meta: meta, Spec: v.meshService(s), Status: v.status(o)}, o)
	case *resource.MeshExternalServiceSpec:
		return v.done(&meshExternalServiceDoc{Meta: meta, Spec: v.externalService(s), Status: v.status(o)}, o)
	case *resource.MeshMultiZoneServiceSpec:
		return v.done(&meshMultiZoneServiceDoc{Meta: meta, Spec: multiZoneService(s), Status: v.status(o)}, o)
	case *resource.HostnameGeneratorSpec:
		return v.done(&hostnameGeneratorDoc{Meta: meta, Spec: hostnameGenerator(s)}, o)
	case *resource.ZoneIngressSpec:
		n := s.Networking
		return v.done(&zoneIngressDoc{Meta: meta, Zone: o.Labels[resource.LabelZone], Networking: &ZoneIngressNetworking{
			Address: n.Address, AdvertisedAddress: n.AdvertisedAddress, Port: n.Port, AdvertisedPort: n.AdvertisedPort}}, o)
	}
	panic(fmt.Sprintf("kuma: no Kuma shape for %s (%T)", o.Kind, o.Spec))
}

// Omitted returns what the Kuma view of o leaves out.
func Omitted(o *resource.Object) []Omission {
	m := metaOf(ToKuma(o))
	if m.Meshnames == nil {
		return nil
	}
	return m.Meshnames.Omitted
}

// view collects the omissions of one rendering.
type view struct {
	omitted []Omission
}

func (v *view) omit(field validate.Path, format string, args ...any) {
	v.omitted = append(v.omitted, Omission{Field: string(field), Reason: fmt.Sprintf(format, args...)})
}

// done records the omissions in the document's meta.
func (v *view) done(doc any, o *resource.Object) any {
	if len(v.omitted) > 0 {
		metaOf(doc).Meshnames = &Extra{Native: NativePath(o.Key()), Omitted: v.omitted}
	}
	return doc
}

func metaOf(doc any) *Meta {
	switch d := doc.(type) {
	case *meshDoc:
		return &d.Meta
	case *zoneDoc:
		return &d.Meta
	case *dataplaneDoc:
		return &d.Meta
	case *meshServiceDoc:
		return &d.Meta
	case *meshExternalServiceDoc:
		return &d.Meta
	case *meshMultiZoneServiceDoc:
		return &d.Meta
	case *hostnameGeneratorDoc:
		return &d.Meta
	case *zoneIngressDoc:
		return &d.Meta
	}
	panic(fmt.Sprintf("kuma: not a document: %T", doc))
}

// NativePath is where the native API serves the resource k.
func NativePath(k resource.Key) string {
	d := resource.MustLookup(k.Kind)
	if d.MeshScoped {
		return "/meshes/" + k.Mesh + "/" + d.Plural + "/" + k.Name
	}
	return "/" + d.Plural + "/" + k.Name
}

func (v *view) meta(o *resource.Object) Meta {
	m := Meta{Type: string(o.Kind), Mesh: o.Mesh, Name: o.Name, Labels: o.Labels, KRI: KRI(o), SNIs: SNIs(o)}
	if !o.CreationTime.IsZero() {
		t := o.CreationTime.UTC()
		m.CreationTime = &t
	}
	if !o.ModificationTime.IsZero() {
		t := o.ModificationTime.UTC()
		m.ModificationTime = &t
	}
	return m
}

func cloneBool(b *bool) *bool {
	if b == nil {
		return nil
	}
	c := *b
	return &c
}

func (v *view) networking(s *resource.DataplaneSpec) *Networking {
	n := &Networking{Address: s.Networking.Address}
	for i, in := range s.Networking.Inbound {
		if len(in.Tags) > 0 {
			v.omit(validate.Path("spec.networking.inbound").Index(i).Field("tags"),
				"Kuma 3.x inbounds have no tags (the service comes from the Dataplane's labels)")
		}
		n.Inbound = append(n.Inbound, Inbound{Port: in.Port, ServicePort: in.ServicePort, ServiceAddress: in.ServiceAddress, Name: in.Name})
	}
	return n
}

func labelSelector(s *resource.LabelSelector) *LabelSelector {
	if s == nil {
		return nil
	}
	// Stored selectors hold only matchLabels: Default folds the seed 000
	// spelling in, and a conflict between the two is refused.
	return &LabelSelector{MatchLabels: s.MatchLabels}
}

func (v *view) meshService(s *resource.MeshServiceSpec) *MeshServiceSpec {
	out := &MeshServiceSpec{Ports: s.Ports, State: s.State}
	for i, id := range s.Identities {
		if id.Type != resource.IdentitySpiffeID {
			v.omit(validate.Path("spec.identities").Index(i), "Kuma 3.x identities are SpiffeID only (this is a %s identity)", id.Type)
			continue
		}
		out.Identities = append(out.Identities, id)
	}
	sel := s.Selector
	if sel.DataplaneRef != nil || sel.DataplaneLabels != nil {
		out.Selector = &MeshServiceSelector{DataplaneRef: sel.DataplaneRef, DataplaneLabels: labelSelector(sel.DataplaneLabels)}
	}
	if len(sel.DataplaneTags) > 0 {
		v.omit("spec.selector.dataplaneTags", "Kuma 3.x removed dataplaneTags (select with dataplaneLabels or dataplaneRef)")
	}
	if sel.Dataplane != nil {
		v.omit("spec.selector.dataplane", "the MeshService multizone design record's spelling of dataplaneTags, which Kuma 3.x removed")
	}
	if s.Export != nil {
		v.omit("spec.export", "Kuma has no export mode (the MeshService multizone design record's spec.export.mode)")
	}
	return out
}

func multiZoneService(s *resource.MeshMultiZoneServiceSpec) *MeshMultiZoneServiceSpec {
	out := &MeshMultiZoneServiceSpec{Ports: s.Ports}
	if s.Selector.MeshService != nil {
		out.Selector = &MultiZoneSelector{MeshService: labelSelector(s.Selector.MeshService)}
	}
	return out
}

func hostnameGenerator(s *resource.HostnameGeneratorSpec) *HostnameGeneratorSpec {
	out := &HostnameGeneratorSpec{Template: s.Template}
	sel := s.Selector
	if sel.MeshService != nil || sel.MeshExternalService != nil || sel.MeshMultiZoneService != nil {
		out.Selector = &HostnameSelector{
			MeshService:          labelSelector(sel.MeshService),
			MeshExternalService:  labelSelector(sel.MeshExternalService),
			MeshMultiZoneService: labelSelector(sel.MeshMultiZoneService),
		}
	}
	return out
}

// Kuma's TLS version names, by the native (seed 003) name.
var tlsVersionsToKuma = map[string]string{
	resource.TLSAuto: "TLSAuto", resource.TLS10: "TLS10", resource.TLS11: "TLS11", resource.TLS12: "TLS12", resource.TLS13: "TLS13",
}

func (v *view) externalService(s *resource.MeshExternalServiceSpec) *MeshExternalServiceSpec {
	out := &MeshExternalServiceSpec{}
	mp := validate.Path("spec.match")
	if len(s.Match) == 1 && s.Match[0].Type == resource.MatchHostnameGenerator {
		m := s.Match[0]
		out.Match = &Match{Type: m.Type, Port: m.Port, Protocol: m.Protocol}
	} else {
		var types []string
		for _, m := range s.Match {
			types = append(types, m.Type)
		}
		v.omit(mp, "Kuma has one match of type HostnameGenerator; this service has %d (%s)", len(s.Match), strings.Join(types, ", "))
	}
	d := s.Destination
	if d == nil {
		d = &resource.ExternalDestination{Type: resource.DestinationPassthrough}
	}
	dp := validate.Path("spec.destination")
	switch d.Type {
	case resource.DestinationRegular:
		for i, e := range d.Endpoints {
			if strings.HasPrefix(e.Address, "unix://") {
				v.omit(dp.Field("endpoints").Index(i), "Kuma has no unix socket endpoints")
				continue
			}
			out.Endpoints = append(out.Endpoints, Endpoint{Address: e.Address, Port: e.Port})
		}
		if d.TLS != nil {
			out.TLS = v.tls(d.TLS, dp.Field("tls"))
		}
	case resource.DestinationExtension:
		if d.Extension != nil {
			out.Extension = &resource.Extension{Type: d.Extension.Type, Config: d.Extension.Config}
		}
	default:
		v.omit(dp.Field("type"), "Kuma has no %s destination (the external services design record's default)", d.Type)
	}
	return out
}

func (v *view) tls(t *resource.ExternalTLS, p validate.Path) *TLS {
	out := &TLS{Enabled: t.Enabled, AllowRenegotiation: t.AllowRenegotiation}
	if t.Version != nil {
		out.Version = &TLSVersion{Min: tlsVersionsToKuma[t.Version.Min], Max: tlsVersionsToKuma[t.Version.Max]}
	}
	if t.Verification != nil || t.CACert != nil || t.ClientCert != nil || t.ClientKey != nil {
		ver := &Verification{
			CACert:     v.source(t.CACert, p.Field("caCert")),
			ClientCert: v.source(t.ClientCert, p.Field("clientCert")),
			ClientKey:  v.source(t.ClientKey, p.Field("clientKey")),
		}
		if sv := t.Verification; sv != nil {
			if sv.Skip {
				ver.Mode = "SkipSAN"
			}
			if sv.ServerName != "" {
				name := sv.ServerName
				ver.ServerName = &name
			}
			for _, san := range sv.SubjectAltNames {
				ver.SubjectAltNames = append(ver.SubjectAltNames, SAN{Type: "Exact", Value: san})
			}
		}
		out.Verification = ver
	}
	return out
}

func (v *view) source(d *resource.DataSource, p validate.Path) *SecureSource {
	switch {
	case d == nil:
		return nil
	case d.Secret != nil:
		return &SecureSource{Type: "Secret", SecretRef: &SecretRef{Kind: "Secret", Name: *d.Secret}}
	case d.InlineString != nil:
		return &SecureSource{Type: "InsecureInline", InsecureInline: &Inline{Value: *d.InlineString}}
	}
	v.omit(p.Field("inline"), "Kuma 3.0 has no base64 inline data sources (use Secret or InsecureInline)")
	return nil
}

// status renders a service's status in Kuma's layout: the names in use as
// addresses, each generator's outcome as a Generated condition.
func (v *view) status(o *resource.Object) *ServiceStatus {
	st, ok := o.Status.(resource.ServiceStatusOf)
	if !ok || st == nil {
		return nil
	}
	svc := st.Service()
	out := &ServiceStatus{}
	for _, a := range svc.Addresses {
		if a.Origin.Kind != resource.OriginHostnameGenerator {
			continue // an InternalVIP value: not Kuma's
		}
		ref := Ref{CoreName: a.Origin.Name}
		c := Condition{Type: ConditionGenerated, Status: resource.ConditionTrue, Reason: ReasonGenerated, Message: a.Reason}
		if a.Status == resource.AddressAvailable {
			out.Addresses = append(out.Addresses, Address{Hostname: a.Hostname, Origin: resource.OriginHostnameGenerator, HostnameGeneratorRef: &ref})
		} else {
			c.Status, c.Reason = resource.ConditionFalse, ReasonTemplate
			if isCollision(a) {
				c.Reason = ReasonCollision
			}
		}
		out.HostnameGenerators = append(out.HostnameGenerators, GeneratorOutcome{HostnameGeneratorRef: ref, Conditions: []Condition{c}})
	}
	switch o.Kind {
	case resource.MeshExternalService:
		// Kuma's one VIP is the one of the generated names (no hostname
		// of its own); the VIPs of InternalVIP values are not Kuma's.
		for _, vip := range svc.VIPs {
			if vip.Hostname == "" {
				out.VIP = &VIP{IP: vip.IP}
				break
			}
		}
	default:
		for _, vip := range svc.VIPs {
			out.VIPs = append(out.VIPs, VIP{IP: vip.IP})
		}
	}
	if mz, ok := o.Status.(*resource.MultiZoneServiceStatus); ok {
		out.MeshServices = mz.MeshServices
		for _, c := range svc.Conditions {
			out.Conditions = append(out.Conditions, Condition(c))
		}
	}
	if reflect.ValueOf(*out).IsZero() {
		return nil
	}
	return out
}

// isCollision tells a name lost to another service from a name that could
// not be rendered: the hostname engine words the first "hostname ... is
// already taken by ..." and leaves no name for a failed render.
func isCollision(a resource.Address) bool {
	return a.Hostname != "" && strings.Contains(a.Reason, " is already taken by ")
}

// Kuma's short names of the kinds, used in KRIs and SNIs. Zones have none.
var shortNames = map[resource.Kind]string{
	resource.Mesh: "m", resource.Dataplane: "dp", resource.MeshService: "msvc", resource.MeshExternalService: "extsvc",
	resource.MeshMultiZoneService: "mzsvc", resource.HostnameGenerator: "hg",
}

// KRI is Kuma's resource identifier of o:
// kri_<short>_<mesh>_<zone>_<namespace>_<display name>_<section>, with the
// zone and namespace from their labels and an empty section. It is "" for
// kinds without a short name.
func KRI(o *resource.Object) string {
	short, ok := shortNames[o.Kind]
	if !ok {
		return ""
	}
	return strings.Join([]string{"kri", short, o.Mesh, o.Labels[resource.LabelZone], o.Labels[resource.LabelNamespace], displayName(o), ""}, "_")
}

func displayName(o *resource.Object) string {
	if n, ok := o.Labels[resource.LabelDisplayName]; ok && n != "" {
		return n
	}
	return o.Name
}

// SNIs are the server names Kuma derives from the KRI for each port of a
// service kind: sni.<short>.<mesh>[.<zone>][.<namespace>].<name>.<port name
// or number>. A port whose name would not be a valid one gets none.
func SNIs(o *resource.Object) []SNI {
	type port struct {
		number  int
		section string
	}
	var ports []port
	switch s := o.Spec.(type) {
	case *resource.MeshServiceSpec:
		for _, p := range s.Ports {
			ports = append(ports, port{p.Port, cmp.Or(p.Name, strconv.Itoa(p.Port))})
		}
	case *resource.MeshMultiZoneServiceSpec:
		for _, p := range s.Ports {
			ports = append(ports, port{p.Port, cmp.Or(p.Name, strconv.Itoa(p.Port))})
		}
	case *resource.MeshExternalServiceSpec:
		for _, p := range s.Ports() {
			ports = append(ports, port{p, strconv.Itoa(p)})
		}
	default:
		return nil
	}
	parts := []string{o.Mesh}
	for _, l := range []string{resource.LabelZone, resource.LabelNamespace} {
		if v := o.Labels[l]; v != "" {
			parts = append(parts, v)
		}
	}
	parts = append(parts, displayName(o))
	for _, p := range parts {
		if validate.DNS1035Label(p) != "" {
			return nil
		}
	}
	var out []SNI
	for _, p := range ports {
		if validate.DNS1035Label(p.section) != "" && strings.Trim(p.section, "0123456789") != "" {
			continue
		}
		name := "sni." + shortNames[o.Kind] + "." + strings.Join(parts, ".") + "." + p.section
		if len(name) <= 253 {
			out = append(out, SNI{Port: p.number, SNI: name})
		}
	}
	return out
}
