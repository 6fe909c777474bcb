// Package xds is meshnames' xDS control plane: it serves Envoy's v3
// Aggregated Discovery Service (state of the world and delta) so that
// proxies (Envoy, and proxyless gRPC clients) route the names and virtual
// IPs the rest of meshnames decides.
//
// # What a proxy gets
//
// A proxy is the Dataplane its node id names (`<mesh>.<name>`), or in env
// kubernetes the Pod it names (`<pod>.<namespace>`, kube.go). For every
// port of every service of its mesh it may reach (every one, or those its
// Dataplane lists in transparentProxying.reachableBackends) it gets:
//
//   - a Cluster and a ClusterLoadAssignment named <name>_msvc_<port>
//     (MeshService), <name>_mzsvc_<port> (MeshMultiZoneService) or
//     <name>_<port> (MeshExternalService, seed 003); service names are
//     DNS-1035 labels, so the underscore keeps them apart;
//   - an outbound Listener named outbound:<cluster>, on every VIP of the
//     service (the first as its address, the others as additional
//     addresses), not bound (transparent-proxy style): a TCP proxy for tcp
//     ports, an HTTP connection manager with one route for http, http2 and
//     grpc;
//   - for proxyless gRPC, an API listener named <hostname>:<port> for every
//     name the service holds, so that a grpc-go client dialing
//     xds:///<hostname>:<port> reaches it.
//
// Endpoints are the address and port of every Ready inbound of a local
// Dataplane that the service selects; for a MeshService made from a
// Kubernetes Service, those of the Service's EndpointSlices (kube.go).
//
// A MeshExternalService (extsvc.go, exttls.go, extlisteners.go) has the
// endpoints of its destination, or an ORIGINAL_DST cluster for
// Passthrough; the TLS the proxy originates, whose certificates and keys
// are Secrets sent by SDS on the same stream; listeners on the VIPs of
// its InternalVIP and HostnameGenerator matches; and filter chains for
// its Domain, IP and CIDR matches in a listener per port that the mesh's
// external services share (outbound:extsvc:<port>).
//
// A proxy that asks for it (node metadata dataplane.dns.port, or every
// Envoy with xds.dnsFilter.enabled) also gets a UDP listener with Envoy's
// DNS filter holding the names the DNS server answers in its mesh
// (dnsfilter.go), read from the DNS server's table through a NameSource.
//
// # How it is built
//
// Builder follows the cache (every instance, leader or not) and keeps one
// table per mesh that a proxy connected here uses: every resource,
// marshaled once into an Any with a version that is a hash of its content,
// so that every instance gives the same resource the same version. A
// mesh's first proxy waits while its table is built; the table goes
// IdleGrace after its last proxy, so meshes without proxies cost neither
// memory nor work. A change re-renders only the services
// it touches, bumps the mesh's generation and logs the names that changed.
// Streams are woken (never blocked) and send what changed since the
// generation they last sent: O(changes) per proxy, without a timer.
// What every Envoy subscribed with a wildcard (no names, no
// reachableBackends) gets in full is the same for all of them: it is
// built and encoded once per change of its type and shared, each stream
// adding only its nonce. Responses are encoded in wire.go and handed to
// gRPC as they are (the server's codec), not through proto.Marshal.
//
// The ADS server is written here over go-control-plane's API types rather
// than on its server and caches: its SnapshotCache keeps a snapshot per
// node and hashes marshaled resources per snapshot, its LinearCache serves
// one resource set per type to every node (no per-proxy selection for
// wildcard subscriptions), and its server hands the cache a new watch on
// every ACK, which makes each ACK a full diff of the proxy's resources.
//
// It imports api, cache, kubexds, resource, token and reconcile of this module. A
// Server is safe for concurrent use; each stream runs on its own two
// goroutines (receive, send) and reads the mesh tables under their locks,
// never holding one while it sends.
package xds
