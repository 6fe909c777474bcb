// Package api holds the bodies of the REST API's own endpoints (the
// server's description, leadership, inspections), shared by the server that
// writes them and the client that reads them so that the two cannot drift.
// Resources themselves are resource.Object.
//
// It imports resource and validate only.
package api

import (
	"time"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/validate"
)

// Info is the body of GET /.
type Info struct {
	Product string `json:"product"`
	Version string `json:"version"`
	Mode    string `json:"mode"`
	Zone    string `json:"zone,omitempty"`
}

// LeaderStatus is the body of GET /_leader: who leads (runs the
// controllers) and whether this instance does.
type LeaderStatus struct {
	// Election is "lease" (instances sharing PostgreSQL elect a leader with
	// a lease), "kubernetes" (instances on one Kubernetes cluster elect one
	// with the Lease meshnames-leader) or "local" (the embedded store's
	// single process leads).
	Election string `json:"election"`
	// Holder is the instance that holds the lease (empty when none has
	// yet), Term the lease's term, which increases with every change of
	// holder, and ExpiresAt when the lease runs out unless renewed, by the
	// database's clock. A lease that has run out has no leader until
	// another instance takes it.
	Holder    string    `json:"holder,omitempty"`
	Term      int64     `json:"term,omitempty"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	// Self identifies this instance; Leading says whether it leads now.
	Self    string `json:"self"`
	Leading bool   `json:"leading"`
}

// HostnamesReport is the body of GET /meshes/{mesh}/{kind}/{name}/_hostnames:
// what every HostnameGenerator makes of one service, in precedence order.
type HostnamesReport struct {
	Kind  resource.Kind     `json:"kind"`
	Mesh  string            `json:"mesh"`
	Name  string            `json:"name"`
	Items []HostnameOutcome `json:"items"`
}

// HostnameOutcome is one generator's result for the service.
type HostnameOutcome struct {
	Generator string `json:"generator"`
	// Selects tells whether the generator selects the service.
	Selects  bool   `json:"selects"`
	Hostname string `json:"hostname,omitempty"`
	// Status is Available or NotAvailable as the controller decided, or
	// Pending when it has not written this service's status yet.
	Status string `json:"status,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Zone is the zone whose control plane gives the name, on a global
	// control plane, which computes no hostnames: what the service's zone
	// reported in its status. Empty elsewhere.
	Zone string `json:"zone,omitempty"`
}

// StatusPending marks an outcome the controller has not decided yet.
const StatusPending = "Pending"

// DNSListing is the body of GET /meshes/{mesh}/_dns: every name this
// instance's DNS server answers in the mesh, and the names a service would
// have but that are not answered, with the reason (seed 004's listing).
type DNSListing struct {
	Mesh        string         `json:"mesh"`
	Names       []DNSName      `json:"names"`
	NotAnswered []DNSNotAnswer `json:"notAnswered"`
}

// DNSName is one answered name.
type DNSName struct {
	Name    string        `json:"name"`
	Types   []string      `json:"types"`
	A       []string      `json:"a,omitempty"`
	AAAA    []string      `json:"aaaa,omitempty"`
	SRV     []string      `json:"srv,omitempty"`
	Kind    resource.Kind `json:"kind"`
	Service string        `json:"service"`
	// Source is hostname, internalVIP, serviceTag or alias.
	Source string `json:"source"`
}

// DNSNotAnswer is a name that is not answered.
type DNSNotAnswer struct {
	Name    string        `json:"name"`
	Kind    resource.Kind `json:"kind"`
	Service string        `json:"service"`
	Source  string        `json:"source,omitempty"`
	Reason  string        `json:"reason"`
}

// ServiceTagsReport is the body of GET /meshes/{mesh}/_servicetags: every
// kuma.io/service tag of the mesh's Dataplanes with the MeshService
// synthesised for it, or why there is none; and the synthesised
// MeshServices without Dataplanes, with when they will be deleted.
type ServiceTagsReport struct {
	Mesh string       `json:"mesh"`
	Tags []ServiceTag `json:"tags"`
}

// ServiceTag is one kuma.io/service tag of a mesh's Dataplanes and the
// MeshService synthesised for it, or why it has none; or a synthesised
// MeshService left without Dataplanes.
type ServiceTag struct {
	Tag string `json:"tag"`
	// Name of its MeshService; empty when Blocked.
	Name string `json:"name,omitempty"`
	// Dataplanes carrying the tag, oldest first.
	Dataplanes []string        `json:"dataplanes,omitempty"`
	Ports      []resource.Port `json:"ports,omitempty"`
	ExportMode string          `json:"exportMode,omitempty"`
	// Conditions are those of resource.ConditionPortsConsistent and
	// resource.ConditionExportModeConsistent that do not hold.
	Conditions []resource.Condition `json:"conditions,omitempty"`
	// Blocked says why the tag has no MeshService.
	Blocked string `json:"blocked,omitempty"`
	// DeletionAt is when a MeshService without Dataplanes goes away.
	DeletionAt time.Time `json:"deletionAt,omitzero"`
	// Retiring says the MeshService has no Dataplane left; DeletionAt is
	// zero until the leader has started its grace period.
	Retiring bool `json:"retiring,omitempty"`
}

// Error is the body of every error response, on the native API and on the
// Kuma adapter: a title, an optional detail, and for invalid input one
// cause per violated rule. It carries Kuma's fields too (type, details,
// invalid_parameters; see WithKumaFields), because kumactl prints
// invalid_parameters and not causes.
type Error struct {
	// Type is Kuma's problem type, always ErrorType.
	Type   string               `json:"type"`
	Status int                  `json:"status"`
	Title  string               `json:"title"`
	Detail string               `json:"detail,omitempty"`
	Causes []validate.Violation `json:"causes,omitempty"`
	// Details repeats Detail under Kuma's older name.
	Details string `json:"details,omitempty"`
	// InvalidParameters repeats Causes in Kuma's shape.
	InvalidParameters []InvalidParameter `json:"invalid_parameters,omitempty"`
}

