// Package token owns meshnames' signed tokens: one mechanism for users
// (admin, operator, service-owner, read-only) and for zones connecting to
// a global control plane. A token is a compact JWT signed with Ed25519
// (alg EdDSA). Verification accepts that algorithm only, whatever the
// token's header says (never "none", never an HMAC keyed with the public
// key), checks the size before parsing, and names each failure with a
// typed error (ErrExpired, ErrRevoked, ...).
//
// # Keys and records in the store
//
// Signing keys, the tokens issued and their revocations live in the
// store's leases, beside the resources (not in the change feed):
//
//	token/key/k<N>         an Ed25519 key; the highest N signs, all verify
//	token/issued/<id>      what was issued (never the token itself)
//	token/revoked/<id>     a revocation, kept until the token would expire
//
// LoadKeys creates k1 at first start with store.OpCreateLease, so
// instances that start together on one PostgreSQL database agree on one
// key; Rotate adds k<N+1> the same way. Old keys stay, so tokens they
// signed stay valid until they expire. Run polls the leases (every
// RefreshInterval) so that a key added or a token revoked on another
// instance takes effect here within a second.
//
// It imports api, store and validate only. Keys is safe for concurrent use:
// Verify and Sign read immutable snapshots swapped atomically.
package token

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/meshnames/meshnames/internal/validate"
)

// Role is what a token's holder may do.
type Role string

// The roles. docs/security.md lists what each may do on every endpoint.
const (
	// RoleAdmin may do everything, tokens included.
	RoleAdmin Role = "admin"
	// RoleOperator manages Meshes, Zones, HostnameGenerators and
	// MeshMultiZoneServices, and everything a service owner may.
	RoleOperator Role = "operator"
	// RoleServiceOwner manages MeshServices, MeshExternalServices and
	// Dataplanes (of its meshes when the token names meshes).
	RoleServiceOwner Role = "service-owner"
	// RoleReadOnly may only read.
	RoleReadOnly Role = "read-only"
	// RoleZone is a zone control plane's identity towards its global: it
	// may use the sync endpoint as its own zone and nothing else.
	RoleZone Role = "zone"
	// RoleDataplane is a proxy's identity towards the xDS control plane:
	// it may fetch the configuration of one Dataplane (Meshes holds its
	// mesh, Subject its name) and nothing else.
	RoleDataplane Role = "dataplane"
	// RoleIngress is a ZoneIngress proxy's identity towards the xDS
	// control plane of its zone: Subject names the ZoneIngress.
	RoleIngress Role = "ingress"
)

// Roles lists every role, most powerful first.
func Roles() []Role {
	return []Role{RoleAdmin, RoleOperator, RoleServiceOwner, RoleReadOnly, RoleZone, RoleDataplane, RoleIngress}
}

// UserRoles lists the roles of user tokens (every role but zone and
// dataplane).
func UserRoles() []Role {
	return []Role{RoleAdmin, RoleOperator, RoleServiceOwner, RoleReadOnly}
}

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool {
	for _, v := range Roles() {
		if r == v {
			return true
		}
	}
	return false
}

// Claims is what a token says about its holder.
type Claims struct {
	// ID identifies the token; revocation names it.
	ID string
	// Subject names the holder: a user name, or "zone/<zone>" for zones.
	Subject string
	Role    Role
	// Meshes limits the token to these meshes; empty means all meshes.
	Meshes []string
	// Zone is the zone a zone token's holder is (RoleZone only).
	Zone string
	// SyncPin is "sha256:<hex>", the fingerprint of the global's sync
	// certificate, so that a zone verifies the global it connects to
	// (RoleZone only; empty when the global has no sync certificate).
	SyncPin string
	// Times, at one-second precision in a token. NotBefore defaults to
	// IssuedAt; ExpiresAt is required.
	IssuedAt, NotBefore, ExpiresAt time.Time
}

// Limits of a token.
const (
	// MaxTokenBytes bounds a token; Verify refuses longer ones before
	// decoding anything.
	MaxTokenBytes = 4096
	// MaxValidity bounds ExpiresAt - IssuedAt.
	MaxValidity = 10 * 365 * 24 * time.Hour
	// ClockSkew is how far before its NotBefore a token is accepted, so
	// that a token issued by one instance works at once on another whose
	// clock is a little behind. Expiry has no such leeway.
	ClockSkew = 5 * time.Second
	// Issuer is the iss claim of every token.
	Issuer = "meshnames"
	// Algorithm is the only JWT algorithm signed and accepted.
	Algorithm = "EdDSA"
	maxIDLen  = 64
)

