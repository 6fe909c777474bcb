package kuma

import (
	"time"

	"github.com/meshnames/meshnames/internal/resource"
)

// The wire shapes of Kuma 3.x, written from Kuma's published REST reference
// and the facts recorded in kuma-facts.md section 23. The same types are
// decoded (strictly, with field paths) from what kumactl sends and encoded
// for what it reads. Fields typed any are Kuma 2.x or native spellings that
// Kuma 3.x does not have: decoding refuses them with a hint
// (refuseLegacy), and they are never set on output.

// Meta is the envelope of every Kuma document.
type Meta struct {
	Type             string            `json:"type"`
	Mesh             string            `json:"mesh,omitempty"`
	Name             string            `json:"name"`
	CreationTime     *time.Time        `json:"creationTime,omitempty"`
	ModificationTime *time.Time        `json:"modificationTime,omitempty"`
	Labels           map[string]string `json:"labels,omitempty"`
	// KRI and SNIs are computed from the name, mesh and labels on output
	// and ignored on input.
	KRI  string `json:"kri,omitempty"`
	SNIs []SNI  `json:"snis,omitempty"`
	// Meshnames lists what the native resource holds that this Kuma view
	// leaves out; absent when the view is complete. Ignored on input.
	Meshnames *Extra `json:"meshnames,omitempty"`
}

// SNI is the server name of one port of a service kind (Kuma 2.14+).
type SNI struct {
	Port int    `json:"port"`
	SNI  string `json:"sni"`
}

// Extra is meshnames' own addition to a Kuma document: what the Kuma shape
// cannot carry, and where the whole resource can be read.
type Extra struct {
	// Native is the path of the resource on the native API.
	Native string `json:"native"`
	// Omitted are the native fields this view leaves out. A write through
	// the adapter would remove them, so it is refused while they are set.
	Omitted []Omission `json:"omitted"`
}

