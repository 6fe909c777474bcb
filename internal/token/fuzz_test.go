package token

import (
	"crypto/ed25519"
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// FuzzVerify feeds Verify arbitrary strings. It must never panic, and what
// it accepts must carry a valid Ed25519 signature of this control plane's
// key over its first two segments, and claims that validate: a fuzzer
// cannot forge a signature, so anything else accepted is a bug.
func FuzzVerify(f *testing.F) {
	k := loadKeys(f, openStore(f))
	for _, c := range []Claims{claims(RoleAdmin), claims(RoleZone), claims(RoleServiceOwner)} {
		raw := sign(f, k, c)
		f.Add(raw)
		parts := strings.Split(raw, ".")
		f.Add(parts[0] + "." + parts[1] + ".")
		f.Add(parts[0] + ".." + parts[2])
		f.Add(b64(`{"alg":"none","kid":"k1"}`) + "." + parts[1] + ".")
		f.Add(b64(`{"alg":"HS256","kid":"k1"}`) + "." + parts[1] + "." + parts[2])
	}
	f.Add("")
	f.Add("...")
	f.Add("a.b.c")
	f.Add(strings.Repeat("A", MaxTokenBytes+1))
	pub := k.set.Load().signer.Public().(ed25519.PublicKey)
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := k.Verify(raw, t0.Add(time.Minute))
		if err != nil {
			if c.ID != "" || c.Role != "" {
				t.Errorf("claims %+v returned with error %v", c, err)
			}
			if Reason(err) == "other" {
				t.Errorf("error %v has no reason", err)
			}
			return
		}
		parts := strings.Split(raw, ".")
		if len(parts) != 3 {
			t.Fatalf("accepted %q with %d segments", raw, len(parts))
		}
		sig, derr := base64.RawURLEncoding.DecodeString(parts[2])
		if derr != nil || !ed25519.Verify(pub, []byte(parts[0]+"."+parts[1]), sig) {
			t.Fatalf("accepted %q without a valid signature", raw)
		}
		if errs := c.Validate(); len(errs) > 0 {
			t.Fatalf("accepted claims that do not validate: %v", errs)
		}
	})
}
