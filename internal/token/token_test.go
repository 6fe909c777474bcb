package token

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlite"
)

// openStore opens an embedded store in a fresh directory.
func openStore(t testing.TB) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func loadKeys(t testing.TB, st store.Store) *Keys {
	t.Helper()
	k, err := LoadKeys(context.Background(), st)
	if err != nil {
		t.Fatalf("LoadKeys = %v", err)
	}
	return k
}

// t0 is the time tokens in these tests are issued.
var t0 = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

func claims(role Role) Claims {
	c := Claims{ID: "tok-1", Subject: "alice", Role: role, IssuedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	if role == RoleZone {
		c.Subject, c.Zone = "zone/east", "east"
	}
	return c
}

func sign(t testing.TB, k *Keys, c Claims) string {
	t.Helper()
	raw, err := k.Sign(c)
	if err != nil {
		t.Fatalf("Sign(%+v) = %v", c, err)
	}
	return raw
}

func b64(v any) string {
	var b []byte
	switch v := v.(type) {
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		b, _ = json.Marshal(v)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// forge builds a token from header and payload, signed by priv over the
// first two segments (or with signature sig when priv is nil).
func forge(header, payload any, priv ed25519.PrivateKey, sig string) string {
	text := b64(header) + "." + b64(payload)
	if priv != nil {
		sig = b64(ed25519.Sign(priv, []byte(text)))
	}
	return text + "." + sig
}

func payload(c Claims) map[string]any {
	var m map[string]any
	b, _ := json.Marshal(c.wire())
	_ = json.Unmarshal(b, &m)
	return m
}

func TestVerify_AcceptsWhatSignSigned(t *testing.T) {
	k := loadKeys(t, openStore(t))
	for _, c := range []Claims{
		claims(RoleAdmin),
		{ID: "a.b_c-D9", Subject: "bob@example.com", Role: RoleServiceOwner, Meshes: []string{"m1", "payments.prod"}, IssuedAt: t0, ExpiresAt: t0.Add(MaxValidity)},
		{ID: "ro", Subject: "ci", Role: RoleReadOnly, IssuedAt: t0, NotBefore: t0.Add(time.Minute), ExpiresAt: t0.Add(time.Hour)},
		{ID: "z", Subject: "zone/west", Role: RoleZone, Zone: "west", SyncPin: "sha256:" + strings.Repeat("ab", 32), IssuedAt: t0, ExpiresAt: t0.Add(8760 * time.Hour)},
	} {
		raw := sign(t, k, c)
		got, err := k.Verify(raw, t0.Add(2*time.Minute))
		if err != nil {
			t.Fatalf("Verify(%+v) = %v", c, err)
		}
		want := fill(c, t0)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("claims round trip (-want +got):\n%s", diff)
		}
	}
}

// TestVerify_Attacks is the attack table of the security design: every
// way to present a token that must not work, each refused with its own
// error.
func TestVerify_Attacks(t *testing.T) {
	st := openStore(t)
	k := loadKeys(t, st)
	other := loadKeys(t, openStore(t)) // another control plane: same kid k1, another key
	set := k.set.Load()
	priv, kid := set.signer, set.current
	pub := priv.Public().(ed25519.PublicKey)
	good := claims(RoleReadOnly)
	valid := sign(t, k, good)
	now := t0.Add(time.Minute)
	hdr := map[string]string{"alg": "EdDSA", "typ": "JWT", "kid": kid}

	// Algorithm swap: HS256 keyed with the public key, which a verifier
	// taking the algorithm from the token would accept.
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, jwtClaims{good.wire()})
	hs.Header["kid"] = kid
	hsRaw, err := hs.SignedString([]byte(pub))
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rs := jwt.NewWithClaims(jwt.SigningMethodRS256, jwtClaims{good.wire()})
	rs.Header["kid"] = kid
	rsRaw, err := rs.SignedString(rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	none := jwt.NewWithClaims(jwt.SigningMethodNone, jwtClaims{good.wire()})
	none.Header["kid"] = kid
	noneRaw, err := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(valid, ".")
	admin := good
	admin.Role = RoleAdmin
	revoked := good
	revoked.ID = "revoked-1"
	revokedRaw, _, err := k.Issue(context.Background(), revoked, "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Revoke(context.Background(), "revoked-1", "test", t0); err != nil {
		t.Fatal(err)
	}
	expired := good
	expired.ExpiresAt = now
	future := good
	future.NotBefore = now.Add(ClockSkew + time.Second)
	bad := func(mut func(m map[string]any)) string {
		m := payload(good)
		mut(m)
		return forge(hdr, m, priv, "")
	}

	tests := []struct {
		name string
		raw  string
		want error
	}{
		{"Empty", "", ErrMalformed},
		{"Garbage", "not a token at all", ErrMalformed},
		{"OneSegment", parts[0], ErrMalformed},
		{"TwoSegments", parts[0] + "." + parts[1], ErrMalformed},
		{"FourSegments", valid + ".x", ErrMalformed},
		{"TruncatedSignature", valid[:len(valid)-1], ErrMalformed},            // 85 characters: not base64
		{"TruncatedSignatureStillBase64", valid[:len(valid)-2], ErrSignature}, // 63 of 64 bytes
		{"NoSignature", parts[0] + "." + parts[1] + ".", ErrSignature},
		{"TruncatedPayload", parts[0] + "." + parts[1][:len(parts[1])/2] + "." + parts[2], ErrMalformed},
		{"HeaderNotBase64", "%%%." + parts[1] + "." + parts[2], ErrMalformed},
		{"HeaderNotJSON", b64("[1,2") + "." + parts[1] + "." + parts[2], ErrMalformed},
		{"Oversized", forge(hdr, map[string]any{"pad": strings.Repeat("x", MaxTokenBytes)}, priv, ""), ErrTooLarge},
		{"AlgNone", noneRaw, ErrAlgorithm},
		{"AlgNoneWithSignature", forge(map[string]string{"alg": "none", "kid": kid}, good.wire(), priv, ""), ErrAlgorithm},
		{"AlgNoneUpperCase", forge(map[string]string{"alg": "NONE", "kid": kid}, good.wire(), nil, ""), ErrAlgorithm},
		{"AlgMissing", forge(map[string]string{"kid": kid}, good.wire(), priv, ""), ErrAlgorithm},
		{"AlgSwapHS256WithPublicKey", hsRaw, ErrAlgorithm},
		{"AlgSwapRS256", rsRaw, ErrAlgorithm},
		{"AlgEd25519Spelling", forge(map[string]string{"alg": "Ed25519", "kid": kid}, good.wire(), priv, ""), ErrAlgorithm},
		{"KidMissing", forge(map[string]string{"alg": "EdDSA"}, good.wire(), priv, ""), ErrUnknownKey},
		{"KidUnknown", forge(map[string]string{"alg": "EdDSA", "kid": "k9"}, good.wire(), priv, ""), ErrUnknownKey},
		{"SignedByAnotherControlPlane", sign(t, other, good), ErrSignature},
		{"PayloadTamperedToAdmin", parts[0] + "." + b64(admin.wire()) + "." + parts[2], ErrSignature},
		{"SignatureOfAnotherToken", parts[0] + "." + parts[1] + "." + strings.Split(sign(t, k, admin), ".")[2], ErrSignature},
		{"SignatureNotBase64", parts[0] + "." + parts[1] + ".!!!", ErrMalformed},
		{"Expired", sign(t, k, expired), ErrExpired},
		{"NotYetValid", sign(t, k, future), ErrNotYetValid},
		{"Revoked", revokedRaw, ErrRevoked},
		{"UnknownRole", bad(func(m map[string]any) { m["role"] = "root" }), ErrInvalidClaims},
		{"NoSubject", bad(func(m map[string]any) { delete(m, "sub") }), ErrInvalidClaims},
		{"NoID", bad(func(m map[string]any) { delete(m, "jti") }), ErrInvalidClaims},
		{"NoExpiry", bad(func(m map[string]any) { delete(m, "exp") }), ErrInvalidClaims},
		{"WrongIssuer", bad(func(m map[string]any) { m["iss"] = "someone-else" }), ErrInvalidClaims},
		{"ZoneTokenWithoutZone", bad(func(m map[string]any) { m["role"] = "zone" }), ErrInvalidClaims},
		{"UserTokenNamingAZone", bad(func(m map[string]any) { m["zone"] = "east" }), ErrInvalidClaims},
		{"AdminLimitedToMeshes", bad(func(m map[string]any) { m["role"], m["meshes"] = "admin", []string{"m1"} }), ErrInvalidClaims},
		{"ExpiryAsString", bad(func(m map[string]any) { m["exp"] = "tomorrow" }), ErrMalformed},
		{"ValidityTooLong", bad(func(m map[string]any) { m["exp"] = t0.Add(MaxValidity + time.Hour).Unix() }), ErrInvalidClaims},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := k.Verify(tc.raw, now)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %+v, %v; want %v", c, err, tc.want)
			}
			if c.ID != "" || c.Role != "" {
				t.Errorf("Verify returned claims %+v with the error", c)
			}
			if strings.Contains(err.Error(), tc.raw) && tc.raw != "" {
				t.Errorf("error %q repeats the token", err)
			}
		})
	}
	// The valid token itself passes, so the table tests what it says.
	if _, err := k.Verify(valid, now); err != nil {
		t.Fatalf("Verify(valid) = %v", err)
	}
}

