package zonesync

import (
	"github.com/meshnames/meshnames/internal/resource"
)

// hashLen is the length of the hash suffix.
const hashLen = resource.HashLen

// Name limits: the names of service kinds become DNS labels in hostnames
// (RFC 1035: 63 bytes), the others are DNS subdomains (253 bytes).
const (
	maxServiceName = 63
	maxName        = 253
)

// HashedName is the name a resource gets where it is synced to:
// <name>-<hash>, where the hash covers mesh, name, zone and namespace (the
// MeshService multizone design record), each part written with its length
// before it (resource.Hash). The name part is shortened so that the whole
// fits 63 bytes for service kinds and 253 for the others (and its last
// label 63); the result depends only on the arguments.
func HashedName(kind resource.Kind, mesh, name, zone, namespace string) string {
	limit := maxName
	if d, ok := resource.Lookup(kind); ok && d.ServiceKind {
		limit = maxServiceName
	}
	return resource.WithHash(name, limit, mesh, name, zone, namespace)
}
