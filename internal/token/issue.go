package token

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/store"
)

// ErrNotIssued means no token with the ID was issued here (or its record
// was pruned long after it expired).
var ErrNotIssued = errors.New("no such token")

// pruneAfter is how long the records of an expired token are kept, so
// that `token list` still shows it for a while.
const pruneAfter = 24 * time.Hour

// Issued is the record of an issued token: its claims and who issued it,
// never the token itself. RevokedAt is set once it is revoked. It is the
// API's body, so that the record and what the API shows cannot drift.
type Issued = api.TokenInfo

// revocation is the lease value of a revocation.
type revocation struct {
	RevokedAt time.Time `json:"revokedAt"`
	RevokedBy string    `json:"revokedBy,omitempty"`
}

// Issue signs c (as Sign does) and records it as issued by by, with extra
// written in the same transaction after the record (an audit entry), so
// that a token exists only with its record. It returns the token and its
// claims as signed. An error of an extra op is returned; the token is then
// recorded and valid, and the caller decides.
func (k *Keys) Issue(ctx context.Context, c Claims, by string, extra ...store.Op) (string, Claims, error) {
	c = fill(c, time.Now())
	raw, err := k.Sign(c)
	if err != nil {
		return "", Claims{}, err
	}
	rec := Issued{
		ID: c.ID, Subject: c.Subject, Role: string(c.Role), Meshes: c.Meshes, Zone: c.Zone,
		IssuedAt: c.IssuedAt, ExpiresAt: c.ExpiresAt, IssuedBy: by, KeyID: k.CurrentKey(),
	}
	v, err := json.Marshal(rec)
	if err != nil {
		return "", Claims{}, err
	}
	ops := append([]store.Op{{Type: store.OpCreateLease, Lease: &store.Lease{Name: issuedPrefix + c.ID, Value: v, ExpiresAt: c.ExpiresAt.Add(pruneAfter)}}}, extra...)
	rs, err := k.st.Apply(ctx, ops...)
	if err != nil {
		return "", Claims{}, fmt.Errorf("record token %s: %w", c.ID, err)
	}
	if errors.Is(rs[0].Err, store.ErrAlreadyExists) {
		return "", Claims{}, fmt.Errorf("record token %s: a token with this ID was already issued", c.ID)
	}
	for i, r := range rs {
		if r.Err != nil {
			return raw, c, fmt.Errorf("record token %s: op %d: %w", c.ID, i, r.Err)
		}
	}
	return raw, c, nil
}

// Revoke revokes the token id on every instance (within their refresh
// interval; at once here), recording who revoked it, with extra written in
// the same transaction. It returns the token's record, RevokedAt set.
// Revoking a revoked token changes nothing (extra is still written) and is
// not an error. It fails
// with ErrNotIssued when no token id was issued.
func (k *Keys) Revoke(ctx context.Context, id, by string, now time.Time, extra ...store.Op) (Issued, error) {
	rec, err := k.Lookup(ctx, id)
	if err != nil {
		return Issued{}, err
	}
	if !rec.RevokedAt.IsZero() {
		if len(extra) > 0 {
			rs, err := k.st.Apply(ctx, extra...)
			if err != nil {
				return rec, fmt.Errorf("revoke token %s: %w", id, err)
			}
			for i, r := range rs {
				if r.Err != nil {
					return rec, fmt.Errorf("revoke token %s: op %d: %w", id, i+1, r.Err)
				}
			}
		}
		return rec, nil
	}
	v, err := json.Marshal(revocation{RevokedAt: now.UTC(), RevokedBy: by})
	if err != nil {
		return Issued{}, err
	}
	// Kept as long as the token's record: until then the token could
	// still be presented.
	ops := append([]store.Op{{Type: store.OpPutLease, Lease: &store.Lease{Name: revokedPrefix + id, Value: v, ExpiresAt: rec.ExpiresAt.Add(pruneAfter)}}}, extra...)
	rs, err := k.st.Apply(ctx, ops...)
	if err != nil {
		return Issued{}, fmt.Errorf("revoke token %s: %w", id, err)
	}
	if rs[0].Err != nil {
		return Issued{}, fmt.Errorf("revoke token %s: %w", id, rs[0].Err)
	}
	k.markRevoked(id)
	rec.RevokedAt, rec.RevokedBy = now.UTC(), by
	for i, r := range rs[1:] {
		if r.Err != nil {
			return rec, fmt.Errorf("revoke token %s: op %d: %w", id, i+1, r.Err)
		}
	}
	return rec, nil
}

