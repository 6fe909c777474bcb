// Package zonesyncv1 is the generated Go code of the zone sync protocol
// (zonesync.proto): the messages a global control plane and its zones
// exchange on one bidirectional gRPC stream per zone. internal/zonesync
// owns the behaviour; regenerate with api/generate.sh.
//
// It imports no package of this module.
package zonesyncv1