// Omission is one native field a Kuma document cannot carry.
type Omission struct {
	// Field is the path in the native document (spec.selector.dataplaneTags).
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// The documents of each kind. Meshes, Zones and Dataplanes are flat in
// Kuma: their spec fields sit next to the envelope.
type (
	meshDoc struct {
		Meta
	}
	zoneDoc struct {
		Meta
		Enabled *bool `json:"enabled,omitempty"`
	}
	dataplaneDoc struct {
		Meta
		Networking *Networking `json:"networking,omitempty"`
	}
	meshServiceDoc struct {
		Meta
		Spec   *MeshServiceSpec `json:"spec,omitempty"`
		Status *ServiceStatus   `json:"status,omitempty"`
	}
	meshExternalServiceDoc struct {
		Meta
		Spec   *MeshExternalServiceSpec `json:"spec,omitempty"`
		Status *ServiceStatus           `json:"status,omitempty"`
	}
	meshMultiZoneServiceDoc struct {
		Meta
		Spec   *MeshMultiZoneServiceSpec `json:"spec,omitempty"`
		Status *ServiceStatus            `json:"status,omitempty"`
	}
	hostnameGeneratorDoc struct {
		Meta
		Spec *HostnameGeneratorSpec `json:"spec,omitempty"`
	}
	// zoneIngressDoc is flat like a Dataplane. Zone is the kuma.io/zone
	// label (Kuma's control plane sets both); availableServices is what
	// Kuma's control plane computes for the ingress, ignored on input and
	// never set on output (meshnames does not compute it).
	zoneIngressDoc struct {
		Meta
		Zone              string                 `json:"zone,omitempty"`
		Networking        *ZoneIngressNetworking `json:"networking,omitempty"`
		AvailableServices any                    `json:"availableServices,omitempty"`
	}
)

// ZoneIngressNetworking is Kuma's ZoneIngress networking. Admin (the
// Envoy admin port) is refused: meshnames keeps none.
type ZoneIngressNetworking struct {
	Address           string `json:"address"`
	AdvertisedAddress string `json:"advertisedAddress,omitempty"`
	Port              int    `json:"port"`
	AdvertisedPort    int    `json:"advertisedPort,omitempty"`
	Admin             any    `json:"admin,omitempty"`
}

// Networking is a Kuma 3.x Dataplane's networking, as far as meshnames
// keeps it: the address and the inbounds.
type Networking struct {
	Address string    `json:"address"`
	Inbound []Inbound `json:"inbound,omitempty"`
}

// Inbound is a Kuma 3.x inbound: no tags, the service comes from the
// Dataplane's labels.
type Inbound struct {
	Port           int    `json:"port"`
	ServicePort    int    `json:"servicePort,omitempty"`
	ServiceAddress string `json:"serviceAddress,omitempty"`
	Name           string `json:"name,omitempty" decode:"nonempty"`
	Tags           any    `json:"tags,omitempty"` // Kuma 2.x: refused
}

// LabelSelector is Kuma's {matchLabels}.
type LabelSelector struct {
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

// MeshServiceSpec is Kuma 3.x's MeshService spec.
type MeshServiceSpec struct {
	Selector   *MeshServiceSelector `json:"selector,omitempty"`
	Ports      []resource.Port      `json:"ports,omitempty"`
	Identities []resource.Identity  `json:"identities,omitempty"`
	State      string               `json:"state,omitempty"`
	Export     any                  `json:"export,omitempty"` // native only: refused
}

// MeshServiceSelector is Kuma 3.x's: a Dataplane by name or by labels.
type MeshServiceSelector struct {
	DataplaneRef    *resource.DataplaneRef `json:"dataplaneRef,omitempty"`
	DataplaneLabels *LabelSelector         `json:"dataplaneLabels,omitempty"`
	DataplaneTags   any                    `json:"dataplaneTags,omitempty"` // Kuma 2.x: refused
}

// MeshMultiZoneServiceSpec is Kuma's MeshMultiZoneService spec.
type MeshMultiZoneServiceSpec struct {
	Selector *MultiZoneSelector `json:"selector,omitempty"`
	Ports    []resource.Port    `json:"ports,omitempty"`
}

// MultiZoneSelector selects MeshServices by labels.
type MultiZoneSelector struct {
	MeshService *LabelSelector `json:"meshService,omitempty"`
}

// HostnameGeneratorSpec is Kuma's HostnameGenerator spec.
type HostnameGeneratorSpec struct {
	Selector  *HostnameSelector `json:"selector,omitempty"`
	Template  string            `json:"template"`
	Extension any               `json:"extension,omitempty"` // Kuma only: refused
}

// HostnameSelector selects the services of one kind.
type HostnameSelector struct {
	MeshService          *LabelSelector `json:"meshService,omitempty"`
	MeshExternalService  *LabelSelector `json:"meshExternalService,omitempty"`
	MeshMultiZoneService *LabelSelector `json:"meshMultiZoneService,omitempty"`
}

// MeshExternalServiceSpec is Kuma's final MeshExternalService: one match
// of type HostnameGenerator and the destination's fields at the top.
type MeshExternalServiceSpec struct {
	Match     *Match              `json:"match,omitempty"`
	Endpoints []Endpoint          `json:"endpoints,omitempty"`
	TLS       *TLS                `json:"tls,omitempty"`
	Extension *resource.Extension `json:"extension,omitempty"`
}

// Match is the traffic a Kuma MeshExternalService captures.
type Match struct {
	Type     string `json:"type,omitempty"`
	Port     int    `json:"port"`
	Protocol string `json:"protocol,omitempty"`
}

// Endpoint is a destination address.
type Endpoint struct {
	Address  string `json:"address"`
	Port     int    `json:"port,omitempty"`
	Priority *int   `json:"priority,omitempty"` // Kuma only: refused
}

// TLS is Kuma's TLS origination: versions named TLS12, certificates under
// verification.
type TLS struct {
	Enabled            bool          `json:"enabled,omitempty"`
	Version            *TLSVersion   `json:"version,omitempty"`
	AllowRenegotiation bool          `json:"allowRenegotiation,omitempty"`
	Verification       *Verification `json:"verification,omitempty"`
}

// TLSVersion bounds the TLS version (TLSAuto, TLS10 ... TLS13).
type TLSVersion struct {
	Min string `json:"min,omitempty"`
	Max string `json:"max,omitempty"`
}

// Verification is Kuma's certificate verification.
type Verification struct {
	Mode            string        `json:"mode,omitempty"`
	ServerName      *string       `json:"serverName,omitempty"`
	SubjectAltNames []SAN         `json:"subjectAltNames,omitempty"`
	CACert          *SecureSource `json:"caCert,omitempty"`
	ClientCert      *SecureSource `json:"clientCert,omitempty"`
	ClientKey       *SecureSource `json:"clientKey,omitempty"`
}

// SAN is a subject alternative name to match.
type SAN struct {
	Type  string `json:"type,omitempty"`
	Value string `json:"value"`
}

// SecureSource is Kuma 3.0's data source of a certificate or key.
type SecureSource struct {
	Type           string     `json:"type,omitempty"`
	SecretRef      *SecretRef `json:"secretRef,omitempty"`
	InsecureInline *Inline    `json:"insecureInline,omitempty"`
	File           any        `json:"file,omitempty"`   // refused
	EnvVar         any        `json:"envVar,omitempty"` // refused
}

// SecretRef names a secret.
type SecretRef struct {
	Kind string `json:"kind,omitempty"`
	Name string `json:"name"`
}

// Inline is data given in the document.
type Inline struct {
	Value string `json:"value"`
}

// ServiceStatus is the status of the three service kinds in Kuma's layout:
// the names in use in addresses, each generator's outcome in
// hostnameGenerators, VIPs as a list (MeshService, MeshMultiZoneService) or
// one vip (MeshExternalService).
type ServiceStatus struct {
	Addresses          []Address          `json:"addresses,omitempty"`
	VIPs               []VIP              `json:"vips,omitempty"`
	VIP                *VIP               `json:"vip,omitempty"`
	HostnameGenerators []GeneratorOutcome `json:"hostnameGenerators,omitempty"`
	// MeshMultiZoneService only.
	MeshServices []resource.MeshServiceRef `json:"meshServices,omitempty"`
	Conditions   []Condition               `json:"conditions,omitempty"`
}

// Address is a hostname in use.
type Address struct {
	Hostname             string `json:"hostname"`
	Origin               string `json:"origin"`
	HostnameGeneratorRef *Ref   `json:"hostnameGeneratorRef,omitempty"`
}

// Ref names a HostnameGenerator.
type Ref struct {
	CoreName string `json:"coreName"`
}

// VIP is a virtual IP.
type VIP struct {
	IP string `json:"ip"`
}

// GeneratorOutcome is what one HostnameGenerator did for the service.
type GeneratorOutcome struct {
	HostnameGeneratorRef Ref         `json:"hostnameGeneratorRef"`
	Conditions           []Condition `json:"conditions"`
}

// Condition is Kubernetes-style; every field is present, message may be
// empty.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Condition type and reasons of hostname generation in Kuma.
const (
	ConditionGenerated = "Generated"
	ReasonGenerated    = "Generated"
	ReasonCollision    = "Collision"
	ReasonTemplate     = "TemplateError"
)
