package resource

import "slices"

// Address states (seed 000).
const (
	AddressAvailable    = "Available"
	AddressNotAvailable = "NotAvailable"
)

// Origin kinds of addresses: a HostnameGenerator rendered the name; a
// MeshExternalService wrote it as the value of an InternalVIP match (seed
// 003; the origin's name is then the service's own); or a ServiceTag
// identity of a MeshService gives it, as <tag>.<dns.serviceTagDomain> or
// as one of that name's DNS-compliant aliases (seed 004; the origin's name
// is then the tag). The hostnames controller decides them all, in one
// table of names per mesh.
const (
	OriginHostnameGenerator = "HostnameGenerator"
	OriginInternalVIP       = "MeshExternalService"
	OriginServiceTag        = "ServiceTag"
	OriginServiceTagAlias   = "ServiceTagAlias"
)

// VIP types (seed 000).
const (
	VIPKuma       = "Kuma"
	VIPKubernetes = "Kubernetes"
)

// Condition statuses.
const (
	ConditionTrue    = "True"
	ConditionFalse   = "False"
	ConditionUnknown = "Unknown"
)

// MeshMultiZoneService conditions, computed by every zone (seed 002;
// internal/mzservice). MeshServicesMatched is always present; PortsConsistent
// only while the ports of the matched MeshServices differ, so that a port
// is left out of status.ports.
const (
	ConditionMeshServicesMatched = "MeshServicesMatched"
	ReasonMatchesFound           = "MatchesFound"
	ReasonNoMatchesFound         = "NoMatchesFound"
	ConditionPortsConsistent     = "PortsConsistent"
	ReasonPortsDiffer            = "PortsDiffer"
)

// Conditions of the status of services, each written by one controller and
// read by others (DNS, the GUI, the CLI), so declared here once.
const (
	// VIPsAllocated is False while the VIP controller (internal/vips)
	// cannot give a service every VIP it needs; it is absent otherwise.
	ConditionVIPsAllocated = "VIPsAllocated"
	ReasonPoolExhausted    = "PoolExhausted"
	// Overlapping is True while a MeshExternalService's IP or CIDR matches
	// overlap another's (seed 003; internal/extsvc), or its Domain matches
	// name a domain another's name on the same port; absent otherwise.
	// The reason is OverlappingIPs when some overlap is of IPs.
	ConditionOverlapping     = "Overlapping"
	ReasonOverlappingIPs     = "OverlappingIPs"
	ReasonOverlappingDomains = "OverlappingDomains"
	// On a MeshService synthesised from Dataplanes (internal/meshservices),
	// PortsConsistent (ConditionPortsConsistent) is False while its
	// Dataplanes disagree on a port, and ExportModeConsistent while they
	// disagree on kuma.io/export-mode; each is absent otherwise.
	ReasonPortConflict            = "PortConflict"
	ConditionExportModeConsistent = "ExportModeConsistent"
	ReasonExportModeConflict      = "ExportModeConflict"
)

// ServiceStatus is the status of MeshService and MeshExternalService:
// hostnames (hostnames controller), VIPs (vips controller) and conditions.
type ServiceStatus struct {
	Addresses  []Address   `json:"addresses,omitempty"`
	VIPs       []VIP       `json:"vips,omitempty"`
	Conditions []Condition `json:"conditions,omitempty"`
}

// Address is one generated hostname and whether the service holds it.
type Address struct {
	Hostname string        `json:"hostname"`
	Status   string        `json:"status"`
	Origin   AddressOrigin `json:"origin"`
	Reason   string        `json:"reason,omitempty"`
}

// AddressOrigin names what generated an address.
type AddressOrigin struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// VIP is a virtual IP of a service. Hostname is set for MeshExternalService
// InternalVIP matches (seed 003).
type VIP struct {
	IP       string `json:"ip"`
	Type     string `json:"type"`
	Hostname string `json:"hostname,omitempty"`
}

// Condition reports one aspect of a resource's state.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Service returns s itself; it lets controllers treat the status of every
// service kind alike.
func (s *ServiceStatus) Service() *ServiceStatus { return s }

func (s *ServiceStatus) CloneStatus() Status { c := s.clone(); return &c }

func (s *ServiceStatus) clone() ServiceStatus {
	return ServiceStatus{
		Addresses:  slices.Clone(s.Addresses),
		VIPs:       slices.Clone(s.VIPs),
		Conditions: slices.Clone(s.Conditions),
	}
}

// MultiZoneServiceStatus adds what a zone computes for a MeshMultiZoneService.
type MultiZoneServiceStatus struct {
	ServiceStatus
	Ports        []Port           `json:"ports,omitempty"`
	Zones        []ZoneRef        `json:"zones,omitempty"`
	MeshServices []MeshServiceRef `json:"meshServices,omitempty"`
}

// ZoneRef names a zone.
type ZoneRef struct {
	Name string `json:"name"`
}

// MeshServiceRef names a MeshService selected by a MeshMultiZoneService.
type MeshServiceRef struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Zone      string `json:"zone,omitempty"`
	Mesh      string `json:"mesh"`
}

func (s *MultiZoneServiceStatus) Service() *ServiceStatus { return &s.ServiceStatus }

func (s *MultiZoneServiceStatus) CloneStatus() Status {
	return &MultiZoneServiceStatus{
		ServiceStatus: s.ServiceStatus.clone(),
		Ports:         clonePorts(s.Ports),
		Zones:         slices.Clone(s.Zones),
		MeshServices:  slices.Clone(s.MeshServices),
	}
}

// ServiceStatusOf is implemented by the status of every service kind.
type ServiceStatusOf interface {
	Status
	Service() *ServiceStatus
}

// ServiceStatusOrNew returns the status of a service object, or a new empty
// one of its kind when it has none yet.
func ServiceStatusOrNew(obj *Object) ServiceStatusOf {
	if st, ok := obj.Status.(ServiceStatusOf); ok && st != nil {
		return st
	}
	return MustLookup(obj.Kind).NewStatus().(ServiceStatusOf)
}
