// Package zonesync owns the sync between a global control plane and its
// zones (the MeshService multizone design record; ARCHITECTURE.md section
// 7): the gRPC server every global instance runs (Global), the client a
// zone runs while it leads (Zone), what flows in each direction and how it
// is renamed (flow.go, HashedName), the wire codec and its limits, the
// global's sync certificate, and zone insights.
//
// # Streams
//
// A zone opens one bidirectional stream (api/zonesync/v1) authenticated by
// its zone token; the global attributes everything on it to the token's
// zone. Each side sends its own store's change feed, filtered and renamed
// for the peer, in batches, and the peer stores each batch and then, in a
// lease beside the resources, how far it has the feed; a reconnecting side
// resumes from there. When the feed was compacted past that revision, or
// the position belongs to another store (another epoch), the sender sends
// the full state once and the receiver deletes what the full state left
// out. The store is the buffer: a sender reads the feed only as fast as
// the peer acknowledges (at most maxInFlight batches ahead). The global
// reads its feed once for every zone's stream and keeps what it read for
// the streams behind (sharedFeed, at most sharedFeedBytes), so a slow peer
// costs no memory beyond that.
//
// # Bad input
//
// A batch that is oversized or malformed is refused whole; a resource of
// an unknown kind, an invalid one, one claiming another zone, or one that
// would replace something the peer does not own is refused alone; each
// refusal is logged, counted (meshnames_zonesync_refused_total) and sent
// back to the peer as a Rejection, and the stream goes on.
//
// It imports api/zonesync/v1, admission, api, resource, store, cache,
// decode and validate; only server imports it. Global and Zone are safe for
// concurrent use; a link's sender, receiver and reader goroutines share
// only what link guards with its mutexes.
package zonesync
