package token

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/meshnames/meshnames/internal/store"
)

// Lease name prefixes (see the package doc).
const (
	LeasePrefix   = "token/"
	keyPrefix     = LeasePrefix + "key/"
	issuedPrefix  = LeasePrefix + "issued/"
	revokedPrefix = LeasePrefix + "revoked/"
)

// DefaultRefreshInterval is how often Run reads keys and revocations, so
// that a revocation on another instance takes effect here within a second.
const DefaultRefreshInterval = 250 * time.Millisecond

// pruneEvery is how often Run deletes the records of tokens long expired.
const pruneEvery = 10 * time.Minute

// verifiedMax bounds the cache of verified tokens.
const verifiedMax = 4096

// Keys signs and verifies tokens with the keys kept in a store, and keeps
// the record of issued and revoked tokens there. Build it with LoadKeys.
type Keys struct {
	st store.Store
	// RefreshInterval is Run's polling period (DefaultRefreshInterval
	// when 0), where the store does not tell when leases change. Set it
	// before calling Run.
	RefreshInterval time.Duration

	created bool
	set     atomic.Pointer[keySet]
	revoked atomic.Pointer[map[string]struct{}]
	// refreshMu serializes Refresh, so that an older read never replaces
	// a newer one.
	refreshMu sync.Mutex

	// verified caches the claims of tokens whose signature was verified,
	// by the SHA-256 of the token: an Ed25519 verification costs far more
	// than a request should spend on it. Times and revocation are checked
	// on every use.
	verifiedMu sync.RWMutex
	verified   map[[32]byte]Claims
}

// keySet is one immutable snapshot of the keys.
type keySet struct {
	current string // kid of the signing key
	number  int    // its N
	signer  ed25519.PrivateKey
	public  map[string]ed25519.PublicKey
}

// storedKey is the lease value of a key.
type storedKey struct {
	Seed    []byte    `json:"seed"` // ed25519.SeedSize bytes
	Created time.Time `json:"created"`
}

// LoadKeys reads the signing keys from st, creating the first one when
// there is none (race-free across instances sharing the store), and the
// revocations. Created reports whether this call created the first key.
func LoadKeys(ctx context.Context, st store.Store) (*Keys, error) {
	k := &Keys{st: st, verified: map[[32]byte]Claims{}}
	empty := map[string]struct{}{}
	k.revoked.Store(&empty)
	ls, err := st.Leases(ctx, keyPrefix)
	if err != nil {
		return nil, fmt.Errorf("token keys: %w", err)
	}
	if len(ls) == 0 {
		created, err := k.createKey(ctx, 1)
		if err != nil {
			return nil, err
		}
		k.created = created
	}
	if err := k.Refresh(ctx); err != nil {
		return nil, err
	}
	return k, nil
}

// Created reports whether LoadKeys created the first signing key: this is
// the first start of the control plane (of all instances on PostgreSQL,
// exactly one sees true).
func (k *Keys) Created() bool { return k.created }

// createKey creates key number n unless it exists; it reports whether
// this call created it.
func (k *Keys) createKey(ctx context.Context, n int) (bool, error) {
	seed := make([]byte, ed25519.SeedSize)
	_, _ = rand.Read(seed) // never fails
	v, err := json.Marshal(storedKey{Seed: seed, Created: time.Now().UTC()})
	if err != nil {
		return false, err
	}
	name := keyPrefix + kid(n)
	rs, err := k.st.Apply(ctx, store.Op{Type: store.OpCreateLease, Lease: &store.Lease{Name: name, Value: v}})
	if err != nil {
		return false, fmt.Errorf("token keys: create %s: %w", name, err)
	}
	switch {
	case errors.Is(rs[0].Err, store.ErrAlreadyExists):
		return false, nil
	case rs[0].Err != nil:
		return false, fmt.Errorf("token keys: create %s: %w", name, rs[0].Err)
	}
	return true, nil
}

func kid(n int) string { return "k" + strconv.Itoa(n) }

// Rotate adds a new signing key, which signs from now on on every
// instance (after their next refresh); tokens signed by the older keys
// stay valid until they expire. It returns the new key's ID. When another
// instance rotated at the same moment, its key is the one returned.
func (k *Keys) Rotate(ctx context.Context) (string, error) {
	if err := k.Refresh(ctx); err != nil {
		return "", err
	}
	if _, err := k.createKey(ctx, k.set.Load().number+1); err != nil {
		return "", err
	}
	if err := k.Refresh(ctx); err != nil {
		return "", err
	}
	return k.set.Load().current, nil
}

// CurrentKey returns the ID of the key that signs.
func (k *Keys) CurrentKey() string { return k.set.Load().current }

