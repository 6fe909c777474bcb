package token

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/postgres"
	"github.com/meshnames/meshnames/internal/store/postgres/pgtest"
)

// openPostgres opens n stores on one fresh PostgreSQL schema: n instances
// of a control plane sharing a database.
func openPostgres(t *testing.T, n int) []store.Store {
	t.Helper()
	url := pgtest.URL(t)
	var out []store.Store
	for range n {
		st, err := postgres.Open(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		out = append(out, st)
	}
	return out
}

func TestLoadKeys_OneKeyAcrossInstancesStartingTogether(t *testing.T) {
	stores := openPostgres(t, 6)
	keys := make([]*Keys, len(stores))
	var wg sync.WaitGroup
	for i, st := range stores {
		wg.Go(func() {
			k, err := LoadKeys(context.Background(), st)
			if err != nil {
				t.Error(err)
				return
			}
			keys[i] = k
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	created := 0
	for _, k := range keys {
		if k.Created() {
			created++
		}
		if k.CurrentKey() != "k1" {
			t.Errorf("current key %q, want k1", k.CurrentKey())
		}
	}
	if created != 1 {
		t.Errorf("%d instances report creating the first key, want exactly 1", created)
	}
	// A token signed by any instance verifies on every other.
	for i, signer := range keys {
		raw := sign(t, signer, claims(RoleOperator))
		for j, verifier := range keys {
			if _, err := verifier.Verify(raw, t0); err != nil {
				t.Errorf("token signed on instance %d, verified on %d: %v", i, j, err)
			}
		}
	}
	// A restart loads the same key and does not create one.
	again := loadKeys(t, stores[0])
	if again.Created() || again.CurrentKey() != "k1" {
		t.Errorf("reload: created %v, current %q; want false, k1", again.Created(), again.CurrentKey())
	}
}

func TestRotate_NewKeySignsOldTokensStayValid(t *testing.T) {
	stores := openPostgres(t, 2)
	a, b := loadKeys(t, stores[0]), loadKeys(t, stores[1])
	old := sign(t, a, claims(RoleReadOnly))

	kid, err := a.Rotate(context.Background())
	if err != nil || kid != "k2" {
		t.Fatalf("Rotate = %q, %v; want k2", kid, err)
	}
	fresh := sign(t, a, claims(RoleReadOnly))
	if h, _ := readHeader(fresh); h.Kid != "k2" {
		t.Errorf("token signed after rotation names key %q, want k2", h.Kid)
	}
	for _, raw := range []string{old, fresh} {
		if _, err := a.Verify(raw, t0); err != nil {
			t.Errorf("rotating instance: Verify = %v", err)
		}
	}
	// The other instance knows k2 after its refresh, and keeps k1.
	if _, err := b.Verify(fresh, t0); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("other instance before refresh: Verify = %v, want ErrUnknownKey", err)
	}
	if err := b.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{old, fresh} {
		if _, err := b.Verify(raw, t0); err != nil {
			t.Errorf("other instance after refresh: Verify = %v", err)
		}
	}
	if b.CurrentKey() != "k2" {
		t.Errorf("other instance signs with %q, want k2", b.CurrentKey())
	}
	// Rotations racing on both instances from the same key add one key,
	// not two: both create the next key's lease, and the store lets one
	// of them in. (Two Rotate calls in a row rightly add two keys, so the
	// race is made here, from the state both instances refreshed to,
	// rather than left to the scheduler.)
	next := [2]int{a.set.Load().number + 1, b.set.Load().number + 1}
	if next[0] != 3 || next[1] != 3 {
		t.Fatalf("next key numbers %v, want 3 on both instances", next)
	}
	var wg sync.WaitGroup
	created := make([]bool, 2)
	for i, k := range []*Keys{a, b} {
		wg.Go(func() {
			var err error
			if created[i], err = k.createKey(context.Background(), next[i]); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if created[0] == created[1] {
		t.Errorf("racing creations of k3: created %v, want exactly one", created)
	}
	for _, k := range []*Keys{a, b} {
		if err := k.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		if k.CurrentKey() != "k3" {
			t.Errorf("after the race an instance signs with %q, want k3", k.CurrentKey())
		}
	}
	ls, err := stores[0].Leases(context.Background(), keyPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 3 {
		t.Errorf("after racing rotations: %d keys, want 3", len(ls))
	}
}

func TestIssueListRevoke(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	k := loadKeys(t, st)
	c := claims(RoleServiceOwner)
	c.ID = ""
	c.Meshes = []string{"payments"}
	raw, signed, err := k.Issue(ctx, c, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if signed.ID == "" {
		t.Fatal("Issue gave the token no ID")
	}
	got, err := k.Verify(raw, t0)
	if err != nil || got.ID != signed.ID || got.Role != RoleServiceOwner {
		t.Fatalf("Verify(issued) = %+v, %v", got, err)
	}
	zone := claims(RoleZone)
	zone.ID = "zone-token"
	if _, _, err := k.Issue(ctx, zone, "admin"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := k.Issue(ctx, zone, "admin"); err == nil {
		t.Error("issuing a second token with the same ID succeeded")
	}

	list, err := k.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 {
		t.Fatalf("List = %+v, want 2 records", list)
	}
	for _, rec := range list {
		if rec.IssuedBy != "admin" || rec.KeyID != "k1" || !rec.RevokedAt.IsZero() {
			t.Errorf("record %+v", rec)
		}
	}

	rec, err := k.Revoke(ctx, signed.ID, "alice", t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if rec.RevokedBy != "alice" || !rec.RevokedAt.Equal(t0.Add(time.Minute)) || rec.Subject != "alice" {
		t.Errorf("Revoke returned %+v", rec)
	}
	if _, err := k.Verify(raw, t0); !errors.Is(err, ErrRevoked) {
		t.Errorf("Verify after revoke = %v, want ErrRevoked (at once on the revoking instance)", err)
	}
	again, err := k.Revoke(ctx, signed.ID, "bob", t0.Add(time.Hour))
	if err != nil || again.RevokedBy != "alice" {
		t.Errorf("second Revoke = %+v, %v; want the first revocation unchanged", again, err)
	}
	for _, id := range []string{"no-such-token", "", "a/b", signed.ID[:4]} {
		if _, err := k.Revoke(ctx, id, "alice", t0); !errors.Is(err, ErrNotIssued) {
			t.Errorf("Revoke(%q) = %v, want ErrNotIssued", id, err)
		}
	}
	list, _ = k.List(ctx)
	revoked := 0
	for _, rec := range list {
		if !rec.RevokedAt.IsZero() {
			revoked++
		}
	}
	if revoked != 1 {
		t.Errorf("List after revoke: %d revoked, want 1", revoked)
	}

	// A restart keeps the revocation.
	if _, err := loadKeys(t, st).Verify(raw, t0); !errors.Is(err, ErrRevoked) {
		t.Errorf("Verify on a fresh Keys = %v, want ErrRevoked", err)
	}
}

func TestIssue_ExtraOpsInTheSameTransaction(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	k := loadKeys(t, st)
	extra := store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: "audit/test", Value: []byte("issued")}}
	if _, _, err := k.Issue(ctx, claims(RoleReadOnly), "admin", extra); err != nil {
		t.Fatal(err)
	}
	if ls, _ := st.Leases(ctx, "audit/test"); len(ls) != 1 {
		t.Errorf("extra op not written: %v", ls)
	}
	bad := store.Op{Type: store.OpCreateLease, Lease: &store.Lease{Name: "audit/test"}}
	c := claims(RoleReadOnly)
	c.ID = "second"
	raw, _, err := k.Issue(ctx, c, "admin", bad)
	if !errors.Is(err, store.ErrAlreadyExists) || raw == "" {
		t.Errorf("Issue with a failing extra op = %q, %v; want the token and the op's error", raw, err)
	}
}

// TestRevoke_ReachesAnotherInstanceWithinASecond runs Run on a second
// instance sharing PostgreSQL and waits for it to refuse a token revoked on
// the first.
func TestRevoke_ReachesAnotherInstanceWithinASecond(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stores := openPostgres(t, 2)
	a, b := loadKeys(t, stores[0]), loadKeys(t, stores[1])
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx, slog.New(slog.NewTextHandler(io.Discard, nil))) }()

	raw, c, err := a.Issue(ctx, claims(RoleOperator), "admin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Verify(raw, t0); err != nil {
		t.Fatalf("other instance before revoke: %v", err)
	}
	revokedAt := time.Now()
	if _, err := a.Revoke(ctx, c.ID, "admin", revokedAt); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := b.Verify(raw, t0)
		if errors.Is(err, ErrRevoked) {
			break
		}
		if time.Since(revokedAt) > time.Second {
			t.Fatalf("the other instance still accepts the token %s after the revocation (%v)", time.Since(revokedAt), err)
		}
		time.Sleep(10 * time.Millisecond) // polling for something that must happen, with a deadline
	}
	t.Logf("revocation took effect on the other instance after %s", time.Since(revokedAt))
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}

func TestPrune_DropsRecordsLongExpired(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	k := loadKeys(t, st)
	short := claims(RoleReadOnly)
	short.ID = "short"
	long := claims(RoleReadOnly)
	long.ID, long.ExpiresAt = "long", t0.Add(30*24*time.Hour)
	for _, c := range []Claims{short, long} {
		if _, _, err := k.Issue(ctx, c, "admin"); err != nil {
			t.Fatal(err)
		}
		if _, err := k.Revoke(ctx, c.ID, "admin", t0); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing goes while the token could be presented, nor a day after.
	if n, err := k.Prune(ctx, short.ExpiresAt.Add(pruneAfter-time.Second)); err != nil || n != 0 {
		t.Fatalf("Prune before = %d, %v; want 0", n, err)
	}
	n, err := k.Prune(ctx, short.ExpiresAt.Add(pruneAfter+time.Second))
	if err != nil || n != 2 {
		t.Fatalf("Prune after = %d, %v; want 2 (the record and the revocation of short)", n, err)
	}
	list, _ := k.List(ctx)
	if len(list) != 1 || list[0].ID != "long" || list[0].RevokedAt.IsZero() {
		t.Errorf("List after prune = %+v, want long, revoked", list)
	}
	if ls, _ := st.Leases(ctx, keyPrefix); len(ls) != 1 {
		t.Errorf("Prune touched the keys: %v", ls)
	}
}
