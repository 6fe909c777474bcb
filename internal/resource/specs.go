package resource

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Well-known label keys (seeds 000-004; ARCHITECTURE.md section 2).
const (
	LabelOrigin           = "kuma.io/origin"
	LabelZone             = "kuma.io/zone"
	LabelDisplayName      = "kuma.io/display-name"
	LabelMesh             = "kuma.io/mesh"
	LabelEnv              = "kuma.io/env"
	LabelManagedBy        = "kuma.io/managed-by"
	LabelNamespace        = "k8s.kuma.io/namespace"
	LabelServiceName      = "k8s.kuma.io/service-name"
	LabelHeadless         = "k8s.kuma.io/is-headless-service"
	LabelExportMode       = "kuma.io/export-mode"
	TagService            = "kuma.io/service"
	TagProtocol           = "kuma.io/protocol"
	OriginZone            = "zone"
	OriginGlobal          = "global"
	EnvUniversal          = "universal"
	EnvKubernetes         = "kubernetes"
	ManagedByMeshServices = "meshservice-generator"
	// ManagedByKubernetes marks the MeshServices made from Kubernetes
	// Services (Kuma's value; seed 001 wrote kube-controller).
	ManagedByKubernetes = "k8s-controller"
)

// Enumerations shared by several kinds.
const (
	ProtocolTCP   = "tcp"
	ProtocolHTTP  = "http"
	ProtocolHTTP2 = "http2"
	ProtocolGRPC  = "grpc"
	ProtocolTLS   = "tls" // MeshExternalService matches only (seed 003)

	StateAvailable   = "Available"
	StateUnavailable = "Unavailable"

	ExportAll  = "All"
	ExportNone = "None"

	IdentityServiceTag = "ServiceTag"
	IdentitySpiffeID   = "SpiffeID"
)

// LabelSelector selects resources whose labels contain every pair of
// MatchLabels. An empty selector selects everything.
type LabelSelector struct {
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
	// Labels is seed 000's spelling of MatchLabels; Default folds it in.
	Labels map[string]string `json:"labels,omitempty"`
}

// Matches reports whether labels satisfy the selector. A selector key whose
// label is absent does not match, even when the wanted value is empty.
func (s *LabelSelector) Matches(labels map[string]string) bool {
	if s == nil {
		return false
	}
	for k, want := range s.MatchLabels {
		got, ok := labels[k]
		if !ok || got != want {
			return false
		}
	}
	return true
}

func (s *LabelSelector) normalize() {
	if s == nil || len(s.Labels) == 0 {
		return
	}
	// A key given in both spellings with different values is left in
	// Labels untouched, so that Validate reports the conflict instead of one
	// value silently winning.
	for k, v := range s.Labels {
		if mv, ok := s.MatchLabels[k]; ok && mv != v {
			return
		}
	}
	if s.MatchLabels == nil {
		s.MatchLabels = map[string]string{}
	}
	maps.Copy(s.MatchLabels, s.Labels)
	s.Labels = nil
}

func (s *LabelSelector) clone() *LabelSelector {
	if s == nil {
		return nil
	}
	return &LabelSelector{MatchLabels: maps.Clone(s.MatchLabels), Labels: maps.Clone(s.Labels)}
}

// IntOrString is a port given as a number or as the name of a port
// (MeshService targetPort).
type IntOrString struct {
	Int    int
	String string
	IsName bool
}

// DecodeValue implements decode.Decoder.
func (p *IntOrString) DecodeValue(v any) string {
	switch t := v.(type) {
	case string:
		*p = IntOrString{String: t, IsName: true}
	case json.Number:
		i, err := strconv.ParseInt(string(t), 10, 32)
		if err != nil {
			return "must be a port number or a port name, got number " + string(t)
		}
		*p = IntOrString{Int: int(i)}
	default:
		return "must be a port number or a port name"
	}
	return ""
}