// markRevoked adds id to this instance's revoked set at once.
func (k *Keys) markRevoked(id string) {
	k.refreshMu.Lock()
	defer k.refreshMu.Unlock()
	ids := maps.Clone(*k.revoked.Load())
	ids[id] = struct{}{}
	k.revoked.Store(&ids)
}

// Lookup returns the record of token id, with its revocation, or
// ErrNotIssued.
func (k *Keys) Lookup(ctx context.Context, id string) (Issued, error) {
	if id == "" || strings.ContainsAny(id, "/") {
		return Issued{}, fmt.Errorf("token %q: %w", id, ErrNotIssued)
	}
	ls, err := k.st.Leases(ctx, issuedPrefix+id)
	if err != nil {
		return Issued{}, fmt.Errorf("token %s: %w", id, err)
	}
	for _, l := range ls {
		if l.Name != issuedPrefix+id {
			continue
		}
		var rec Issued
		if err := json.Unmarshal(l.Value, &rec); err != nil {
			return Issued{}, fmt.Errorf("token %s: unreadable record: %w", id, err)
		}
		rs, err := k.st.Leases(ctx, revokedPrefix+id)
		if err != nil {
			return Issued{}, fmt.Errorf("token %s: %w", id, err)
		}
		for _, r := range rs {
			if r.Name == revokedPrefix+id {
				var rv revocation
				_ = json.Unmarshal(r.Value, &rv) // a revocation is one even when unreadable
				rec.RevokedAt, rec.RevokedBy = rv.RevokedAt, rv.RevokedBy
			}
		}
		return rec, nil
	}
	return Issued{}, fmt.Errorf("token %s: %w", id, ErrNotIssued)
}

// List returns the records of the tokens issued, oldest first, with their
// revocations. Records are kept until a day after their token expired.
func (k *Keys) List(ctx context.Context) ([]Issued, error) {
	ls, err := k.st.Leases(ctx, issuedPrefix)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	rls, err := k.st.Leases(ctx, revokedPrefix)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	revoked := map[string]revocation{}
	for _, l := range rls {
		var rv revocation
		_ = json.Unmarshal(l.Value, &rv)
		revoked[strings.TrimPrefix(l.Name, revokedPrefix)] = rv
	}
	out := make([]Issued, 0, len(ls))
	for _, l := range ls {
		var rec Issued
		if err := json.Unmarshal(l.Value, &rec); err != nil {
			continue // not a record of ours; List must not fail for it
		}
		if rv, ok := revoked[rec.ID]; ok {
			rec.RevokedAt, rec.RevokedBy = rv.RevokedAt, rv.RevokedBy
		}
		out = append(out, rec)
	}
	slices.SortStableFunc(out, func(a, b Issued) int {
		if c := a.IssuedAt.Compare(b.IssuedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// Prune deletes the issued and revoked records whose lease expired by now
// (a day after their token did). It returns how many it deleted. Several
// instances pruning at once is harmless.
func (k *Keys) Prune(ctx context.Context, now time.Time) (int, error) {
	var ops []store.Op
	for _, prefix := range []string{issuedPrefix, revokedPrefix} {
		ls, err := k.st.Leases(ctx, prefix)
		if err != nil {
			return 0, fmt.Errorf("prune tokens: %w", err)
		}
		for _, l := range ls {
			if !l.ExpiresAt.IsZero() && l.ExpiresAt.Before(now) {
				ops = append(ops, store.Op{Type: store.OpDeleteLease, Lease: &store.Lease{Name: l.Name}})
			}
		}
	}
	if len(ops) == 0 {
		return 0, nil
	}
	if _, err := k.st.Apply(ctx, ops...); err != nil {
		return 0, fmt.Errorf("prune tokens: %w", err)
	}
	return len(ops), nil
}
