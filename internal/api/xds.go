package api

import (
	"encoding/json"
	"time"
)

// XDSInspection is GET /meshes/{mesh}/dataplanes/{name}/_xds (or
// /zoneingresses/{name}/_xds): what the proxy of a Dataplane (or of a
// ZoneIngress of this zone) gets from the xDS control plane, and its
// streams on the instance that answers.
type XDSInspection struct {
	Mesh        string `json:"mesh,omitempty"`
	Dataplane   string `json:"dataplane,omitempty"`
	ZoneIngress string `json:"zoneIngress,omitempty"`
	// Instance is the control plane instance that answered; Streams are
	// the proxy's streams on it (none when it is connected elsewhere, or
	// not at all).
	Instance string      `json:"instance"`
	Streams  []XDSStream `json:"streams"`
	// Notes explain what the config holds or lacks: a cluster without
	// endpoints and why.
	Notes []string `json:"notes,omitempty"`
	// Config is what the proxy gets, in the shape of Envoy's
	// /config_dump (envoy.admin.v3.ConfigDump, as protojson).
	Config json.RawMessage `json:"config"`
}

// XDSStream is one ADS stream of a proxy.
type XDSStream struct {
	Protocol    string         `json:"protocol"` // sotw or delta
	Peer        string         `json:"peer"`
	ConnectedAt time.Time      `json:"connectedAt"`
	Types       []XDSTypeState `json:"types"`
}

// XDSTypeState is a stream's state for one resource type.
type XDSTypeState struct {
	Type string `json:"type"` // CDS, EDS or LDS
	// Wildcard is true when the proxy asked for every resource of the
	// type; Names are the resources it named.
	Wildcard bool     `json:"wildcard"`
	Names    []string `json:"names,omitempty"`
	// Sent is the last response: its version and nonce, when, and how
	// many responses of the type the stream got.
	SentVersion string    `json:"sentVersion,omitempty"`
	SentNonce   string    `json:"sentNonce,omitempty"`
	SentAt      time.Time `json:"sentAt,omitzero"`
	Responses   int       `json:"responses"`
	// Pending is true while the last response waits for its ACK or NACK.
	Pending      bool      `json:"pending"`
	AckedVersion string    `json:"ackedVersion,omitempty"`
	AckedAt      time.Time `json:"ackedAt,omitzero"`
	// Nack is the last rejected response, kept until one is accepted.
	Nack *XDSNack `json:"nack,omitempty"`
}

// XDSNack is a response a proxy rejected.
type XDSNack struct {
	Version string    `json:"version"`
	Nonce   string    `json:"nonce"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}