func (p IntOrString) MarshalJSON() ([]byte, error) {
	if p.IsName {
		return json.Marshal(p.String)
	}
	return json.Marshal(p.Int)
}

func (p *IntOrString) UnmarshalJSON(b []byte) error {
	// A number is not tried as a string first: that try fails, and its
	// error cost more than the number (every stored port is decoded at
	// every start).
	if len(b) > 0 && (b[0] == '"' || string(b) == "null") {
		var s string
		if err := json.Unmarshal(b, &s); err == nil {
			*p = IntOrString{String: s, IsName: true}
			return nil
		}
	}
	var i int
	if err := json.Unmarshal(b, &i); err != nil {
		return err
	}
	*p = IntOrString{Int: i}
	return nil
}

// ---- Mesh ----

// MeshSpec is empty: a Mesh is a namespace for mesh-scoped resources.
type MeshSpec struct{}

func (s *MeshSpec) Default()        {}
func (s *MeshSpec) CloneSpec() Spec { return &MeshSpec{} }

// ---- Zone ----

// ZoneSpec describes a zone known to a global control plane.
type ZoneSpec struct {
	// Enabled is true unless set to false; a disabled zone's services are
	// not synced to other zones.
	Enabled *bool `json:"enabled,omitempty"`
}

func (s *ZoneSpec) Default() {}
func (s *ZoneSpec) CloneSpec() Spec {
	c := &ZoneSpec{}
	if s.Enabled != nil {
		v := *s.Enabled
		c.Enabled = &v
	}
	return c
}

// ---- Dataplane ----

// DataplaneSpec is the universal Dataplane: a proxy's address and inbounds.
type DataplaneSpec struct {
	Networking DataplaneNetworking `json:"networking"`
}

// DataplaneNetworking holds the proxy's address and inbound listeners.
type DataplaneNetworking struct {
	Address string    `json:"address"`
	Inbound []Inbound `json:"inbound,omitempty"`
	// TransparentProxying is Kuma's field of the same name; meshnames reads
	// its reachableBackends only.
	TransparentProxying *TransparentProxying `json:"transparentProxying,omitempty"`
}

// TransparentProxying holds what a transparent proxy captures.
type TransparentProxying struct {
	// ReachableBackends, when set, limits the services the proxy is sent
	// (listeners, clusters, endpoints) to those it names: a proxy that
	// calls three services does not pay for ten thousand.
	ReachableBackends *ReachableBackends `json:"reachableBackends,omitempty"`
}

// ReachableBackends lists the services a proxy may call.
type ReachableBackends struct {
	Refs []BackendRef `json:"refs,omitempty"`
}

