package zonesync

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/meshnames/meshnames/internal/store"
)

// Leases (the store's small records beside the resources) this package
// keeps.
const (
	// leaseEpoch identifies this store to peers: a replaced or restored
	// store has another, so a peer's revisions are not trusted across it.
	leaseEpoch = "zonesync/epoch"
	// leaseTLS holds the global's sync key and certificate.
	leaseTLS = "zonesync/tls"
	// leaseFromGlobal records, on a zone, how far it stored the global's feed.
	leaseFromGlobal = "zonesync/received/global"
	// leaseFromZone + zone records, on the global, how far it stored a
	// zone's feed.
	leaseFromZone = "zonesync/received/zone/"
	// leaseInsight + zone is a zone's insight, written by the global
	// instance serving its stream, read by every instance.
	leaseInsight = "zonesync/insight/"
)

// readLease returns the lease named name, or nil.
func readLease(ctx context.Context, st store.Store, name string) (*store.Lease, error) {
	ls, err := st.Leases(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("read lease %s: %w", name, err)
	}
	for _, l := range ls {
		if l.Name == name {
			return &l, nil
		}
	}
	return nil, nil
}

// ensureLease returns the value of the lease name, creating it with
// value() when it does not exist. Instances that start together on one
// PostgreSQL database agree on one value: the create succeeds for one of
// them, and the others read what it wrote.
func ensureLease(ctx context.Context, st store.Store, name string, value func() ([]byte, error)) ([]byte, bool, error) {
	for range 3 {
		l, err := readLease(ctx, st, name)
		if err != nil {
			return nil, false, err
		}
		if l != nil {
			return l.Value, false, nil
		}
		v, err := value()
		if err != nil {
			return nil, false, err
		}
		rs, err := st.Apply(ctx, store.Op{Type: store.OpCreateLease, Lease: &store.Lease{Name: name, Value: v}})
		if err == nil {
			err = rs[0].Err
		}
		switch {
		case err == nil:
			return v, true, nil
		case errors.Is(err, store.ErrAlreadyExists):
			continue // another instance created it: read theirs
		default:
			return nil, false, fmt.Errorf("create lease %s: %w", name, err)
		}
	}
	return nil, false, fmt.Errorf("lease %s: created and gone again", name)
}

// Epoch returns this store's sync epoch, creating it at first use.
func Epoch(ctx context.Context, st store.Store) (string, error) {
	v, _, err := ensureLease(ctx, st, leaseEpoch, func() ([]byte, error) {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		return []byte(hex.EncodeToString(b)), nil
	})
	return string(v), err
}

// readPosition returns the position recorded in the lease name; the zero
// Position when none is.
func readPosition(ctx context.Context, st store.Store, name string) (Position, error) {
	l, err := readLease(ctx, st, name)
	if err != nil || l == nil {
		return Position{}, err
	}
	var p Position
	if err := json.Unmarshal(l.Value, &p); err != nil {
		return Position{}, fmt.Errorf("lease %s: %w", name, err)
	}
	return p, nil
}
