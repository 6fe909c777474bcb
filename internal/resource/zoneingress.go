package resource

import (
	"net"
	"strconv"

	"github.com/meshnames/meshnames/internal/validate"
)

// ---- ZoneIngress (seed 002) ----

// ZoneIngressSpec is a zone's ingress proxy: where it listens, and where
// the proxies of other zones reach it. Seed 002 points the clusters of a
// service synced from another zone at that zone's ZoneIngress. It is not
// mesh-scoped (one ingress serves every mesh of its zone), and its zone is
// its kuma.io/zone label, which the control plane sets on write.
type ZoneIngressSpec struct {
	Networking ZoneIngressNetworking `json:"networking"`
}

// ZoneIngressNetworking is Kuma's ZoneIngress networking without the
// Envoy admin port, which meshnames has no use for.
type ZoneIngressNetworking struct {
	// Address and Port are where the ingress proxy listens.
	Address string `json:"address"`
	// AdvertisedAddress and AdvertisedPort, set together or not at all,
	// are where the proxies of other zones reach it when that is not
	// Address and Port (a load balancer or a NAT in front of it).
	AdvertisedAddress string `json:"advertisedAddress,omitempty"`
	Port              int    `json:"port"`
	AdvertisedPort    int    `json:"advertisedPort,omitempty"`
}

func (s *ZoneIngressSpec) Default() {}

func (s *ZoneIngressSpec) CloneSpec() Spec {
	c := *s
	return &c
}

// Reachable returns the address and port the proxies of other zones are
// given for this ingress: the advertised ones when set, else the address
// and port it listens on. Kuma skips an ingress without an advertised
// address; meshnames takes the address it listens on as reachable, since
// nothing else says where it is.
func (s *ZoneIngressSpec) Reachable() (address string, port int) {
	n := s.Networking
	if n.AdvertisedAddress != "" {
		return n.AdvertisedAddress, n.AdvertisedPort
	}
	return n.Address, n.Port
}

// HostPort joins an address and a port as host:port ("[::1]:10001" for
// an IPv6 address), or returns "" when the address is empty.
func HostPort(address string, port int) string {
	if address == "" {
		return ""
	}
	return net.JoinHostPort(address, strconv.Itoa(port))
}

// Validate checks the addresses and ports. The rules are Kuma's (an
// advertised address and port are given together or not at all), and
// stricter where Kuma is lenient: the address is required, since an
// ingress without one cannot be reached, and no address may be
// unspecified (0.0.0.0 or ::).
func (s *ZoneIngressSpec) Validate(p validate.Path) validate.Errors {
	var errs validate.Errors
	np := p.Field("networking")
	n := s.Networking
	checkProxyAddress(&errs, np.Field("address"), n.Address)
	errs.Check(np.Field("port"), validate.Port(n.Port))
	switch {
	case n.AdvertisedAddress == "" && n.AdvertisedPort == 0:
	case n.AdvertisedAddress == "":
		errs.Add(np.Field("advertisedAddress"), "must be set together with advertisedPort: other zones need both, or neither to reach the ingress at address and port")
	case n.AdvertisedPort == 0:
		errs.Add(np.Field("advertisedPort"), "must be set together with advertisedAddress: other zones need both, or neither to reach the ingress at address and port")
	}
	if n.AdvertisedAddress != "" {
		checkProxyAddress(&errs, np.Field("advertisedAddress"), n.AdvertisedAddress)
	}
	if n.AdvertisedPort != 0 {
		errs.Check(np.Field("advertisedPort"), validate.Port(n.AdvertisedPort))
	}
	return errs
}
