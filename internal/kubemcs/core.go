// Package kubemcs implements the Multi-Cluster Services API (KEP-1645,
// multicluster.x-k8s.io/v1alpha1) in Kubernetes mode, when the cluster
// serves it: each ServiceExport gets the conditions Valid, Ready and
// Conflict (the Service controller, kubeservices, exports its Service's
// MeshService), and every service of other zones, and every
// MeshMultiZoneService, gets a ServiceImport of type ClusterSetIP named
// after it in its namespace, with the VIP and ports of the service DNS
// answers for `<name>.<namespace>.svc.clusterset.local` (HostnameGenerators
// this package creates name it). Without the API it does nothing and says
// so once in the log.
//
// The rules are pure (this file: Conditions and Import); Controller reads
// the cache and the two MCS collections and writes only what changed. It
// runs only on the leader. It imports resource, store, cache, admission,
// reconcile, crd and kubeapi.
package kubemcs

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/meshnames/meshnames/internal/resource"
)

// Condition types and reasons of a ServiceExport (KEP-1645).
const (
	CondValid    = "Valid"
	CondReady    = "Ready"
	CondConflict = "Conflict"

	ReasonValid              = "Valid"
	ReasonNoService          = "NoService"
	ReasonInvalidServiceType = "InvalidServiceType"
	ReasonNoMeshService      = "NoMeshService"
	ReasonExported           = "Exported"
	ReasonPending            = "Pending"
	ReasonPortConflict       = "PortConflict"
	ReasonNoConflicts        = "NoConflicts"
)

// Service is what the rules read of a MeshService or a
// MeshMultiZoneService.
type Service struct {
	Key     resource.Key
	Zone    string
	Ports   []resource.Port
	VIPs    []string
	Created time.Time
	// Exported is spec.export.mode All (MeshServices).
	Exported bool
	// Hostnames are its Available hostnames.
	Hostnames []string
	// Zones are the zones a MeshMultiZoneService spans.
	Zones []string
}

// Condition is one metav1.Condition of a ServiceExport.
type Condition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	Reason             string `json:"reason"`
	Message            string `json:"message"`
	LastTransitionTime string `json:"lastTransitionTime"`
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
}

// ExportInput is what a ServiceExport's conditions depend on.
type ExportInput struct {
	Namespace, Name string
	// Local is the MeshService made from the Service, nil when none.
	Local *Service
	// Missing says why there is none: ReasonNoService,
	// ReasonInvalidServiceType or ReasonNoMeshService, with a message.
	Missing, MissingMessage string
	// Remote are the other zones' MeshServices of the same name and
	// namespace.
	Remote []Service
	// Federated: this zone sends its services to a global.
	Federated bool
}

func cond(t string, ok bool, reason, msg string) Condition {
	s := "False"
	if ok {
		s = "True"
	}
	return Condition{Type: t, Status: s, Reason: reason, Message: msg}
}

// Conditions returns the conditions of a ServiceExport, without times.
func Conditions(in ExportInput) []Condition {
	if in.Local == nil {
		return []Condition{
			cond(CondValid, false, in.Missing, in.MissingMessage),
			cond(CondReady, false, ReasonPending, "no MeshService to export"),
			cond(CondConflict, false, ReasonNoConflicts, "no MeshService to compare"),
		}
	}
	name := in.Local.Key.Name
	out := []Condition{cond(CondValid, true, ReasonValid, fmt.Sprintf("the Service is MeshService %s of mesh %s", name, in.Local.Key.Mesh))}
	switch {
	case !in.Local.Exported:
		out = append(out, cond(CondReady, false, ReasonPending, fmt.Sprintf("MeshService %s is not exported yet", name)))
	case in.Federated:
		out = append(out, cond(CondReady, true, ReasonExported, fmt.Sprintf("MeshService %s is exported: the global control plane sends it to the other zones", name)))
	default:
		out = append(out, cond(CondReady, true, ReasonExported, fmt.Sprintf("MeshService %s is exported; this standalone zone has no other zones to send it to", name)))
	}
	if msgs := portConflicts(in.Local.Ports, in.Remote); len(msgs) > 0 {
		out = append(out, cond(CondConflict, true, ReasonPortConflict, strings.Join(msgs, "; ")))
	} else {
		out = append(out, cond(CondConflict, false, ReasonNoConflicts, fmt.Sprintf("the ports agree with the %d other zones exporting it", len(in.Remote))))
	}
	return out
}