// Refresh reads the keys and the revocations from the store. Run calls it
// periodically; call it directly to see another instance's change at once.
func (k *Keys) Refresh(ctx context.Context) error {
	k.refreshMu.Lock()
	defer k.refreshMu.Unlock()
	ls, err := k.st.Leases(ctx, keyPrefix)
	if err != nil {
		return fmt.Errorf("token keys: %w", err)
	}
	set := &keySet{public: map[string]ed25519.PublicKey{}}
	for _, l := range ls {
		id := strings.TrimPrefix(l.Name, keyPrefix)
		n, err := strconv.Atoi(strings.TrimPrefix(id, "k"))
		if !strings.HasPrefix(id, "k") || err != nil || n < 1 {
			continue // not ours; ignore rather than fail every instance
		}
		var sk storedKey
		if err := json.Unmarshal(l.Value, &sk); err != nil || len(sk.Seed) != ed25519.SeedSize {
			return fmt.Errorf("token keys: lease %s is not a key", l.Name)
		}
		priv := ed25519.NewKeyFromSeed(sk.Seed)
		set.public[id] = priv.Public().(ed25519.PublicKey)
		if n > set.number {
			set.number, set.current, set.signer = n, id, priv
		}
	}
	if set.signer == nil {
		return fmt.Errorf("token keys: the store holds no signing key")
	}
	revoked, err := k.st.Leases(ctx, revokedPrefix)
	if err != nil {
		return fmt.Errorf("token revocations: %w", err)
	}
	ids := make(map[string]struct{}, len(revoked))
	for _, l := range revoked {
		ids[strings.TrimPrefix(l.Name, revokedPrefix)] = struct{}{}
	}
	k.set.Store(set)
	if !maps.Equal(ids, *k.revoked.Load()) {
		k.revoked.Store(&ids)
	}
	return nil
}

// Run refreshes the keys and revocations until ctx ends, and deletes the
// records of tokens that expired long ago every pruneEvery. On a store
// that tells when its leases change (store.LeaseNotifier: Kubernetes) it
// refreshes when a key or a revocation was written, and polls every
// RefreshInterval while the store cannot tell; on the others it polls.
// A failed refresh is logged and retried at the next poll.
func (k *Keys) Run(ctx context.Context, log *slog.Logger) error {
	every := k.RefreshInterval
	if every <= 0 {
		every = DefaultRefreshInterval
	}
	poll := time.NewTicker(every)
	defer poll.Stop()
	prune := time.NewTicker(pruneEvery)
	defer prune.Stop()
	notifier, _ := k.st.(store.LeaseNotifier)
	lastPrune := time.Time{}
	failing := false
	for {
		// Asked before the refresh reads, so that no write after its
		// read goes unheard.
		var keysChanged, revokedChanged <-chan struct{}
		if notifier != nil {
			keysChanged, revokedChanged = notifier.LeasesChanged(keyPrefix), notifier.LeasesChanged(revokedPrefix)
		}
		err := k.Refresh(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			log.Warn("cannot refresh token keys and revocations; retrying", "err", err)
			failing = true
		case err == nil && failing:
			log.Info("token keys and revocations refreshed again")
			failing = false
		}
		if now := time.Now(); now.Sub(lastPrune) >= pruneEvery {
			lastPrune = now
			if n, err := k.Prune(ctx, now); err != nil && ctx.Err() == nil {
				log.Warn("cannot prune expired token records", "err", err)
			} else if n > 0 {
				log.Debug("pruned expired token records", "records", n)
			}
		}
		var tick <-chan time.Time
		if keysChanged == nil || revokedChanged == nil || failing {
			tick = poll.C
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
		case <-keysChanged:
		case <-revokedChanged:
		case <-prune.C:
		}
	}
}

// Sign signs c with the current key. An empty ID gets a fresh one, a zero
// IssuedAt the current time, a zero NotBefore IssuedAt; the claims must
// then be valid (Claims.Validate), ExpiresAt included. Times keep whole
// seconds. Sign does not record the token: Issue does.
func (k *Keys) Sign(c Claims) (string, error) {
	c = fill(c, time.Now())
	if errs := c.Validate(); len(errs) > 0 {
		return "", fmt.Errorf("sign: %w", errs)
	}
	set := k.set.Load()
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwtClaims{c.wire()})
	t.Header["kid"] = set.current
	raw, err := t.SignedString(set.signer)
	if err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	return raw, nil
}

