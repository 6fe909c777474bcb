package auth

import (
	"fmt"
	"slices"
	"strings"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/token"
)

// Class is what a request does, as far as the policy is concerned.
type Class int

const (
	// Public needs no identity: the index, health and readiness.
	Public Class = iota + 1
	// Read is a GET of resources, inspections, leadership or metrics.
	Read
	// Write is a PUT or DELETE of a resource of Action.Kind.
	Write
	// Tokens is the management of tokens and signing keys.
	Tokens
	// Audit is reading the audit log.
	Audit
	// History is reading the history of hostnames and VIPs.
	History
	// Backup is taking a backup of the whole store (GET /_backup): admin
	// only, and audited although it is a GET.
	Backup
	// Other is a path the policy does not know: GET is a Read, every
	// other method needs admin (new endpoints are closed by default).
	Other
)

// Action is a request as the policy sees it.
type Action struct {
	Class  Class
	Method string
	// Kind is the resource kind of a Read or Write of resources.
	Kind resource.Kind
	// Mesh is the mesh the request is in: the {mesh} of a mesh-scoped
	// path, or the name of a Mesh; empty for paths of no mesh.
	Mesh string
	// AllMeshes marks a read across every mesh (/meshservices), which a
	// token limited to meshes may not make.
	AllMeshes bool
}

// Denial is a refusal by the policy: 403 with the reason.
type Denial struct{ Reason string }

func (d *Denial) Error() string { return d.Reason }

func deny(format string, args ...any) *Denial { return &Denial{Reason: fmt.Sprintf(format, args...)} }

// writers lists, per kind, the roles that may write it. Seed 000: only the
// mesh operator manages HostnameGenerators ("otherwise one service owner
// can override a hostname of another service"); Meshes, Zones,
// ZoneIngresses and MeshMultiZoneServices are the operator's too.
var writers = map[resource.Kind][]token.Role{
	resource.Mesh:                 {token.RoleAdmin, token.RoleOperator},
	resource.Zone:                 {token.RoleAdmin, token.RoleOperator},
	resource.ZoneIngress:          {token.RoleAdmin, token.RoleOperator},
	resource.HostnameGenerator:    {token.RoleAdmin, token.RoleOperator},
	resource.MeshMultiZoneService: {token.RoleAdmin, token.RoleOperator},
	resource.MeshService:          {token.RoleAdmin, token.RoleOperator, token.RoleServiceOwner},
	resource.MeshExternalService:  {token.RoleAdmin, token.RoleOperator, token.RoleServiceOwner},
	resource.Dataplane:            {token.RoleAdmin, token.RoleOperator, token.RoleServiceOwner},
}

// Writers returns the roles that may write kind k (admin and operator for
// a kind the policy does not list).
func Writers(k resource.Kind) []token.Role {
	if w, ok := writers[k]; ok {
		return w
	}
	return []token.Role{token.RoleAdmin, token.RoleOperator}
}

// Authorize decides whether id may do a. It returns nil or a *Denial
// that says why not.
func Authorize(id Identity, a Action) error {
	if a.Class == Public {
		return nil
	}
	switch id.Role {
	case token.RoleZone:
		return deny("a zone token identifies a zone to the sync endpoint of its global (gRPC on the sync port); it is not accepted on the REST API")
	case token.RoleDataplane, token.RoleIngress:
		return deny("a %s token identifies a proxy to the xDS control plane (gRPC on the xDS port); it is not accepted on the REST API", id.Role)
	case token.RoleAdmin, token.RoleOperator, token.RoleServiceOwner, token.RoleReadOnly:
	default:
		return deny("unknown role %q", id.Role)
	}
	class := a.Class
	if class == Other {
		if a.Method == "GET" || a.Method == "HEAD" {
			class = Read
		} else if id.Role != token.RoleAdmin {
			return deny("only admin may %s this path", a.Method)
		}
	}
	switch class {
	case Read:
		if a.AllMeshes && len(id.Meshes) > 0 {
			return deny("this token is limited to meshes %s; list them mesh by mesh (/meshes/{mesh}/...)", strings.Join(id.Meshes, ", "))
		}
		return id.inMeshes(a.Mesh)
	case Write:
		if !slices.Contains(Writers(a.Kind), id.Role) {
			return deny("role %s may not write %s resources; %s may", id.Role, a.Kind, roleNames(Writers(a.Kind)))
		}
		if len(id.Meshes) > 0 {
			if d, ok := resource.Lookup(a.Kind); ok && !d.MeshScoped && a.Kind != resource.Mesh {
				return deny("this token is limited to meshes %s; %s resources apply to every mesh, so it may not write them", strings.Join(id.Meshes, ", "), a.Kind)
			}
		}
		return id.inMeshes(a.Mesh)
	case Tokens:
		if id.Role != token.RoleAdmin {
			return deny("only admin may manage tokens")
		}
	case Backup:
		if id.Role != token.RoleAdmin {
			return deny("only admin may take a backup: it holds every mesh and the keys that sign tokens")
		}
	case Audit:
		if id.Role == token.RoleServiceOwner {
			return deny("role service-owner may not read the audit log; admin, operator and read-only may")
		}
		if len(id.Meshes) > 0 {
			return deny("the audit log spans every mesh; a token limited to meshes %s may not read it", strings.Join(id.Meshes, ", "))
		}
	case History:
		// Every user role; the handler shows a token limited to meshes
		// only the events of its meshes.
	}
	return nil
}

// inMeshes refuses a mesh outside a token limited to meshes.
func (id Identity) inMeshes(mesh string) error {
	if mesh == "" || len(id.Meshes) == 0 || slices.Contains(id.Meshes, mesh) {
		return nil
	}
	return deny("this token is limited to meshes %s; mesh %q is not one of them", strings.Join(id.Meshes, ", "), mesh)
}

// AllowsMesh reports whether id may see mesh (a token not limited to
// meshes sees all).
func (id Identity) AllowsMesh(mesh string) bool {
	return len(id.Meshes) == 0 || slices.Contains(id.Meshes, mesh)
}

// roleNames lists roles in prose: "admin, operator and service-owner".
func roleNames(rs []token.Role) string {
	var names []string
	for _, r := range rs {
		names = append(names, string(r))
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