// portConflicts describes where the other zones' ports cannot be merged
// with these: one port number with two application protocols, or one
// port name on two numbers.
func portConflicts(local []resource.Port, remote []Service) []string {
	var out []string
	for _, r := range sortedByZone(remote) {
		for _, lp := range local {
			for _, rp := range r.Ports {
				switch {
				case lp.Port == rp.Port && appProtocol(lp) != appProtocol(rp):
					out = append(out, fmt.Sprintf("port %d is %s here and %s in zone %s", lp.Port, appProtocol(lp), appProtocol(rp), r.Zone))
				case lp.Name != "" && lp.Name == rp.Name && lp.Port != rp.Port:
					out = append(out, fmt.Sprintf("port %q is %d here and %d in zone %s", lp.Name, lp.Port, rp.Port, r.Zone))
				}
			}
		}
	}
	return out
}

func appProtocol(p resource.Port) string {
	if p.AppProtocol == "" {
		return "tcp"
	}
	return p.AppProtocol
}

func sortedByZone(s []Service) []Service {
	s = slices.Clone(s)
	slices.SortFunc(s, func(a, b Service) int {
		return cmp.Or(cmp.Compare(a.Zone, b.Zone), cmp.Compare(a.Key.Name, b.Key.Name))
	})
	return s
}

// ClusterSetHostname is the name DNS answers for the ServiceImport
// name.namespace (KEP-1645).
func ClusterSetHostname(namespace, name string) string {
	return name + "." + namespace + ".svc.clusterset.local"
}

// ImportSpec is the spec of a ServiceImport.
type ImportSpec struct {
	Type  string       `json:"type"`
	IPs   []string     `json:"ips,omitempty"`
	Ports []ImportPort `json:"ports"`
}

// ImportPort is a port of a ServiceImport.
type ImportPort struct {
	Name        string `json:"name,omitempty"`
	Protocol    string `json:"protocol"`
	AppProtocol string `json:"appProtocol,omitempty"`
	Port        int    `json:"port"`
}

// ImportStatus is the status of a ServiceImport.
type ImportStatus struct {
	Clusters []Cluster `json:"clusters,omitempty"`
}

// Cluster names an exporting cluster (a zone).
type Cluster struct {
	Cluster string `json:"cluster"`
}

// Import returns the ServiceImport of namespace/name given its
// candidates (the other zones' MeshServices and the MeshMultiZoneServices
// of that name): the VIPs and ports of the one that holds the clusterset
// hostname (none yet: no IPs, the first candidate's ports), and every
// zone of every candidate. ok is false when there is no candidate.
func Import(namespace, name string, candidates []Service) (spec ImportSpec, status ImportStatus, ok bool) {
	if len(candidates) == 0 {
		return ImportSpec{}, ImportStatus{}, false
	}
	cs := slices.Clone(candidates)
	slices.SortFunc(cs, func(a, b Service) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.Zone, b.Zone), cmp.Compare(a.Key.Name, b.Key.Name))
	})
	holder := cs[0]
	h := ClusterSetHostname(namespace, name)
	held := false
	for _, c := range cs {
		if slices.Contains(c.Hostnames, h) {
			holder, held = c, true
			break
		}
	}
	spec = ImportSpec{Type: "ClusterSetIP", Ports: []ImportPort{}}
	if held {
		spec.IPs = orderedIPs(holder.VIPs)
	}
	for _, p := range holder.Ports {
		ip := ImportPort{Name: p.Name, Protocol: "TCP", Port: p.Port}
		if p.AppProtocol != "" && p.AppProtocol != "tcp" {
			ip.AppProtocol = p.AppProtocol
		}
		spec.Ports = append(spec.Ports, ip)
	}
	var zones []string
	for _, c := range cs {
		zones = append(zones, c.Zones...)
		if c.Zone != "" {
			zones = append(zones, c.Zone)
		}
	}
	slices.Sort(zones)
	for _, z := range slices.Compact(zones) {
		status.Clusters = append(status.Clusters, Cluster{Cluster: z})
	}
	return spec, status, true
}

// orderedIPs keeps at most one address of each family, IPv4 first, as
// spec.ips holds (at most two).
func orderedIPs(vips []string) []string {
	var v4, v6 string
	for _, s := range vips {
		a, err := netip.ParseAddr(s)
		switch {
		case err != nil:
		case a.Is4() && v4 == "":
			v4 = s
		case a.Is6() && v6 == "":
			v6 = s
		}
	}
	var out []string
	for _, s := range []string{v4, v6} {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
