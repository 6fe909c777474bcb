package resource

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/meshnames/meshnames/internal/hostname"
	"github.com/meshnames/meshnames/internal/validate"
)

// Validators assume Default has run: aliases are folded in and defaults are
// set, so they check only canonical values. Every validator reports every
// violation it finds, each with the path of the offending field.

// Limits on the size of lists and maps. They are far above what a real
// service needs and keep one document from costing unbounded work in every
// controller that reads it. A list over its limit is reported once, and its
// entries are not checked one by one.
const (
	MaxLabels          = 64   // labels of an object, tags of an inbound, entries of a selector
	MaxPorts           = 256  // MeshService and MeshMultiZoneService ports
	MaxMatches         = 256  // MeshExternalService match entries
	MaxEndpoints       = 1000 // MeshExternalService destination endpoints
	MaxInbounds        = 256  // Dataplane inbounds
	MaxIdentities      = 64   // MeshService identities
	MaxSubjectAltNames = 64   // MeshExternalService TLS subjectAltNames
)

// Validate checks the whole object: name, mesh, labels and spec.
func Validate(o *Object) validate.Errors {
	var errs validate.Errors
	d, ok := Lookup(o.Kind)
	if !ok {
		errs.Addf("type", "unknown kind %q: must be one of %v", o.Kind, KindNames())
		return errs
	}
	switch {
	case d.ServiceKind:
		// Service names become DNS labels in generated hostnames.
		errs.Check("name", validate.DNS1035Label(o.Name))
	case o.Kind == Mesh:
		errs.Check("name", MeshName(o.Name))
	default:
		errs.Check("name", validate.DNS1123Subdomain(o.Name))
	}
	if d.MeshScoped {
		errs.Check("mesh", MeshName(o.Mesh))
	} else if o.Mesh != "" {
		errs.Addf("mesh", "must be empty: %s is not mesh-scoped", o.Kind)
	}
	// The labels the control plane sets (internal/admission, zone sync)
	// do not count against the limit, so that a document read back from
	// the API can be applied again, and a zone's resource is valid on the
	// global as it is in the zone.
	checkLabelsLimit(&errs, "labels", o.Labels, MaxLabels+len(uncountedLabelKeys))
	if user := countUserLabels(o.Labels); user > MaxLabels {
		errs.Addf("labels", "must have at most %d entries, got %d (the labels the control plane sets do not count)", MaxLabels, user)
	}
	if o.Spec == nil {
		errs.Add("spec", "must be set")
	} else {
		errs.Append(o.Spec.Validate("spec"))
	}
	return errs
}

// ---- shared rules ----

// MeshName checks the name of a mesh: a DNS-1123 subdomain of at most 63
// characters, because every resource of the mesh carries it in its
// kuma.io/mesh label (and a Kubernetes store reads the mesh from there),
// and a label value holds no more.
func MeshName(s string) string {
	if msg := validate.DNS1123Subdomain(s); msg != "" {
		return msg
	}
	if len(s) > maxLabel {
		return fmt.Sprintf("must be no more than %d characters: every resource of a mesh carries its name in the %s label, which holds no more", maxLabel, LabelMesh)
	}
	return ""
}

// checkCount reports a list of n entries that is longer than limit, and
// says whether the entries should still be checked one by one.
func checkCount(errs *validate.Errors, p validate.Path, n, limit int) bool {
	if n > limit {
		errs.Addf(p, "must have at most %d entries, got %d", limit, n)
		return false
	}
	return true
}

// checkLabels checks a map of labels (or tags, or a selector's labels): at
// most MaxLabels entries, each key a qualified label key and each value a
// label value. Keys are visited in order so that violations come out in the
// same order every time.
func checkLabels(errs *validate.Errors, p validate.Path, m map[string]string) {
	checkLabelsLimit(errs, p, m, MaxLabels)
}