// Errors of Verify, one per way a token can fail. Test with errors.Is;
// Reason gives each a short name for metrics.
var (
	ErrTooLarge      = errors.New("token too large")
	ErrMalformed     = errors.New("malformed token")
	ErrAlgorithm     = errors.New("token algorithm not accepted")
	ErrUnknownKey    = errors.New("token signed by an unknown key")
	ErrSignature     = errors.New("token signature invalid")
	ErrExpired       = errors.New("token expired")
	ErrNotYetValid   = errors.New("token not valid yet")
	ErrRevoked       = errors.New("token revoked")
	ErrInvalidClaims = errors.New("token claims invalid")
)

// Reason names the failure of err for metrics and logs: too_large,
// malformed, algorithm, unknown_key, signature, expired, not_yet_valid,
// revoked, invalid_claims, or other.
func Reason(err error) string {
	for _, r := range []struct {
		err  error
		name string
	}{
		{ErrTooLarge, "too_large"}, {ErrMalformed, "malformed"}, {ErrAlgorithm, "algorithm"},
		{ErrUnknownKey, "unknown_key"}, {ErrSignature, "signature"}, {ErrExpired, "expired"},
		{ErrNotYetValid, "not_yet_valid"}, {ErrRevoked, "revoked"}, {ErrInvalidClaims, "invalid_claims"},
	} {
		if errors.Is(err, r.err) {
			return r.name
		}
	}
	return "other"
}

// NewID returns a fresh random token ID (16 hex digits).
func NewID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}

// Validate checks the claims, every problem with its field: a token is
// signed only when they hold, and a verified token's claims hold too.
func (c Claims) Validate() validate.Errors {
	var errs validate.Errors
	switch {
	case c.ID == "":
		errs.Add("id", "must not be empty")
	case len(c.ID) > maxIDLen || strings.ContainsFunc(c.ID, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}):
		errs.Addf("id", "must be 1 to %d letters, digits, '-', '_' or '.'", maxIDLen)
	}
	switch {
	case c.Subject == "":
		errs.Add("subject", "must not be empty")
	case len(c.Subject) > validate.MaxSubdomainLength || strings.ContainsFunc(c.Subject, func(r rune) bool {
		return r == unicode.ReplacementChar || !unicode.IsPrint(r)
	}):
		errs.Addf("subject", "must be 1 to %d printable characters", validate.MaxSubdomainLength)
	}
	if !c.Role.Valid() {
		errs.Addf("role", "must be one of %s, got %q", roleList(), c.Role)
	}
	for i, m := range c.Meshes {
		errs.Check(validate.Path("meshes").Index(i), validate.DNS1123Subdomain(m))
		for _, prev := range c.Meshes[:i] {
			if prev == m {
				errs.Addf(validate.Path("meshes").Index(i), "names mesh %q twice", m)
			}
		}
	}
	if c.Role == RoleAdmin && len(c.Meshes) > 0 {
		errs.Add("meshes", "must be empty for an admin token: an admin manages every mesh and the tokens")
	}
	if c.Role == RoleZone {
		errs.Check("zone", validate.DNS1123Label(c.Zone))
		if len(c.Meshes) > 0 {
			errs.Add("meshes", "must be empty for a zone token: a zone syncs every mesh")
		}
		if c.SyncPin != "" && !validPin(c.SyncPin) {
			errs.Addf("syncPin", `must be "sha256:" and 64 lower case hex digits, got %q`, c.SyncPin)
		}
	} else {
		if c.Role == RoleDataplane {
			if len(c.Meshes) != 1 {
				errs.Add("meshes", "must name exactly one mesh for a dataplane token: the mesh of its Dataplane")
			}
			errs.Check("subject", validate.DNS1123Subdomain(c.Subject))
		}
		if c.Role == RoleIngress {
			if len(c.Meshes) > 0 {
				errs.Add("meshes", "must be empty for an ingress token: a ZoneIngress serves every mesh")
			}
			errs.Check("subject", validate.DNS1123Subdomain(c.Subject))
		}
		if c.Zone != "" {
			errs.Addf("zone", "must be empty for a %s token: only zone tokens name a zone", c.Role)
		}
		if c.SyncPin != "" {
			errs.Addf("syncPin", "must be empty for a %s token: only zone tokens carry a pin", c.Role)
		}
	}
	switch {
	case c.ExpiresAt.IsZero():
		errs.Add("expiresAt", "is required: every token expires")
	case c.IssuedAt.IsZero():
		errs.Add("issuedAt", "is required")
	case !c.ExpiresAt.After(c.IssuedAt):
		errs.Addf("expiresAt", "must be after issuedAt (%s), got %s", c.IssuedAt.Format(time.RFC3339), c.ExpiresAt.Format(time.RFC3339))
	case c.ExpiresAt.Sub(c.IssuedAt) > MaxValidity:
		errs.Addf("expiresAt", "must be at most %s after issuedAt", MaxValidity)
	}
	if !c.NotBefore.IsZero() && !c.ExpiresAt.IsZero() && !c.ExpiresAt.After(c.NotBefore) {
		errs.Add("notBefore", "must be before expiresAt")
	}
	return errs
}