// BackendRef names services of one kind: by name (and namespace), or by
// labels; Port, when set, limits the ref to that port of the service.
type BackendRef struct {
	Kind      Kind              `json:"kind"`
	Name      string            `json:"name,omitempty"`
	Namespace string            `json:"namespace,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	Port      int               `json:"port,omitempty"`
}

// Inbound states (Kuma's Dataplane inbound state). An inbound without a
// state is Ready.
const (
	InboundReady    = "Ready"
	InboundNotReady = "NotReady"
	InboundIgnored  = "Ignored"
)

// Inbound is one service endpoint of a proxy.
type Inbound struct {
	// Name names the port of the MeshService synthesised from it (Kuma
	// 2.9+); without it the port has no name and no SRV record.
	Name           string `json:"name,omitempty" decode:"nonempty"`
	Port           int    `json:"port"`
	ServicePort    int    `json:"servicePort,omitempty"`
	ServiceAddress string `json:"serviceAddress,omitempty"`
	// Tags name the inbound's service (kuma.io/service, Kuma 2.x and
	// seed 004). Kuma 3.x inbounds have none: their service is selected by
	// the Dataplane's labels (MeshService selector.dataplaneLabels).
	Tags map[string]string `json:"tags,omitempty"`
	// State says whether the inbound takes traffic: Ready (the default),
	// NotReady (its endpoint is withheld from proxies) or Ignored (it is
	// no endpoint of any service).
	State string `json:"state,omitempty"`
}

// Ready reports whether the inbound takes traffic.
func (in *Inbound) Ready() bool { return in.State == "" || in.State == InboundReady }

func (s *DataplaneSpec) Default() {}
func (s *DataplaneSpec) CloneSpec() Spec {
	c := &DataplaneSpec{Networking: DataplaneNetworking{Address: s.Networking.Address}}
	if s.Networking.Inbound != nil {
		c.Networking.Inbound = make([]Inbound, len(s.Networking.Inbound))
		for i, in := range s.Networking.Inbound {
			in.Tags = maps.Clone(in.Tags)
			c.Networking.Inbound[i] = in
		}
	}
	if tp := s.Networking.TransparentProxying; tp != nil {
		ctp := &TransparentProxying{}
		if rb := tp.ReachableBackends; rb != nil {
			crb := &ReachableBackends{Refs: slices.Clone(rb.Refs)}
			for i := range crb.Refs {
				crb.Refs[i].Labels = maps.Clone(crb.Refs[i].Labels)
			}
			ctp.ReachableBackends = crb
		}
		c.Networking.TransparentProxying = ctp
	}
	return c
}

// ---- MeshService ----

// MeshServiceSpec is a service in one zone (seeds 000, 002).
type MeshServiceSpec struct {
	Selector   MeshServiceSelector `json:"selector,omitzero"`
	Ports      []Port              `json:"ports,omitempty"`
	Identities []Identity          `json:"identities,omitempty"`
	State      string              `json:"state,omitempty"`
	Export     *Export             `json:"export,omitempty"`
}

// MeshServiceSelector selects the Dataplanes behind a MeshService; at most
// one of its fields is set.
type MeshServiceSelector struct {
	// DataplaneTags selects Dataplanes whose inbound tags contain these pairs (Kuma 2.x).
	DataplaneTags map[string]string `json:"dataplaneTags,omitempty"`
	// DataplaneRef selects one Dataplane by name (Kuma 3.x).
	DataplaneRef *DataplaneRef `json:"dataplaneRef,omitempty"`
	// DataplaneLabels selects Dataplanes by their labels (Kuma 3.x).
	DataplaneLabels *LabelSelector `json:"dataplaneLabels,omitempty"`
	// Dataplane is seed 002's spelling of DataplaneTags; Default folds it in.
	Dataplane *DataplaneTagSelector `json:"dataplane,omitempty"`
}

// DataplaneRef names one Dataplane.
type DataplaneRef struct {
	Name string `json:"name"`
}

// DataplaneTagSelector is seed 002's `selector.dataplane.tags`.
type DataplaneTagSelector struct {
	Tags map[string]string `json:"tags,omitempty"`
}

// Port is one port of a service.
type Port struct {
	Name        string       `json:"name,omitempty" decode:"nonempty"`
	Port        int          `json:"port"`
	TargetPort  *IntOrString `json:"targetPort,omitempty"`
	AppProtocol string       `json:"appProtocol,omitempty"`
}

// Identity is an identity a service's proxies present (seed 004 ServiceTag).
type Identity struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// Export controls whether a service leaves its zone (seed 002).
type Export struct {
	Mode string `json:"mode"`
}

func (s *MeshServiceSpec) Default() {
	// The seed 002 spelling is folded in only when dataplaneTags is not also
	// given; otherwise both stay, and Validate reports two selectors.
	if d := s.Selector.Dataplane; d != nil && len(s.Selector.DataplaneTags) == 0 {
		s.Selector.DataplaneTags = d.Tags
		s.Selector.Dataplane = nil
	}
	s.Selector.DataplaneLabels.normalize()
	defaultPorts(s.Ports)
}

// defaultPorts sets the default application protocol and lower-cases the
// given one: Kuma's MeshService accepts "TCP" (case-insensitive), and its
// MeshMultiZoneService does not; we accept both spellings on both kinds and
// store the canonical one.
func defaultPorts(ports []Port) {
	for i := range ports {
		ports[i].AppProtocol = strings.ToLower(ports[i].AppProtocol)
		if ports[i].AppProtocol == "" {
			ports[i].AppProtocol = ProtocolTCP
		}
	}
}

func (s *MeshServiceSpec) CloneSpec() Spec {
	c := *s
	c.Selector = MeshServiceSelector{DataplaneTags: maps.Clone(s.Selector.DataplaneTags), DataplaneLabels: s.Selector.DataplaneLabels.clone()}
	if r := s.Selector.DataplaneRef; r != nil {
		c.Selector.DataplaneRef = &DataplaneRef{Name: r.Name}
	}
	if d := s.Selector.Dataplane; d != nil {
		c.Selector.Dataplane = &DataplaneTagSelector{Tags: maps.Clone(d.Tags)}
	}
	c.Ports = clonePorts(s.Ports)
	c.Identities = slices.Clone(s.Identities)
	if s.Export != nil {
		e := *s.Export
		c.Export = &e
	}
	return &c
}

func clonePorts(ports []Port) []Port {
	if ports == nil {
		return nil
	}
	c := make([]Port, len(ports))
	for i, p := range ports {
		if p.TargetPort != nil {
			t := *p.TargetPort
			p.TargetPort = &t
		}
		c[i] = p
	}
	return c
}

// ---- MeshExternalService (seed 003) ----

// MeshExternalServiceSpec routes traffic that matches to a destination
// outside the mesh.
type MeshExternalServiceSpec struct {
	Match       []ExternalMatch      `json:"match"`
	Destination *ExternalDestination `json:"destination,omitempty"`
}

// Match types and destination types of seed 003.
const (
	MatchInternalVIP = "InternalVIP"
	MatchDomain      = "Domain"
	MatchCIDR        = "CIDR"
	MatchIP          = "IP"
	// MatchHostnameGenerator is Kuma's final model (the one match type of
	// Kuma 3.x): traffic to the names HostnameGenerators give the service,
	// on the given port. It has no value. Seed 003 weighed it ("using
	// HostnameGenerator for InternalVIP") and chose InternalVIP values; it
	// is accepted so that Kuma's documents can be stored as they are.
	MatchHostnameGenerator = "HostnameGenerator"

	DestinationRegular     = "Regular"
	DestinationPassthrough = "Passthrough"
	DestinationExtension   = "Extension"
)

// ExternalMatch is one kind of traffic the external service captures.
// Value is empty for MatchHostnameGenerator.
type ExternalMatch struct {
	Type     string `json:"type"`
	Value    string `json:"value,omitempty"`
	Port     int    `json:"port"`
	Protocol string `json:"protocol,omitempty"`
}

// ExternalDestination says where matched traffic goes.
type ExternalDestination struct {
	Type      string             `json:"type,omitempty"`
	Endpoints []ExternalEndpoint `json:"endpoints,omitempty"`
	TLS       *ExternalTLS       `json:"tls,omitempty"`
	Extension *Extension         `json:"extension,omitempty"`
}

// ExternalEndpoint is an IP, a domain name or a unix:// socket path.
type ExternalEndpoint struct {
	Address string `json:"address"`
	Port    int    `json:"port,omitempty"`
}

// ExternalTLS configures TLS origination by the proxy.
type ExternalTLS struct {
	Enabled            bool             `json:"enabled,omitempty"`
	Version            *TLSVersion      `json:"version,omitempty"`
	AllowRenegotiation bool             `json:"allowRenegotiation,omitempty"`
	Verification       *TLSVerification `json:"verification,omitempty"`
	CACert             *DataSource      `json:"caCert,omitempty"`
	ClientCert         *DataSource      `json:"clientCert,omitempty"`
	ClientKey          *DataSource      `json:"clientKey,omitempty"`
}

// TLS version names of seed 003.
const (
	TLSAuto = "TLS_AUTO"
	TLS10   = "TLSv1_0"
	TLS11   = "TLSv1_1"
	TLS12   = "TLSv1_2"
	TLS13   = "TLSv1_3"
)

// TLSVersion bounds the negotiated TLS version.
type TLSVersion struct {
	Min string `json:"min,omitempty"`
	Max string `json:"max,omitempty"`
}

// TLSVerification configures certificate verification. ServerName is
// the server name (SNI) the proxy sends and, without SubjectAltNames,
// the name it checks the certificate for; Kuma's field of that name, which
// seed 003 does not have.
type TLSVerification struct {
	Skip            bool     `json:"skip,omitempty"`
	ServerName      string   `json:"serverName,omitempty"`
	SubjectAltNames []string `json:"subjectAltNames,omitempty"`
}

// DataSource holds a certificate or key: exactly one of its fields is set.
type DataSource struct {
	Inline       *string `json:"inline,omitempty"` // base64
	InlineString *string `json:"inlineString,omitempty"`
	Secret       *string `json:"secret,omitempty"`
}

// Extension names a plugin and its free-form configuration.
type Extension struct {
	Type   string          `json:"type"`
	Config json.RawMessage `json:"config,omitempty"`
}

func (s *MeshExternalServiceSpec) Default() {
	// seed 003 lists the protocols in lower case; accept any case, as for
	// MeshService ports, and default to tcp as Kuma's API does.
	for i := range s.Match {
		s.Match[i].Protocol = strings.ToLower(s.Match[i].Protocol)
		if s.Match[i].Protocol == "" {
			s.Match[i].Protocol = ProtocolTCP
		}
	}
	if s.Destination == nil {
		s.Destination = &ExternalDestination{}
	}
	if s.Destination.Type == "" {
		s.Destination.Type = DestinationPassthrough
	}
	// An empty verification or version says nothing: store it as absent,
	// so that equal intent stores as an equal spec.
	if t := s.Destination.TLS; t != nil {
		if v := t.Verification; v != nil && !v.Skip && v.ServerName == "" && len(v.SubjectAltNames) == 0 {
			t.Verification = nil
		}
		if v := t.Version; v != nil && v.Min == "" && v.Max == "" {
			t.Version = nil
		}
	}
}

func (s *MeshExternalServiceSpec) CloneSpec() Spec {
	c := &MeshExternalServiceSpec{Match: slices.Clone(s.Match)}
	if d := s.Destination; d != nil {
		cd := &ExternalDestination{Type: d.Type, Endpoints: slices.Clone(d.Endpoints)}
		if d.Extension != nil {
			cd.Extension = &Extension{Type: d.Extension.Type, Config: slices.Clone(d.Extension.Config)}
		}
		if t := d.TLS; t != nil {
			ct := *t
			if t.Version != nil {
				v := *t.Version
				ct.Version = &v
			}
			if t.Verification != nil {
				ct.Verification = &TLSVerification{Skip: t.Verification.Skip, ServerName: t.Verification.ServerName, SubjectAltNames: slices.Clone(t.Verification.SubjectAltNames)}
			}
			ct.CACert, ct.ClientCert, ct.ClientKey = t.CACert.clone(), t.ClientCert.clone(), t.ClientKey.clone()
			cd.TLS = &ct
		}
		c.Destination = cd
	}
	return c
}

// Ports returns the ports the matches capture, each once, in increasing
// order.
func (s *MeshExternalServiceSpec) Ports() []int {
	ports := make([]int, 0, len(s.Match))
	for _, m := range s.Match {
		ports = append(ports, m.Port)
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

// ClusterNames returns the name of the cluster of each port the matches
// capture, in port order. Seed 003 names clusters `{policyName}_{port}`,
// because a port carries its own protocol configuration (validation keeps
// one protocol per port).
func (s *MeshExternalServiceSpec) ClusterNames(name string) []string {
	ports := s.Ports()
	out := make([]string, len(ports))
	for i, p := range ports {
		out[i] = name + "_" + strconv.Itoa(p)
	}
	return out
}

// Data returns the certificate or key a data source holds in the
// document: the decoded inline bytes or the inline string. It returns
// false for a secret (meshnames keeps no secrets) and for inline data
// that does not decode (refused by validation).
func (d *DataSource) Data() ([]byte, bool) {
	switch {
	case d == nil:
		return nil, false
	case d.Inline != nil:
		b, err := base64.StdEncoding.DecodeString(*d.Inline)
		return b, err == nil && len(b) > 0
	case d.InlineString != nil:
		return []byte(*d.InlineString), *d.InlineString != ""
	}
	return nil, false
}

func (d *DataSource) clone() *DataSource {
	if d == nil {
		return nil
	}
	return &DataSource{Inline: cloneStr(d.Inline), InlineString: cloneStr(d.InlineString), Secret: cloneStr(d.Secret)}
}

func cloneStr(s *string) *string {
	if s == nil {
		return nil
	}
	v := *s
	return &v
}

// ---- MeshMultiZoneService (seed 002) ----

// MeshMultiZoneServiceSpec groups MeshServices of several zones.
type MeshMultiZoneServiceSpec struct {
	Selector MultiZoneSelector `json:"selector"`
	// Ports, when set, are the ports the service offers; otherwise the
	// ports common to every selected MeshService (seed 002).
	Ports []Port `json:"ports,omitempty"`
}

// MultiZoneSelector selects MeshServices by label.
type MultiZoneSelector struct {
	MeshService *LabelSelector `json:"meshService"`
}

func (s *MeshMultiZoneServiceSpec) Default() {
	s.Selector.MeshService.normalize()
	defaultPorts(s.Ports)
}

func (s *MeshMultiZoneServiceSpec) CloneSpec() Spec {
	return &MeshMultiZoneServiceSpec{
		Selector: MultiZoneSelector{MeshService: s.Selector.MeshService.clone()},
		Ports:    clonePorts(s.Ports),
	}
}

// ---- HostnameGenerator (seeds 000, 001) ----

// HostnameGeneratorSpec renders hostnames for the services it selects.
type HostnameGeneratorSpec struct {
	Selector HostnameSelector `json:"selector"`
	Template string           `json:"template"`
}

// HostnameSelector selects services of exactly one kind.
type HostnameSelector struct {
	MeshService          *LabelSelector `json:"meshService,omitempty"`
	MeshExternalService  *LabelSelector `json:"meshExternalService,omitempty"`
	MeshMultiZoneService *LabelSelector `json:"meshMultiZoneService,omitempty"`
}

// Target returns the kind the selector selects and its label selector, or
// "" when not exactly one is set.
func (s *HostnameSelector) Target() (Kind, *LabelSelector) {
	var kind Kind
	var sel *LabelSelector
	n := 0
	for _, c := range []struct {
		k Kind
		s *LabelSelector
	}{{MeshService, s.MeshService}, {MeshExternalService, s.MeshExternalService}, {MeshMultiZoneService, s.MeshMultiZoneService}} {
		if c.s != nil {
			kind, sel = c.k, c.s
			n++
		}
	}
	if n != 1 {
		return "", nil
	}
	return kind, sel
}

func (s *HostnameGeneratorSpec) Default() {
	s.Selector.MeshService.normalize()
	s.Selector.MeshExternalService.normalize()
	s.Selector.MeshMultiZoneService.normalize()
}

func (s *HostnameGeneratorSpec) CloneSpec() Spec {
	return &HostnameGeneratorSpec{
		Template: s.Template,
		Selector: HostnameSelector{
			MeshService:          s.Selector.MeshService.clone(),
			MeshExternalService:  s.Selector.MeshExternalService.clone(),
			MeshMultiZoneService: s.Selector.MeshMultiZoneService.clone(),
		},
	}
}
