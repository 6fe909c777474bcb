package zonesync

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// maxTokenBytes bounds a zone token read from its file.
const maxTokenBytes = 8 << 10

// tokenClaims are the claims a zone reads from its own token, without
// verifying the signature: the zone has no key to verify it with, and
// needs only the pin (to verify the global) and its zone name (to say
// early that the token is for another zone). The global verifies the
// token.
type tokenClaims struct {
	Zone    string `json:"zone"`
	SyncPin string `json:"syncPin"`
	Role    string `json:"role"`
}

// readTokenClaims reads the claims of a zone token.
func readTokenClaims(raw string) (tokenClaims, error) {
	var c tokenClaims
	if len(raw) > maxTokenBytes {
		return c, fmt.Errorf("the zone token is %d bytes, over %d", len(raw), maxTokenBytes)
	}
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return c, errors.New("the zone token is malformed: want three dot-separated segments")
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return c, fmt.Errorf("the zone token is malformed: %w", err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("the zone token is malformed: %w", err)
	}
	if c.Role != "zone" || c.Zone == "" {
		return c, errors.New("the token is not a zone token: issue one with meshnames token zone --zone NAME")
	}
	return c, nil
}
