package api

import "time"

// ZoneInsight is the body of GET /zones/{name}/_insight on a global control
// plane: the state of the zone's sync stream as the global sees it.
type ZoneInsight struct {
	Zone string `json:"zone"`
	// Online is true while a global instance holds the zone's stream and
	// has heard from the zone within three heartbeats.
	Online bool `json:"online"`
	// ConnectedSince is when the current (or last) stream started.
	ConnectedSince time.Time `json:"connectedSince,omitzero"`
	// LastSeen is when the global last heard from the zone.
	LastSeen time.Time `json:"lastSeen,omitzero"`
	// Instance is the global instance serving (or that last served) the
	// stream; Version the zone's meshnames version.
	Instance string `json:"instance,omitempty"`
	Version  string `json:"version,omitempty"`
	// Sent is what the global sent the zone on the current (or last)
	// stream; Received what it received and stored.
	Sent     SyncDirection `json:"sent"`
	Received SyncDirection `json:"received"`
	// Refused counts the batches and resources from the zone that the
	// global refused (malformed, oversized, unknown kind, invalid, another
	// zone's); LastError is the last refusal or stream error.
	Refused       int64     `json:"refused"`
	LastError     string    `json:"lastError,omitempty"`
	LastErrorTime time.Time `json:"lastErrorTime,omitzero"`
	// Streams counts the streams the zone opened since the global started
	// keeping its insight.
	Streams int64 `json:"streams"`
}

// SyncDirection is one direction of a zone's stream.
type SyncDirection struct {
	// Revision is the last revision of the sender's change feed sent (for
	// Sent) or stored (for Received); Acked, for Sent, the last one the
	// zone confirmed it stored.
	Revision int64 `json:"revision"`
	Acked    int64 `json:"acked,omitempty"`
	// Resources and Bytes count resources (puts and deletes) and encoded
	// batch bytes on the current stream.
	Resources int64 `json:"resources"`
	Bytes     int64 `json:"bytes"`
	// Snapshots counts full states (sent when the feed could not resume).
	Snapshots int64 `json:"snapshots"`
}
