package resource

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/meshnames/meshnames/internal/validate"
)

// This file checks a MeshExternalService (seed 003): its matches, its
// destination and endpoints, and the advice (Warnings) given about a valid
// one that is probably not what its author meant. Its TLS section is
// checked in exttls.go.

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