func roleList() string {
	var names []string
	for _, r := range Roles() {
		names = append(names, string(r))
	}
	return strings.Join(names, ", ")
}

func validPin(p string) bool {
	h, ok := strings.CutPrefix(p, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	for i := range len(h) {
		if !(h[i] >= '0' && h[i] <= '9' || h[i] >= 'a' && h[i] <= 'f') {
			return false
		}
	}
	return true
}

// wireClaims is the JSON payload of a token.
type wireClaims struct {
	Issuer    string   `json:"iss"`
	ID        string   `json:"jti"`
	Subject   string   `json:"sub"`
	IssuedAt  int64    `json:"iat"`
	NotBefore int64    `json:"nbf"`
	ExpiresAt int64    `json:"exp"`
	Role      Role     `json:"role"`
	Meshes    []string `json:"meshes,omitempty"`
	Zone      string   `json:"zone,omitempty"`
	SyncPin   string   `json:"syncPin,omitempty"`
}

func (c Claims) wire() wireClaims {
	return wireClaims{
		Issuer: Issuer, ID: c.ID, Subject: c.Subject,
		IssuedAt: c.IssuedAt.Unix(), NotBefore: c.NotBefore.Unix(), ExpiresAt: c.ExpiresAt.Unix(),
		Role: c.Role, Meshes: c.Meshes, Zone: c.Zone, SyncPin: c.SyncPin,
	}
}

func (w wireClaims) claims() Claims {
	return Claims{
		ID: w.ID, Subject: w.Subject, Role: w.Role, Meshes: w.Meshes, Zone: w.Zone, SyncPin: w.SyncPin,
		IssuedAt: unix(w.IssuedAt), NotBefore: unix(w.NotBefore), ExpiresAt: unix(w.ExpiresAt),
	}
}

func unix(s int64) time.Time {
	if s == 0 {
		return time.Time{}
	}
	return time.Unix(s, 0).UTC()
}

// header is the JOSE header of a token.
type header struct {
	Alg string `json:"alg"`
	Typ string `json:"typ,omitempty"`
	Kid string `json:"kid"`
}

// readHeader decodes the header segment of raw, so that the algorithm and
// key are checked, with a clear error, before anything else is decoded.
func readHeader(raw string) (header, error) {
	var h header
	seg, _, ok := strings.Cut(raw, ".")
	if !ok {
		return h, fmt.Errorf("%w: want three dot-separated segments", ErrMalformed)
	}
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return h, fmt.Errorf("%w: header is not base64url", ErrMalformed)
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return h, fmt.Errorf("%w: header is not a JSON object", ErrMalformed)
	}
	if h.Alg != Algorithm {
		return h, fmt.Errorf("%w: %q; meshnames signs and accepts only %s (Ed25519)", ErrAlgorithm, h.Alg, Algorithm)
	}
	if h.Kid == "" {
		return h, fmt.Errorf("%w: the header names no key (kid)", ErrUnknownKey)
	}
	return h, nil
}

// checkTimes checks c against now: expiry (no leeway) and not-before
// (ClockSkew of leeway).
func checkTimes(c Claims, now time.Time) error {
	if !now.Before(c.ExpiresAt) {
		return fmt.Errorf("%w at %s", ErrExpired, c.ExpiresAt.Format(time.RFC3339))
	}
	nbf := c.NotBefore
	if nbf.IsZero() {
		nbf = c.IssuedAt
	}
	if now.Add(ClockSkew).Before(nbf) {
		return fmt.Errorf("%w: valid from %s", ErrNotYetValid, nbf.Format(time.RFC3339))
	}
	return nil
}
