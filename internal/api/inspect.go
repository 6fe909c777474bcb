package api

import (
	"net/netip"
	"time"

	"github.com/meshnames/meshnames/internal/resource"
)

// What the parts that own a fact let the GUI (and any other reader) see of
// it: the DNS table (internal/dnsserver) and the VIP pools (internal/vips).

// DNSMatch is one mesh's records of a name.
type DNSMatch struct {
	Mesh string
	Name DNSName
}

// VIPPool is the usage of one VIP pool.
type VIPPool struct {
	Kind        resource.Kind
	Prefix      netip.Prefix
	Size        uint64 // usable addresses
	Used        uint64
	Quarantined uint64
}

// VIPState is what the VIP pools know of one address.
type VIPState struct {
	// Pool is the kind whose pool holds the address, empty when none does.
	Pool   resource.Kind
	Prefix netip.Prefix
	// Allocated is true while a service holds it; QuarantinedUntil is set
	// while it is in quarantine after its service let it go.
	Allocated        bool
	QuarantinedUntil time.Time
}