func TestVerify_TimesAreCheckedOnEveryUse(t *testing.T) {
	k := loadKeys(t, openStore(t))
	c := claims(RoleOperator)
	c.NotBefore = t0.Add(time.Hour)
	c.ExpiresAt = t0.Add(2 * time.Hour)
	raw := sign(t, k, c)
	for _, step := range []struct {
		now  time.Time
		want error
	}{
		{t0.Add(90 * time.Minute), nil}, // verified and cached
		{t0.Add(time.Hour - ClockSkew - time.Second), ErrNotYetValid},
		{t0.Add(time.Hour - ClockSkew), nil}, // within the clock skew
		{t0.Add(2 * time.Hour), ErrExpired},
		{t0.Add(2*time.Hour - time.Second), nil},
	} {
		if _, err := k.Verify(raw, step.now); !errors.Is(err, step.want) {
			t.Errorf("Verify at %s = %v, want %v", step.now.Format(time.TimeOnly), err, step.want)
		}
	}
}

func TestVerify_ReturnedMeshesAreACopy(t *testing.T) {
	k := loadKeys(t, openStore(t))
	c := claims(RoleServiceOwner)
	c.Meshes = []string{"m1", "m2"}
	raw := sign(t, k, c)
	got, err := k.Verify(raw, t0)
	if err != nil {
		t.Fatal(err)
	}
	got.Meshes[0] = "changed"
	again, err := k.Verify(raw, t0)
	if err != nil || again.Meshes[0] != "m1" {
		t.Errorf("second Verify = %v, %v: the cached claims were changed through the first result", again.Meshes, err)
	}
}