func checkLabelsLimit(errs *validate.Errors, p validate.Path, m map[string]string, limit int) {
	if !checkCount(errs, p, len(m), limit) {
		return
	}
	// Checked in the map's order, and again in key order (the order
	// errors are reported in) only when something is wrong: every
	// resource a zone receives is checked here, and sorting its labels
	// was a third of the check.
	valid := true
	for k, v := range m {
		if validate.LabelKey(k) != "" || validate.LabelValue(v) != "" {
			valid = false
			break
		}
	}
	if valid {
		return
	}
	for _, k := range sortedKeys(m) {
		if msg := validate.LabelKey(k); msg != "" {
			errs.Add(p.Key(k), "key: "+msg)
		}
		if msg := validate.LabelValue(m[k]); msg != "" {
			errs.Add(p.Key(k), "value: "+msg)
		}
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// checkSelector checks a LabelSelector. An empty selector is valid (it
// selects everything); a key left in the seed 000 spelling `labels` after
// Default is one whose value conflicts with matchLabels.
func checkSelector(errs *validate.Errors, p validate.Path, s *LabelSelector) {
	checkLabels(errs, p.Field("matchLabels"), s.MatchLabels)
	checkLabels(errs, p.Field("labels"), s.Labels)
	for _, k := range sortedKeys(s.Labels) {
		if v, ok := s.MatchLabels[k]; ok && v != s.Labels[k] {
			errs.Addf(p.Field("labels").Key(k), "conflicts with matchLabels[%q]: %q is not %q (labels is the spelling of matchLabels in the hostnames and VIPs design record)", k, s.Labels[k], v)
		}
	}
}

// appProtocols are the application protocols of MeshService and
// MeshMultiZoneService ports, and of the kuma.io/protocol tag.
var appProtocols = []string{ProtocolTCP, ProtocolHTTP, ProtocolHTTP2, ProtocolGRPC}

// checkPorts checks the ports of a MeshService or MeshMultiZoneService.
// allowTarget is false for kinds whose ports are not backed by proxy
// inbounds and so have no targetPort.
func checkPorts(errs *validate.Errors, p validate.Path, ports []Port, allowTarget bool) {
	if !checkCount(errs, p, len(ports), MaxPorts) {
		return
	}
	byNumber := map[int]int{}
	byName := map[string]int{}
	for i, port := range ports {
		pp := p.Index(i)
		if msg := validate.Port(port.Port); msg != "" {
			errs.Add(pp.Field("port"), msg)
		} else if j, dup := byNumber[port.Port]; dup {
			errs.Addf(pp.Field("port"), "duplicates %s: port %d is already declared", p.Index(j), port.Port)
		} else {
			byNumber[port.Port] = i
		}
		if port.Name != "" {
			// A port name is how other resources refer to the port.
			if msg := portName(port.Name); msg != "" {
				errs.Add(pp.Field("name"), msg)
			} else if j, dup := byName[port.Name]; dup {
				errs.Addf(pp.Field("name"), "duplicates %s: name %q is already used", p.Index(j), port.Name)
			} else {
				byName[port.Name] = i
			}
		}
		if t := port.TargetPort; t != nil {
			switch {
			case !allowTarget:
				errs.Add(pp.Field("targetPort"), "must not be set: this kind's ports are not backed by proxy inbounds")
			case t.IsName:
				// A name refers to a named port of the Dataplane inbounds.
				errs.Check(pp.Field("targetPort"), portName(t.String))
			default:
				errs.Check(pp.Field("targetPort"), validate.Port(t.Int))
			}
		}
		errs.Check(pp.Field("appProtocol"), validate.OneOf(port.AppProtocol, appProtocols...))
	}
}

// portName checks a port name: a DNS-1123 label with at least one letter,
// as IANA service names are. A port is referred to by its name or by its
// number in decimal, so an all-digit name would be ambiguous; and a quoted
// targetPort: "8080" is almost always a number written as a string.
func portName(s string) string {
	if msg := validate.DNS1123Label(s); msg != "" {
		return msg
	}
	if strings.Trim(s, "0123456789-") == "" {
		return "must contain at least one letter: a port name that is all digits reads as a port number (write a number without quotes)"
	}
	return ""
}

// checkIP parses an IP address without an IPv6 zone.
func checkIP(s string) (netip.Addr, string) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, "must be an IP address"
	}
	if a.Zone() != "" {
		return netip.Addr{}, "must be an IP address without an IPv6 zone"
	}
	return a, ""
}

