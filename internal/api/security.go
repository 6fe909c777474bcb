package api

import (
	"time"

	"github.com/meshnames/meshnames/internal/resource"
)

// TokenRequest is the body of POST /tokens (a user token), POST
// /tokens/zone (a zone token: Zone set, the rest empty) and POST
// /tokens/dataplane (a dataplane token: Mesh and Name set).
type TokenRequest struct {
	// Name is the subject of a user token (who holds it), or the
	// Dataplane a dataplane token is for.
	Name string `json:"name,omitempty"`
	// Mesh is the mesh of the Dataplane a dataplane token is for.
	Mesh string `json:"mesh,omitempty"`
	// Role of a user token: admin, operator, service-owner or read-only.
	Role string `json:"role,omitempty"`
	// Meshes limits a user token to these meshes; empty means all.
	Meshes []string `json:"meshes,omitempty"`
	// Zone is the zone a zone token is for.
	Zone string `json:"zone,omitempty"`
	// ValidFor is how long the token is valid, such as "24h"; the
	// default is 24h for user tokens and 8760h for zone tokens.
	ValidFor string `json:"validFor,omitempty"`
}

// TokenInfo describes an issued token; never the token itself.
type TokenInfo struct {
	ID        string    `json:"id"`
	Subject   string    `json:"subject"`
	Role      string    `json:"role"`
	Meshes    []string  `json:"meshes,omitempty"`
	Zone      string    `json:"zone,omitempty"`
	IssuedAt  time.Time `json:"issuedAt"`
	ExpiresAt time.Time `json:"expiresAt"`
	IssuedBy  string    `json:"issuedBy,omitempty"`
	KeyID     string    `json:"keyId,omitempty"`
	RevokedAt time.Time `json:"revokedAt,omitzero"`
	RevokedBy string    `json:"revokedBy,omitempty"`
}

// TokenResponse is the body of a successful POST /tokens: the token, shown
// this once, and what it says.
type TokenResponse struct {
	Token string    `json:"token"`
	Info  TokenInfo `json:"info"`
}

// TokenList is the body of GET /tokens.
type TokenList struct {
	Items []TokenInfo `json:"items"`
}

// KeyRotation is the body of POST /tokens/_rotate-key: the key that signs
// from now on.
type KeyRotation struct {
	KeyID string `json:"keyId"`
}

// Audit verbs: what an audit entry records.
const (
	VerbCreate      = "create"
	VerbUpdate      = "update"
	VerbDelete      = "delete"
	VerbPut         = "put" // a PUT refused before it was known to create or update
	VerbIssueToken  = "issue-token"
	VerbRevokeToken = "revoke-token"
	VerbRotateKey   = "rotate-key"
	// VerbBackup is a backup of the store taken (GET /_backup).
	VerbBackup = "backup"
	// VerbSync is a write a zone's sync stream tried (multizone).
	VerbSync = "sync"
)

// The trailers of a backup (GET /_backup, a tar stream of a data
// directory), sent after the stream: a client that does not find them got
// a stream cut short, which is not a backup.
const (
	// BackupEngineTrailer names the engine that wrote it: pebble or sqlite.
	BackupEngineTrailer = "Meshnames-Backup-Engine"
	// BackupRevisionTrailer is the store revision it holds.
	BackupRevisionTrailer = "Meshnames-Backup-Revision"
)

// Audit results.
const (
	ResultSuccess   = "success"
	ResultUnchanged = "unchanged"
	// ResultRefused: authentication, authorization or the rate limit
	// refused the request (401, 403, 429) before it reached the handler.
	ResultRefused = "refused"
	// ResultFailed: the handler refused or failed it (400, 404, 409, 5xx).
	ResultFailed = "failed"
)

// AuditEntry is one entry of the audit log (GET /audit): a write through
// the API, a token issued or revoked, or a refusal, with who did it.
type AuditEntry struct {
	// Seq orders the entries; it is the cursor of paging.
	Seq  int64     `json:"seq"`
	Time time.Time `json:"time"`
	// Subject and Role are who asked: a token's subject and role,
	// "loopback" and admin for a request without a token on a loopback
	// listener, empty when the request was not authenticated.
	Subject string `json:"subject,omitempty"`
	Role    string `json:"role,omitempty"`
	TokenID string `json:"tokenId,omitempty"`
	// Source is the client's address.
	Source string        `json:"source,omitempty"`
	Verb   string        `json:"verb"`
	Kind   resource.Kind `json:"kind,omitempty"`
	Mesh   string        `json:"mesh,omitempty"`
	Name   string        `json:"name,omitempty"`
	// Result is success, unchanged, refused or failed; Code the HTTP
	// status; Reason why it was refused or failed.
	Result string `json:"result"`
	Code   int    `json:"code,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// AuditPage is the body of GET /audit: entries newest first, and the
// cursor of the next (older) page when there is one.
type AuditPage struct {
	Items []AuditEntry `json:"items"`
	// Next, when set, is the URL of the next page.
	Next string `json:"next,omitempty"`
}

// History events: what happened to a hostname or VIP of a service.
const (
	// HistoryAssigned: the service got the hostname or VIP.
	HistoryAssigned = "assigned"
	// HistoryReleased: the service gave it up (deleted, renamed, its
	// generator changed).
	HistoryReleased = "released"
	// HistoryLost: the service lost it to another (a collision it lost).
	HistoryLost = "lost"
)

// HistoryEvent is one event of the history of hostnames and VIPs: a
// hostname or VIP assigned to, released by or lost by a service, in a zone.
type HistoryEvent struct {
	Seq  int64         `json:"seq"`
	Time time.Time     `json:"time"`
	Zone string        `json:"zone,omitempty"`
	Mesh string        `json:"mesh"`
	Kind resource.Kind `json:"kind"`
	Name string        `json:"name"`
	// Hostname or VIP: one of the two is set.
	Hostname string `json:"hostname,omitempty"`
	VIP      string `json:"vip,omitempty"`
	// Event is assigned, released or lost.
	Event  string `json:"event"`
	Reason string `json:"reason,omitempty"`
}

// HistoryHolding is one service's holding of a hostname or VIP: from when
// it was assigned until it was released or lost (Until zero: it holds it
// still). From is zero when the assignment is older than the history kept.
type HistoryHolding struct {
	Zone     string        `json:"zone,omitempty"`
	Mesh     string        `json:"mesh"`
	Kind     resource.Kind `json:"kind"`
	Name     string        `json:"name"`
	Hostname string        `json:"hostname,omitempty"`
	VIP      string        `json:"vip,omitempty"`
	From     time.Time     `json:"from,omitzero"`
	Until    time.Time     `json:"until,omitzero"`
	// End is released or lost once the holding ended, with its Reason.
	End    string `json:"end,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// HistoryReport is the body of GET /history?vip=IP or ?hostname=NAME: who
// held it, from when to when, and the events it was computed from.
type HistoryReport struct {
	VIP      string           `json:"vip,omitempty"`
	Hostname string           `json:"hostname,omitempty"`
	Holders  []HistoryHolding `json:"holders"`
	Events   []HistoryEvent   `json:"events"`
	// Truncated says the history has more events than were read; the
	// oldest ones are missing.
	Truncated bool `json:"truncated,omitempty"`
}