func TestSign_RefusesInvalidClaims(t *testing.T) {
	k := loadKeys(t, openStore(t))
	tests := []struct {
		name  string
		mut   func(c *Claims)
		field string
	}{
		{"NoSubject", func(c *Claims) { c.Subject = "" }, "subject"},
		{"SubjectWithControlCharacter", func(c *Claims) { c.Subject = "al\nice" }, "subject"},
		{"UnknownRole", func(c *Claims) { c.Role = "root" }, "role"},
		{"NoExpiry", func(c *Claims) { c.ExpiresAt = time.Time{} }, "expiresAt"},
		{"ExpiryBeforeIssue", func(c *Claims) { c.ExpiresAt = t0.Add(-time.Second) }, "expiresAt"},
		{"TooLong", func(c *Claims) { c.ExpiresAt = t0.Add(MaxValidity + time.Hour) }, "expiresAt"},
		{"BadMesh", func(c *Claims) { c.Meshes = []string{"Not_A_Mesh"} }, "meshes[0]"},
		{"DuplicateMesh", func(c *Claims) { c.Meshes = []string{"m1", "m1"} }, "meshes[1]"},
		{"BadID", func(c *Claims) { c.ID = "a/b" }, "id"},
		{"ZoneOnUserToken", func(c *Claims) { c.Zone = "east" }, "zone"},
		{"PinOnUserToken", func(c *Claims) { c.SyncPin = "sha256:" + strings.Repeat("0", 64) }, "syncPin"},
		{"ZoneTokenWithoutZone", func(c *Claims) { c.Role = RoleZone }, "zone"},
		{"ZoneTokenBadPin", func(c *Claims) { c.Role, c.Zone, c.SyncPin = RoleZone, "east", "md5:abc" }, "syncPin"},
		{"ZoneTokenWithMeshes", func(c *Claims) { c.Role, c.Zone, c.Meshes = RoleZone, "east", []string{"m1"} }, "meshes"},
		{"AdminWithMeshes", func(c *Claims) { c.Role, c.Meshes = RoleAdmin, []string{"m1"} }, "meshes"},
		{"NotBeforeAfterExpiry", func(c *Claims) { c.NotBefore = c.ExpiresAt.Add(time.Second) }, "notBefore"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := claims(RoleOperator)
			tc.mut(&c)
			raw, err := k.Sign(c)
			if err == nil {
				t.Fatalf("Sign = %q, want an error", raw)
			}
			if !strings.Contains(err.Error(), tc.field+": ") {
				t.Errorf("Sign error %q does not name the field %s", err, tc.field)
			}
		})
	}
}

func TestReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{ErrExpired, "expired"}, {ErrRevoked, "revoked"}, {ErrAlgorithm, "algorithm"}, {ErrSignature, "signature"},
		{ErrTooLarge, "too_large"}, {ErrMalformed, "malformed"}, {ErrUnknownKey, "unknown_key"},
		{ErrNotYetValid, "not_yet_valid"}, {ErrInvalidClaims, "invalid_claims"}, {errors.New("x"), "other"},
	} {
		if got := Reason(errors.Join(errors.New("context"), tc.err)); got != tc.want {
			t.Errorf("Reason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