// ErrorType is the type of every error body (Kuma's).
const ErrorType = "/std-errors"

// InvalidParameter is one violated rule in Kuma's error shape.
type InvalidParameter struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

func (e *Error) Error() string {
	if e.Detail != "" {
		return e.Title + ": " + e.Detail
	}
	return e.Title
}

// WithKumaFields returns a copy of e with Kuma's fields filled in from the
// native ones, as it is sent.
func (e *Error) WithKumaFields() *Error {
	c := *e
	c.Type = ErrorType
	c.Details = e.Detail
	c.InvalidParameters = nil
	for _, v := range e.Causes {
		c.InvalidParameters = append(c.InvalidParameters, InvalidParameter{Field: v.Field, Reason: v.Message})
	}
	return &c
}

// ApplyRequest is the body of POST /_apply: resources to admit together.
// With ?dryRun=true nothing is written: the server answers what writing
// them would do (apply's check before it writes anything, and dry runs).
type ApplyRequest struct {
	Items []*resource.Object `json:"items"`
}

// ApplyReport is the body of the answer to POST /_apply, one result per
// item in the order of the request.
type ApplyReport struct {
	Items []ApplyResult `json:"items"`
	// Problems counts the items that cannot be written.
	Problems int `json:"problems"`
	// Changes are the hostnames and VIPs services would gain or lose if
	// every item were written, as the controllers would decide them now;
	// only when there is no problem, and only when the server can tell
	// (a control plane that runs controllers).
	Changes []NameChange `json:"changes,omitempty"`
}

// ApplyResult is the outcome of one item: what its write does (created,
// updated, unchanged), or why it cannot be written - the rules it breaks
// (Causes) or another refusal (Error, such as a read-only resource).
type ApplyResult struct {
	Result string `json:"result,omitempty"`
	// Object is the resource as it would be stored (defaults and the
	// labels the control plane sets), when it would be created or updated.
	Object *resource.Object     `json:"object,omitempty"`
	Causes []validate.Violation `json:"causes,omitempty"`
	Error  string               `json:"error,omitempty"`
}

// NameChange is a hostname or a VIP that a service would gain or lose if
// the items of a dry run were written (POST /_apply?dryRun=true).
type NameChange struct {
	Kind resource.Kind `json:"kind"`
	Mesh string        `json:"mesh"`
	Name string        `json:"name"`
	// A VIP of an InternalVIP value carries the value in Hostname.
	Hostname string `json:"hostname,omitempty"`
	VIP      string `json:"vip,omitempty"`
	// Change is ChangeGains, ChangeLoses, or ChangeRefused for a hostname
	// the service would want and not get, with the reason.
	Change string `json:"change"`
	Reason string `json:"reason,omitempty"`
}

// Changes of NameChange.
const (
	ChangeGains   = "gains"
	ChangeLoses   = "loses"
	ChangeRefused = "refused"
)

// NameChanges compares what a service of kind k, mesh and name holds in
// status before (nil for a new service) with after: the hostnames it
// gains or loses (Available ones), the ones it would be refused (newly
// NotAvailable), and the VIPs it gains or loses.
func NameChanges(key resource.Key, before, after resource.Status) []NameChange {
	svc := func(st resource.Status) *resource.ServiceStatus {
		if s, ok := st.(resource.ServiceStatusOf); ok && s != nil {
			return s.Service()
		}
		return &resource.ServiceStatus{}
	}
	b, a := svc(before), svc(after)
	hosts := func(s *resource.ServiceStatus, status string) map[string]string {
		m := map[string]string{}
		for _, addr := range s.Addresses {
			if addr.Status == status {
				m[addr.Hostname] = addr.Reason
			}
		}
		return m
	}
	ips := func(s *resource.ServiceStatus) map[string]bool {
		m := map[string]bool{}
		for _, v := range s.VIPs {
			m[v.IP] = true
		}
		return m
	}
	var out []NameChange
	change := func(host, vip, c, reason string) {
		out = append(out, NameChange{Kind: key.Kind, Mesh: key.Mesh, Name: key.Name, Hostname: host, VIP: vip, Change: c, Reason: reason})
	}
	bAvail, aAvail := hosts(b, resource.AddressAvailable), hosts(a, resource.AddressAvailable)
	bRefused, aRefused := hosts(b, resource.AddressNotAvailable), hosts(a, resource.AddressNotAvailable)
	for _, addr := range a.Addresses {
		h := addr.Hostname
		if _, had := bAvail[h]; addr.Status == resource.AddressAvailable && !had {
			change(h, "", ChangeGains, "")
		}
		if _, had := bRefused[h]; addr.Status == resource.AddressNotAvailable && !had {
			change(h, "", ChangeRefused, aRefused[h])
		}
	}
	for _, addr := range b.Addresses {
		if _, still := aAvail[addr.Hostname]; addr.Status == resource.AddressAvailable && !still {
			change(addr.Hostname, "", ChangeLoses, "")
		}
	}
	bIPs, aIPs := ips(b), ips(a)
	for _, v := range a.VIPs {
		if !bIPs[v.IP] {
			change(v.Hostname, v.IP, ChangeGains, "")
		}
	}
	for _, v := range b.VIPs {
		if !aIPs[v.IP] {
			change(v.Hostname, v.IP, ChangeLoses, "")
		}
	}
	return out
}
