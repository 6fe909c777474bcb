package zonesync

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// maxTokenBytes bounds a zone token read from its file.
const maxTokenBytes = 8 << 10

// tokenClaims are the claims a zone reads from its own token, without
// verifying the signature: the zone has no key to verify it with, and
// needs only the pin (to verify the global), its zone name (to say early
// that the token is for another zone) and its expiry (to say early that it
// expired). The global verifies the token.
type tokenClaims struct {
	Zone      string `json:"zone"`
	SyncPin   string `json:"syncPin"`
	Role      string `json:"role"`
	ExpiresAt int64  `json:"exp"`
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

// errTokenFile marks a zone token file that this zone cannot use, whatever
// the global would say: unreadable, not a zone token, for another zone, or
// expired.
var errTokenFile = errors.New("zone token file")

// loadToken reads the zone token of zone from path and checks what a zone
// can check without the global's key: that it is a zone token, for zone,
// not expired at now, and carries a pin unless caFile verifies the global.
// Its errors name the file and wrap errTokenFile.
func loadToken(path, zone, caFile string, now time.Time) (string, tokenClaims, error) {
	fail := func(format string, args ...any) (string, tokenClaims, error) {
		return "", tokenClaims{}, fmt.Errorf("%w %s: %s", errTokenFile, path, fmt.Sprintf(format, args...))
	}
	f, err := os.Open(path)
	if err != nil {
		return fail("cannot read it: %v", unwrapPath(err))
	}
	defer f.Close()
	// One byte over the bound, so that readTokenClaims says it is over.
	raw, err := io.ReadAll(io.LimitReader(f, maxTokenBytes+1))
	if err != nil {
		return fail("cannot read it: %v", unwrapPath(err))
	}
	token := strings.TrimSpace(string(raw))
	if token == "" {
		return fail("it is empty: write the output of meshnames token zone --zone %s on the global into it", zone)
	}
	claims, err := readTokenClaims(token)
	if err != nil {
		return fail("%v", err)
	}
	if claims.Zone != zone {
		return fail("the zone token is for zone %q, but this control plane is zone %q: issue a token with meshnames token zone --zone %s", claims.Zone, zone, zone)
	}
	if exp := time.Unix(claims.ExpiresAt, 0); !now.Before(exp) {
		return fail("the zone token expired at %s: issue a new one with meshnames token zone --zone %s", exp.UTC().Format(time.RFC3339), zone)
	}
	if claims.SyncPin == "" && caFile == "" {
		return fail("the zone token carries no pin of the global's sync certificate, and no --global-ca-file is given")
	}
	return token, claims, nil
}

// unwrapPath drops the operation and path of a *os.PathError, which the
// caller names itself.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// CheckTokenFile says what is wrong with a zone's token file before the
// zone starts: unreadable, empty, not a zone token, for another zone than
// zone, expired at now, or without a pin when caFile is empty. The error
// names the file and the reason. A good file may still be refused by the
// global (revoked, signed by another global), which only the global can
// tell.
func CheckTokenFile(path, zone, caFile string, now time.Time) error {
	_, _, err := loadToken(path, zone, caFile, now)
	return err
}
