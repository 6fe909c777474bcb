package kube

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/token"
)

// leasesChanged waits until s follows its leases (its watch started) and
// returns the channel of prefix.
func leasesChanged(t *testing.T, s *Store, prefix string) <-chan struct{} {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ch := s.LeasesChanged(prefix); ch != nil {
			return ch
		}
		if time.Now().After(deadline) {
			t.Fatalf("LeasesChanged(%q) still nil 10 s after Open: the lease watch did not start", prefix)
		}
		time.Sleep(10 * time.Millisecond) // polling for something that must happen, with a deadline
	}
}

func putLease(t *testing.T, s *Store, name string) {
	t.Helper()
	rs, err := s.Apply(t.Context(), store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: name, Value: []byte("v")}})
	if err == nil {
		err = rs[0].Err
	}
	if err != nil {
		t.Fatalf("put lease %s: %v", name, err)
	}
}

// closedWithin reports whether ch is closed now or closes within d.
func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	default:
	}
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// TestStore_LeasesChangedByPrefix: a lease written by another instance
// wakes the readers of its prefixes, and only those; the watch's events
// come in order, so once the reader of the first write's prefix is woken,
// a reader of another prefix that was not woken never will be by it.
func TestStore_LeasesChangedByPrefix(t *testing.T) {
	s, openOther := open(t, nil)
	other := openOther()
	vips := leasesChanged(t, s, "vip/")
	revoked := leasesChanged(t, s, "token/revoked/")
	keys := leasesChanged(t, s, "token/key/")
	if again := s.LeasesChanged("token/key/"); again != keys {
		t.Error("LeasesChanged of one prefix twice without a change: two channels; want the same one")
	}

	putLease(t, other, "vip/10.0.0.1")
	if !closedWithin(vips, 10*time.Second) {
		t.Fatal("a lease vip/10.0.0.1 written by another instance did not wake the reader of vip/ within 10 s")
	}
	if closedWithin(revoked, 0) || closedWithin(keys, 0) {
		t.Fatal("a lease vip/10.0.0.1 woke the readers of token/revoked/ or token/key/")
	}

	putLease(t, other, "token/revoked/tok-1")
	if !closedWithin(revoked, 10*time.Second) {
		t.Fatal("a lease token/revoked/tok-1 written by another instance did not wake the reader of token/revoked/ within 10 s")
	}
	if closedWithin(keys, 0) {
		t.Fatal("a lease token/revoked/tok-1 woke the reader of token/key/")
	}

	// Deleted counts too.
	revoked = s.LeasesChanged("token/revoked/")
	rs, err := other.Apply(t.Context(), store.Op{Type: store.OpDeleteLease, Lease: &store.Lease{Name: "token/revoked/tok-1"}})
	if err != nil || rs[0].Err != nil {
		t.Fatalf("delete lease: %v %v", err, rs)
	}
	if !closedWithin(revoked, 10*time.Second) {
		t.Fatal("deleting token/revoked/tok-1 did not wake the reader of token/revoked/ within 10 s")
	}

	// Closing the store wakes every reader and then tells them to poll.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(keys, time.Second) {
		t.Fatal("Close did not wake the reader of token/key/")
	}
	if ch := s.LeasesChanged("token/key/"); ch != nil {
		t.Error("LeasesChanged after Close is not nil; want nil (the caller polls, and its reads fail)")
	}
}

// TestLeaseWatch_FailedWatchMeansPolling: while the watch fails (the API
// server is down, or the Role lacks watch on leases), every reader is
// woken and told to poll; a watch that starts again brings the channels
// back.
func TestLeaseWatch_FailedWatchMeansPolling(t *testing.T) {
	s := &Store{}
	s.leaseWatch.waits = map[string]chan struct{}{}
	h := leaseHandler{&s.leaseWatch}
	if ch := s.LeasesChanged("token/"); ch != nil {
		t.Fatal("LeasesChanged before the watch started is not nil")
	}
	h.Watching(nil)
	ch := s.LeasesChanged("token/")
	if ch == nil {
		t.Fatal("LeasesChanged with the watch running is nil")
	}
	h.Watching(errors.New("forbidden: cannot watch leases"))
	if !closedWithin(ch, 0) {
		t.Fatal("a failed watch did not wake the reader")
	}
	if ch := s.LeasesChanged("token/"); ch != nil {
		t.Fatal("LeasesChanged while the watch fails is not nil")
	}
	h.Watching(nil)
	ch = s.LeasesChanged("token/")
	if ch == nil {
		t.Fatal("LeasesChanged once the watch runs again is nil")
	}
	h.Replace(nil, "7")
	if !closedWithin(ch, 0) {
		t.Fatal("a list again (410 Gone) did not wake the reader")
	}
}

// TestStore_RevocationReachesAnotherInstanceWithoutPolling: a token
// revoked on one instance is refused by another whose Run does not poll
// (a refresh interval of an hour): the lease watch tells it.
func TestStore_RevocationReachesAnotherInstanceWithoutPolling(t *testing.T) {
	s, openOther := open(t, nil)
	other := openOther()
	leasesChanged(t, other, "token/")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	a, err := token.LoadKeys(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	b, err := token.LoadKeys(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	b.RefreshInterval = time.Hour
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx, testLog(t)) }()

	now := time.Now().Truncate(time.Second)
	raw, c, err := a.Issue(ctx, token.Claims{Subject: "alice", Role: token.RoleOperator, IssuedAt: now, ExpiresAt: now.Add(time.Hour)}, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Verify(raw, now); err != nil {
		t.Fatalf("the other instance before the revocation: %v", err)
	}
	revokedAt := time.Now()
	if _, err := a.Revoke(ctx, c.ID, "admin", revokedAt); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := b.Verify(raw, now)
		if errors.Is(err, token.ErrRevoked) {
			break
		}
		if time.Since(revokedAt) > 5*time.Second {
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
