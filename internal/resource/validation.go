package resource

import (
	"encoding/json"
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

// ---- MeshExternalService (seed 003) ----

var (
	matchTypes       = []string{MatchInternalVIP, MatchDomain, MatchCIDR, MatchIP, MatchHostnameGenerator}
	externalProtos   = []string{ProtocolTLS, ProtocolTCP, ProtocolGRPC, ProtocolHTTP, ProtocolHTTP2}
	destinationTypes = []string{DestinationRegular, DestinationPassthrough, DestinationExtension}
	tlsVersions      = []string{TLSAuto, TLS10, TLS11, TLS12, TLS13}
)

// Validate checks every rule seed 003 states for a MeshExternalService.
func (s *MeshExternalServiceSpec) Validate(p validate.Path) validate.Errors {
	var errs validate.Errors
	dest := s.Destination
	if dest == nil {
		dest = &ExternalDestination{Type: DestinationPassthrough} // the seed 003 default
	}
	dp := p.Field("destination")

	mp := p.Field("match")
	if len(s.Match) == 0 {
		errs.Add(mp, "must have at least one entry: the traffic this service captures")
	} else if checkCount(&errs, mp, len(s.Match), MaxMatches) {
		for i, m := range s.Match {
			checkMatch(&errs, mp.Index(i), m, dest.Type)
		}
		checkMatchesTogether(&errs, mp, s.Match)
	}

	errs.Check(dp.Field("type"), validate.OneOf(dest.Type, destinationTypes...))
	// seed 003: which of endpoints, tls and extension each type allows.
	forbid := func(field, why string) {
		errs.Addf(dp.Field(field), "must not be set when destination.type is %s: %s", dest.Type, why)
	}
	switch dest.Type {
	case DestinationPassthrough:
		const why = "traffic passes through to its original destination"
		if len(dest.Endpoints) > 0 {
			forbid("endpoints", why)
		}
		if dest.TLS != nil {
			forbid("tls", why)
		}
		if dest.Extension != nil {
			forbid("extension", why)
		}
	case DestinationExtension:
		const why = "the extension decides where traffic goes"
		if dest.Extension == nil {
			errs.Add(dp.Field("extension"), "must be set when destination.type is Extension")
		}
		if len(dest.Endpoints) > 0 {
			forbid("endpoints", why)
		}
		if dest.TLS != nil {
			forbid("tls", why)
		}
	case DestinationRegular:
		if dest.Extension != nil {
			forbid("extension", "use destination.type Extension for plugins")
		}
		if len(dest.Endpoints) == 0 {
			errs.Add(dp.Field("endpoints"), "must have at least one entry when destination.type is Regular")
		}
	}
	// The contents of a section are checked even where the type forbids
	// the section: the user may fix the document by changing the type
	// rather than by removing the section, and every problem is reported
	// at once.
	ep := dp.Field("endpoints")
	if checkCount(&errs, ep, len(dest.Endpoints), MaxEndpoints) {
		for i, e := range dest.Endpoints {
			checkEndpoint(&errs, ep.Index(i), e)
		}
	}
	if x := dest.Extension; x != nil {
		xp := dp.Field("extension")
		if x.Type == "" {
			errs.Add(xp.Field("type"), "must not be empty: the name of the plugin")
		}
		// seed 003: config is a JSON map.
		if len(x.Config) > 0 {
			var m map[string]any
			if json.Unmarshal(x.Config, &m) != nil || m == nil {
				errs.Add(xp.Field("config"), "must be a JSON object")
			}
		}
	}
	if dest.TLS != nil {
		checkTLS(&errs, dp.Field("tls"), dest.TLS)
	}
	return errs
}

func checkMatch(errs *validate.Errors, p validate.Path, m ExternalMatch, destType string) {
	errs.Check(p.Field("type"), validate.OneOf(m.Type, matchTypes...))
	vp := p.Field("value")
	switch {
	case m.Type == MatchHostnameGenerator:
		if m.Value != "" {
			errs.Add(vp, "must not be set for a HostnameGenerator match: it captures the names HostnameGenerators give this service")
		}
		if destType == DestinationPassthrough {
			// Traffic to a name the mesh made up has no original
			// destination to pass through to.
			errs.Addf(p.Field("type"), "a HostnameGenerator match needs destination.type Regular or Extension, got %s: traffic to a generated name has no original destination to pass through to", destType)
		}
	case m.Value == "":
		errs.Add(vp, "must not be empty")
	case (m.Type == MatchInternalVIP || m.Type == MatchDomain) && isIPAddr(m.Value):
		// All-digit labels make an IP address a valid RFC 1123 name too.
		errs.Addf(vp, "must be a DNS name, not an IP address: use type %s for an address", MatchIP)
	case m.Type == MatchInternalVIP:
		// A name the control plane gives a VIP from the 242/8 pool.
		errs.Check(vp, validate.DNS1123Subdomain(m.Value))
	case m.Type == MatchDomain:
		if rest, ok := strings.CutPrefix(m.Value, "*."); ok {
			if msg := validate.DNS1123Subdomain(rest); msg != "" {
				errs.Add(vp, "must be a DNS name, or '*.' followed by a DNS name (a wildcard is a single leading label): "+msg)
			} else if destType != DestinationPassthrough {
				// seed 003: wildcards only with Passthrough.
				errs.Addf(vp, "a wildcard domain is allowed only when destination.type is Passthrough, got %s", destType)
			}
		} else if msg := validate.DNS1123Subdomain(m.Value); msg != "" {
			errs.Add(vp, "must be a DNS name, or '*.' followed by a DNS name: "+msg)
		}
	case m.Type == MatchCIDR:
		prefix, err := netip.ParsePrefix(m.Value)
		switch {
		case err != nil:
			errs.Add(vp, "must be a CIDR such as 10.1.1.0/24")
		case prefix != prefix.Masked():
			// Kept canonical so that overlap checks and users read the
			// range the same way.
			errs.Addf(vp, "must be in canonical form with the host bits zero: %s", prefix.Masked())
		}
	case m.Type == MatchIP:
		_, msg := checkIP(m.Value)
		errs.Check(vp, msg)
	}
	errs.Check(p.Field("port"), validate.Port(m.Port))
	errs.Check(p.Field("protocol"), validate.OneOf(m.Protocol, externalProtos...))
}

// checkMatchesTogether checks the rules that span match entries: an entry
// repeated adds nothing and is most likely a mistake in editing; and every
// entry on one port uses the same protocol, because seed 003 names one
// cluster per port (`<name>_<port>`), configured for one protocol.
func checkMatchesTogether(errs *validate.Errors, p validate.Path, ms []ExternalMatch) {
	type entry struct {
		typ, value string
		port       int
	}
	seen := map[entry]int{}
	portProto := map[int]int{} // port -> first entry with a valid protocol
	for i, m := range ms {
		e := entry{m.Type, strings.ToLower(m.Value), m.Port}
		if j, dup := seen[e]; dup {
			errs.Addf(p.Index(i), "duplicates %s: the same type, value and port", p.Index(j))
		} else {
			seen[e] = i
		}
		if !slices.Contains(externalProtos, m.Protocol) || validate.Port(m.Port) != "" {
			continue // reported by checkMatch
		}
		j, ok := portProto[m.Port]
		if !ok {
			portProto[m.Port] = i
		} else if ms[j].Protocol != m.Protocol {
			errs.Addf(p.Index(i).Field("protocol"), "must be %s like %s, which uses the same port: a MeshExternalService has one cluster per port (<name>_%d), with one protocol",
				ms[j].Protocol, p.Index(j), m.Port)
		}
	}
}

func checkEndpoint(errs *validate.Errors, p validate.Path, e ExternalEndpoint) {
	ap, pp := p.Field("address"), p.Field("port")
	if path, ok := strings.CutPrefix(e.Address, "unix://"); ok {
		if !strings.HasPrefix(path, "/") {
			errs.Add(ap, "must be unix:// followed by an absolute path, such as unix:///run/app.sock")
		}
		if e.Port != 0 {
			errs.Add(pp, "must not be set for a unix socket address")
		}
		return
	}
	switch {
	case e.Address == "":
		errs.Add(ap, "must not be empty: an IP address, a DNS name or unix:// and a path")
	case isIPLike(e.Address):
		if _, msg := checkIP(e.Address); msg != "" {
			errs.Add(ap, msg+", a DNS name or unix:// and a path")
		}
	default:
		if msg := validate.DNS1123Subdomain(e.Address); msg != "" {
			errs.Add(ap, "must be an IP address, a DNS name or unix:// and a path: "+msg)
		}
	}
	if e.Port == 0 {
		errs.Add(pp, "must be set for an IP or DNS name address: a port number between 1 and 65535")
	} else {
		errs.Check(pp, validate.Port(e.Port))
	}
}

// Warnings returns advice about a valid object that is probably not what the
// user meant; each entry starts with the field it concerns. It covers two
// MeshExternalService notes of seed 003: at the TCP level the proxy cannot
// tell domains apart, so a tcp match on a port where every match is a Domain
// captures all traffic to that port; and subjectAltNames take no effect
// when verification is skipped. It also says when a TLS data source names
// a secret, which meshnames does not keep: the service is not served to
// proxies (internal/xds).
func Warnings(o *Object) []string {
	s, ok := o.Spec.(*MeshExternalServiceSpec)
	if !ok || s == nil {
		return nil
	}
	onlyDomains := map[int]bool{}
	for _, m := range s.Match {
		only, seen := onlyDomains[m.Port]
		onlyDomains[m.Port] = (only || !seen) && m.Type == MatchDomain
	}
	var warnings []string
	for i, m := range s.Match {
		if m.Type == MatchDomain && m.Protocol == ProtocolTCP && onlyDomains[m.Port] {
			p := validate.Path("spec").Field("match").Index(i).Field("protocol")
			warnings = append(warnings, fmt.Sprintf(
				"%s: tcp cannot tell domains apart, so this match captures all traffic to port %d, not only %s; use tls or an HTTP protocol, or match an IP, CIDR or InternalVIP",
				p, m.Port, m.Value))
		}
	}
	if d := s.Destination; d != nil && d.TLS != nil && d.TLS.Verification != nil &&
		d.TLS.Verification.Skip && len(d.TLS.Verification.SubjectAltNames) > 0 {
		warnings = append(warnings, "spec.destination.tls.verification.subjectAltNames: not checked, because verification.skip is true")
	}
	if d := s.Destination; d != nil && d.Type == DestinationRegular && d.TLS != nil && d.TLS.Enabled {
		for _, ds := range []struct {
			name string
			d    *DataSource
		}{{"caCert", d.TLS.CACert}, {"clientCert", d.TLS.ClientCert}, {"clientKey", d.TLS.ClientKey}} {
			if ds.d != nil && ds.d.Secret != nil {
				warnings = append(warnings, "spec.destination.tls."+ds.name+".secret: meshnames keeps no secrets, so proxies are not sent this service; give the data as inline or inlineString")
			}
		}
	}
	return warnings
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