// fill defaults ID and times and truncates the times to whole seconds, as
// a token holds them.
func fill(c Claims, now time.Time) Claims {
	if c.ID == "" {
		c.ID = NewID()
	}
	if c.IssuedAt.IsZero() {
		c.IssuedAt = now
	}
	if c.NotBefore.IsZero() {
		c.NotBefore = c.IssuedAt
	}
	c.IssuedAt = c.IssuedAt.Truncate(time.Second).UTC()
	c.NotBefore = c.NotBefore.Truncate(time.Second).UTC()
	c.ExpiresAt = c.ExpiresAt.Truncate(time.Second).UTC()
	return c
}

// jwtClaims adapts wireClaims to the jwt library, which validates nothing
// itself here (Verify checks times and claims).
type jwtClaims struct{ wireClaims }

func (c jwtClaims) MarshalJSON() ([]byte, error) { return json.Marshal(c.wireClaims) }
func (c *jwtClaims) UnmarshalJSON(b []byte) error {
	return json.Unmarshal(b, &c.wireClaims)
}
func (c jwtClaims) GetExpirationTime() (*jwt.NumericDate, error) { return nil, nil }
func (c jwtClaims) GetIssuedAt() (*jwt.NumericDate, error)       { return nil, nil }
func (c jwtClaims) GetNotBefore() (*jwt.NumericDate, error)      { return nil, nil }
func (c jwtClaims) GetIssuer() (string, error)                   { return c.Issuer, nil }
func (c jwtClaims) GetSubject() (string, error)                  { return c.Subject, nil }
func (c jwtClaims) GetAudience() (jwt.ClaimStrings, error)       { return nil, nil }

// Verify checks raw and returns its claims. It fails, with an error that
// wraps one of ErrTooLarge, ErrMalformed, ErrAlgorithm, ErrUnknownKey,
// ErrSignature, ErrExpired, ErrNotYetValid, ErrRevoked and
// ErrInvalidClaims, when raw is longer than MaxTokenBytes, is not a JWT,
// names an algorithm other than EdDSA, names a key this store does not
// hold, has a bad signature, is expired or not yet valid at now, is
// revoked, or carries claims that break Claims.Validate.
func (k *Keys) Verify(raw string, now time.Time) (Claims, error) {
	if len(raw) > MaxTokenBytes {
		return Claims{}, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(raw), MaxTokenBytes)
	}
	sum := sha256.Sum256([]byte(raw))
	k.verifiedMu.RLock()
	c, ok := k.verified[sum]
	k.verifiedMu.RUnlock()
	if !ok {
		var err error
		if c, err = k.verifySignature(raw); err != nil {
			return Claims{}, err
		}
		k.verifiedMu.Lock()
		if len(k.verified) >= verifiedMax {
			clear(k.verified) // simple and bounded; the working set refills it
		}
		k.verified[sum] = c
		k.verifiedMu.Unlock()
	}
	if err := checkTimes(c, now); err != nil {
		return Claims{}, err
	}
	if _, revoked := (*k.revoked.Load())[c.ID]; revoked {
		return Claims{}, fmt.Errorf("%w: token %s was revoked", ErrRevoked, c.ID)
	}
	c.Meshes = append([]string(nil), c.Meshes...) // the cached slice stays ours
	return c, nil
}

// verifySignature checks header, signature and claims of raw, not times
// nor revocation.
func (k *Keys) verifySignature(raw string) (Claims, error) {
	h, err := readHeader(raw)
	if err != nil {
		return Claims{}, err
	}
	pub, ok := k.set.Load().public[h.Kid]
	if !ok {
		return Claims{}, fmt.Errorf("%w: %q is not a key of this control plane", ErrUnknownKey, h.Kid)
	}
	var wc jwtClaims
	_, err = jwt.NewParser(jwt.WithValidMethods([]string{Algorithm}), jwt.WithoutClaimsValidation(), jwt.WithStrictDecoding()).
		ParseWithClaims(raw, &wc, func(t *jwt.Token) (any, error) {
			if t.Method != jwt.SigningMethodEdDSA {
				return nil, fmt.Errorf("algorithm %v", t.Method.Alg())
			}
			return pub, nil
		})
	switch {
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return Claims{}, fmt.Errorf("%w: not signed by key %s", ErrSignature, h.Kid)
	case err != nil:
		return Claims{}, fmt.Errorf("%w: %s", ErrMalformed, strings.TrimPrefix(err.Error(), jwt.ErrTokenMalformed.Error()+": "))
	}
	if wc.Issuer != Issuer {
		return Claims{}, fmt.Errorf("%w: issuer %q, want %q", ErrInvalidClaims, wc.Issuer, Issuer)
	}
	c := wc.claims()
	if errs := c.Validate(); len(errs) > 0 {
		return Claims{}, fmt.Errorf("%w: %v", ErrInvalidClaims, errs)
	}
	return c, nil
}
