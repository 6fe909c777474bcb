package xds

import (
	"net/netip"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/meshnames/meshnames/internal/resource"
)

// This file renders the TLS a proxy originates to a MeshExternalService's
// Regular destination (seed 003, destination.tls): an UpstreamTlsContext
// on the cluster, whose certificates and keys are Secrets sent by SDS
// over the same ADS stream, never inline in the cluster: a cluster is
// shown and logged more freely than a secret.

// originTLS is a destination's TLS origination with its data read.
type originTLS struct {
	t             *resource.ExternalTLS
	ca, cert, key []byte
}

// tlsOf reads t. It returns nil when the proxy originates no TLS, and
// why the service cannot be served when a data source gives nothing
// (a secret, which meshnames does not keep; data stored under older
// rules that does not decode).
func tlsOf(t *resource.ExternalTLS) (*originTLS, string) {
	if t == nil || !t.Enabled {
		return nil, ""
	}
	o := &originTLS{t: t}
	for _, ds := range []struct {
		field string
		d     *resource.DataSource
		to    *[]byte
	}{{"caCert", t.CACert, &o.ca}, {"clientCert", t.ClientCert, &o.cert}, {"clientKey", t.ClientKey, &o.key}} {
		if ds.d == nil {
			continue
		}
		if ds.d.Secret != nil {
			return nil, "destination.tls." + ds.field + " names the secret " + *ds.d.Secret + ", and meshnames keeps no secrets; give the data as inline or inlineString"
		}
		b, ok := ds.d.Data()
		if !ok {
			return nil, "destination.tls." + ds.field + " holds no data that decodes"
		}
		*ds.to = b
	}
	return o, ""
}

// Secret names of a cluster: its CA (a validation context) and its client
// certificate with its key.
func caSecretName(cluster string) string     { return cluster + ":ca" }
func clientSecretName(cluster string) string { return cluster + ":client" }

// socket returns the cluster's transport socket and the secrets it names.
// Without caCert the proxy verifies against systemCA (a file on the
// proxy's host); verification.skip drops the subject alt name check only,
// as seed 003 says ("skip SAN verification"), never the CA's.
func (o *originTLS) socket(cluster, sni string, sans []*tlsv3.SubjectAltNameMatcher, systemCA string) (*corev3.TransportSocket, []*tlsv3.Secret) {
	var secrets []*tlsv3.Secret
	common := &tlsv3.CommonTlsContext{}
	if v := o.t.Version; v != nil {
		common.TlsParams = &tlsv3.TlsParameters{
			TlsMinimumProtocolVersion: tlsVersion(v.Min),
			TlsMaximumProtocolVersion: tlsVersion(v.Max),
		}
	}
	if o.cert != nil {
		name := clientSecretName(cluster)
		secrets = append(secrets, &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: inlineBytes(o.cert),
			PrivateKey:       inlineBytes(o.key),
		}}})
		common.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{sds(name)}
	}
	if o.ca != nil {
		name := caSecretName(cluster)
		secrets = append(secrets, &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa: inlineBytes(o.ca),
		}}})
		common.ValidationContextType = &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
			DefaultValidationContext:         &tlsv3.CertificateValidationContext{MatchTypedSubjectAltNames: sans},
			ValidationContextSdsSecretConfig: sds(name),
		}}
	} else {
		if systemCA == "" {
			systemCA = DefaultSystemCA
		}
		common.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa:                 &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: systemCA}},
			MatchTypedSubjectAltNames: sans,
		}}
	}
	ctx := &tlsv3.UpstreamTlsContext{CommonTlsContext: common, Sni: sni, AllowRenegotiation: o.t.AllowRenegotiation}
	return &corev3.TransportSocket{
		Name:       "envoy.transport_sockets.tls",
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(ctx)},
	}, secrets
}

// tlsVersion maps seed 003's version names onto Envoy's, which are the
// same names; absent is TLS_AUTO, Envoy's default.
func tlsVersion(v string) tlsv3.TlsParameters_TlsProtocol {
	switch v {
	case resource.TLS10:
		return tlsv3.TlsParameters_TLSv1_0
	case resource.TLS11:
		return tlsv3.TlsParameters_TLSv1_1
	case resource.TLS12:
		return tlsv3.TlsParameters_TLSv1_2
	case resource.TLS13:
		return tlsv3.TlsParameters_TLSv1_3
	}
	return tlsv3.TlsParameters_TLS_AUTO
}

func inlineBytes(b []byte) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: b}}
}

// sds names a secret sent over the proxy's ADS stream.
func sds(name string) *tlsv3.SdsSecretConfig {
	return &tlsv3.SdsSecretConfig{Name: name, SdsConfig: &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}}
}

// serverName is the SNI the proxy sends on port: verification.serverName
// when set; else the first Domain match on the port that is not a
// wildcard (seed 003's matched domain); else the first endpoint that is a
// DNS name; else none.
func serverName(spec *resource.MeshExternalServiceSpec, dest *resource.ExternalDestination, port int) string {
	if v := dest.TLS.Verification; v != nil && v.ServerName != "" {
		return v.ServerName
	}
	for _, m := range spec.Match {
		if m.Port == port && m.Type == resource.MatchDomain && !strings.HasPrefix(m.Value, "*.") {
			return strings.ToLower(m.Value)
		}
	}
	for _, e := range dest.Endpoints {
		if !strings.HasPrefix(e.Address, "unix://") && !isIP(e.Address) {
			return e.Address
		}
	}
	return ""
}

// subjectAltNames are the names the server's certificate must hold (any
// of them): verification.subjectAltNames, typed by their look (a URI
// with a scheme such as spiffe://, an IP address, else a DNS name); by
// default the SNI, or without one the endpoints' IP addresses (seed 003:
// "if subjectAltNames is not defined then take domain or ips"). None when
// verification.skip is set.
func subjectAltNames(dest *resource.ExternalDestination, sni string) []*tlsv3.SubjectAltNameMatcher {
	v := dest.TLS.Verification
	if v != nil && v.Skip {
		return nil
	}
	var names []string
	switch {
	case v != nil && len(v.SubjectAltNames) > 0:
		names = v.SubjectAltNames
	case sni != "":
		names = []string{sni}
	default:
		for _, e := range dest.Endpoints {
			if isIP(e.Address) {
				names = append(names, e.Address)
			}
		}
	}
	var out []*tlsv3.SubjectAltNameMatcher
	for _, n := range uniq(slices.Clone(names)) {
		typ := tlsv3.SubjectAltNameMatcher_DNS
		if a, err := netip.ParseAddr(n); err == nil {
			typ, n = tlsv3.SubjectAltNameMatcher_IP_ADDRESS, a.String()
		} else if strings.Contains(n, "://") {
			typ = tlsv3.SubjectAltNameMatcher_URI
		}
		out = append(out, &tlsv3.SubjectAltNameMatcher{SanType: typ, Matcher: &matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_Exact{Exact: n},
		}})
	}
	return out
}