func isIPAddr(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

// isIPLike reports whether s looks like an IP address rather than a name, so
// that a malformed address is reported as a bad IP and not as a bad name.
func isIPLike(s string) bool {
	return strings.Contains(s, ":") || strings.Trim(s, "0123456789.") == ""
}

// ---- Mesh, Zone ----

// Validate reports nothing: a Mesh has no spec fields.
func (s *MeshSpec) Validate(p validate.Path) validate.Errors { return nil }

// Validate reports nothing: Enabled is the only field and any value is valid.
func (s *ZoneSpec) Validate(p validate.Path) validate.Errors { return nil }

// ---- Dataplane ----

// Validate checks the proxy address and its inbounds. An inbound with tags
// follows Kuma 2.x's rules (a kuma.io/service tag, seed 004); an inbound
// without tags is Kuma 3.x's, whose service comes from the Dataplane's labels.
func (s *DataplaneSpec) Validate(p validate.Path) validate.Errors {
	var errs validate.Errors
	np := p.Field("networking")
	checkProxyAddress(&errs, np.Field("address"), s.Networking.Address)
	ip := np.Field("inbound")
	if !checkCount(&errs, ip, len(s.Networking.Inbound), MaxInbounds) {
		return errs
	}
	ports := map[int]int{} // port -> first inbound
	for i, in := range s.Networking.Inbound {
		pp := ip.Index(i)
		errs.Check(pp.Field("port"), validate.Port(in.Port))
		if in.Name != "" {
			errs.Check(pp.Field("name"), portName(in.Name))
		}
		if in.ServicePort != 0 {
			errs.Check(pp.Field("servicePort"), validate.Port(in.ServicePort))
		}
		if in.ServiceAddress != "" {
			_, msg := checkIP(in.ServiceAddress)
			errs.Check(pp.Field("serviceAddress"), msg)
		}
		if j, dup := ports[in.Port]; dup && in.Port != 0 {
			errs.Addf(pp.Field("port"), "must be unique: inbound[%d] listens on %d too", j, in.Port)
		} else {
			ports[in.Port] = i
		}
		checkTags(&errs, pp.Field("tags"), in.Tags)
		switch in.State {
		case "", InboundReady, InboundNotReady, InboundIgnored:
		default:
			errs.Addf(pp.Field("state"), "must be %s, %s or %s, got %q", InboundReady, InboundNotReady, InboundIgnored, in.State)
		}
	}
	if tp := s.Networking.TransparentProxying; tp != nil && tp.ReachableBackends != nil {
		checkBackendRefs(&errs, np.Field("transparentProxying").Field("reachableBackends").Field("refs"), tp.ReachableBackends.Refs)
	}
	return errs
}

// checkProxyAddress checks the address of a proxy (a Dataplane, a
// ZoneIngress): an IP address other than the unspecified one, or a DNS
// name.
func checkProxyAddress(errs *validate.Errors, p validate.Path, addr string) {
	switch {
	case addr == "":
		errs.Add(p, "must not be empty")
	case isIPLike(addr):
		if a, msg := checkIP(addr); msg != "" {
			errs.Add(p, msg+" or a DNS name")
		} else if a.IsUnspecified() {
			errs.Add(p, "must not be 0.0.0.0 or :: (unspecified): other proxies cannot reach it")
		}
	default:
		if msg := validate.DNS1123Subdomain(addr); msg != "" {
			errs.Add(p, "must be an IP address or a DNS name: "+msg)
		}
	}
}

// MaxBackendRefs bounds a Dataplane's reachableBackends.
const MaxBackendRefs = 1024

// checkBackendRefs checks reachableBackends refs: a service kind, a name
// or labels (not both), and a port when given.
func checkBackendRefs(errs *validate.Errors, p validate.Path, refs []BackendRef) {
	if !checkCount(errs, p, len(refs), MaxBackendRefs) {
		return
	}
	for i, r := range refs {
		rp := p.Index(i)
		switch r.Kind {
		case MeshService, MeshExternalService, MeshMultiZoneService:
		default:
			errs.Addf(rp.Field("kind"), "must be %s, %s or %s, got %q", MeshService, MeshExternalService, MeshMultiZoneService, r.Kind)
		}
		switch {
		case r.Name == "" && len(r.Labels) == 0:
			errs.Add(rp, "must have a name or labels")
		case r.Name != "" && len(r.Labels) > 0:
			errs.Add(rp, "must have a name or labels, not both")
		case r.Name != "":
			errs.Check(rp.Field("name"), validate.DNS1123Subdomain(r.Name))
		}
		if r.Namespace != "" {
			errs.Check(rp.Field("namespace"), validate.DNS1123Label(r.Namespace))
		}
		if r.Port != 0 {
			errs.Check(rp.Field("port"), validate.Port(r.Port))
		}
		if checkCount(errs, rp.Field("labels"), len(r.Labels), MaxLabels) {
			for _, k := range sortedKeys(r.Labels) {
				if msg := validate.LabelKey(k); msg != "" {
					errs.Add(rp.Field("labels").Key(k), "key: "+msg)
				}
			}
		}
	}
}

// checkTags checks an inbound's tags: label keys, Kuma's tag values, the
// kuma.io/service tag present, and the values of the tags meshnames reads.
func checkTags(errs *validate.Errors, tp validate.Path, tags map[string]string) {
	if !checkCount(errs, tp, len(tags), MaxLabels) {
		return
	}
	for _, k := range sortedKeys(tags) {
		if msg := validate.LabelKey(k); msg != "" {
			errs.Add(tp.Key(k), "key: "+msg)
		}
		if msg := validate.TagValue(tags[k]); msg != "" {
			errs.Add(tp.Key(k), "value: "+msg)
		}
	}
	if _, ok := tags[TagService]; !ok && len(tags) > 0 {
		errs.Addf(tp, "must contain the %s tag (or be left out, as in Kuma 3.x)", TagService)
	}
	if v, ok := tags[TagProtocol]; ok {
		errs.Check(tp.Key(TagProtocol), validate.OneOf(v, appProtocols...))
	}
	if v, ok := tags[LabelExportMode]; ok {
		errs.Check(tp.Key(LabelExportMode), validate.OneOf(v, ExportAll, ExportNone))
	}
}

// ---- MeshService ----

// Validate checks a MeshService. Kuma never validated more than the name and
// the selector; users of a naming plane need the ports checked too
// (ARCHITECTURE.md section 2).
func (s *MeshServiceSpec) Validate(p validate.Path) validate.Errors {
	var errs validate.Errors
	sp := p.Field("selector")
	sel := s.Selector
	var set []string
	// An empty dataplaneTags map is not serialised, so it does not count as
	// a selector (it would not survive a round trip).
	if len(sel.DataplaneTags) > 0 {
		set = append(set, "dataplaneTags")
	}
	if sel.DataplaneRef != nil {
		set = append(set, "dataplaneRef")
	}
	if sel.DataplaneLabels != nil {
		set = append(set, "dataplaneLabels")
	}
	if sel.Dataplane != nil {
		// Default folds seed 002's selector.dataplane.tags into
		// dataplaneTags; it is still here only when both were given.
		set = append(set, "dataplane")
	}
	if len(set) > 1 {
		errs.Addf(sp, "must set at most one of dataplaneTags, dataplaneRef, dataplaneLabels or dataplane (the spelling of dataplaneTags in the MeshService multizone design record), got %s", strings.Join(set, " and "))
	}
	checkLabels(&errs, sp.Field("dataplaneTags"), sel.DataplaneTags)
	if r := sel.DataplaneRef; r != nil {
		errs.Check(sp.Field("dataplaneRef").Field("name"), validate.DNS1123Subdomain(r.Name))
	}
	if l := sel.DataplaneLabels; l != nil {
		checkSelector(&errs, sp.Field("dataplaneLabels"), l)
	}
	if d := sel.Dataplane; d != nil {
		checkLabels(&errs, sp.Field("dataplane").Field("tags"), d.Tags)
	}

	checkPorts(&errs, p.Field("ports"), s.Ports, true)

	idp := p.Field("identities")
	if checkCount(&errs, idp, len(s.Identities), MaxIdentities) {
		for i, id := range s.Identities {
			pp := idp.Index(i)
			errs.Check(pp.Field("type"), validate.OneOf(id.Type, IdentityServiceTag, IdentitySpiffeID))
			switch {
			case id.Value == "":
				errs.Add(pp.Field("value"), "must not be empty")
			case id.Type == IdentityServiceTag:
				// seed 004: the value of a kuma.io/service tag.
				errs.Check(pp.Field("value"), validate.LabelValue(id.Value))
			case id.Type == IdentitySpiffeID && !strings.HasPrefix(id.Value, "spiffe://"):
				errs.Add(pp.Field("value"), "must be a SPIFFE ID starting with spiffe://")
			}
		}
	}
	if s.State != "" {
		errs.Check(p.Field("state"), validate.OneOf(s.State, StateAvailable, StateUnavailable))
	}
	if s.Export != nil {
		// seed 002: export.mode says whether the service leaves its zone.
		errs.Check(p.Field("export").Field("mode"), validate.OneOf(s.Export.Mode, ExportAll, ExportNone))
	}
	return errs
}

// ---- MeshMultiZoneService (seed 002) ----

// Validate checks a MeshMultiZoneService: it must select MeshServices by at
// least one label; declared ports follow the MeshService port rules.
func (s *MeshMultiZoneServiceSpec) Validate(p validate.Path) validate.Errors {
	var errs validate.Errors
	mp := p.Field("selector").Field("meshService")
	if sel := s.Selector.MeshService; sel == nil {
		errs.Add(mp, "must be set: the labels of the MeshServices to group")
	} else {
		if len(sel.MatchLabels) == 0 {
			// Selecting every MeshService of the mesh is never intended.
			errs.Add(mp.Field("matchLabels"), "must select at least one label")
		}
		checkSelector(&errs, mp, sel)
	}
	checkPorts(&errs, p.Field("ports"), s.Ports, false)
	return errs
}

// ---- HostnameGenerator (seeds 000, 001) ----

// Validate checks a HostnameGenerator: one selected kind and a template that
// renders a DNS name with stub values.
func (s *HostnameGeneratorSpec) Validate(p validate.Path) validate.Errors {
	var errs validate.Errors
	sp := p.Field("selector")
	selectors := []struct {
		field string
		sel   *LabelSelector
	}{
		{"meshService", s.Selector.MeshService},
		{"meshExternalService", s.Selector.MeshExternalService},
		{"meshMultiZoneService", s.Selector.MeshMultiZoneService},
	}
	n := 0
	for _, c := range selectors {
		if c.sel != nil {
			n++
		}
	}
	if n != 1 {
		errs.Addf(sp, "must set exactly one of meshService, meshExternalService or meshMultiZoneService, got %d", n)
	}
	for _, c := range selectors {
		// An empty selector selects every service of the kind (seed 001's
		// meshMultiZoneService: {}).
		if c.sel != nil {
			checkSelector(&errs, sp.Field(c.field), c.sel)
		}
	}
	errs.Check(p.Field("template"), hostname.Check(s.Template))
	return errs
}
