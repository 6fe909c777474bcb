// Package store defines the contract of meshnames' source of truth: a
// durable set of resources keyed by (kind, mesh, name), each with a version
// for optimistic concurrency, a store-wide revision that increases with
// every write, and an ordered change feed that a reader resumes from a
// revision.
//
// Backends live in sqlite/ (embedded, the default) and postgres/; both run
// the conformance suite in storetest/. This package imports resource only.
//
// # Writes
//
// Every write goes through Apply, which takes a batch of independent
// operations and commits them in one transaction: each operation succeeds or
// fails on its own (a stale version fails that operation only), and the
// successful ones are durable when Apply returns. Create, Update,
// UpdateStatus and Delete are one-operation conveniences. Update writes
// labels and spec and keeps status; UpdateStatus writes status and keeps
// labels and spec; both bump the version, so a status computed from an old
// spec is rejected as a conflict.
//
// # Change feed
//
// Changes returns, in revision order, the resources whose last write has a
// revision greater than the given one: the current state of each changed
// resource (a Put) or a tombstone (a Delete). Intermediate states of a
// resource written several times are not kept; consumers are level-based.
// Tombstones are kept for a retention period; a reader that resumes from a
// revision older than the oldest dropped tombstone gets ErrCompacted and
// must List again. Changed wakes readers when new revisions may exist.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshnames/meshnames/internal/resource"
)

// Sentinel errors. Wrap them with context; test them with errors.Is.
var (
	ErrNotFound      = errors.New("not found")
	ErrAlreadyExists = errors.New("already exists")
	// ErrConflict means the write named a version that is no longer current.
	ErrConflict = errors.New("conflict: the resource was modified concurrently")
	// ErrCompacted means the change feed no longer holds the revisions asked for.
	ErrCompacted = errors.New("revision compacted")
	// ErrTooLarge means the encoded object exceeds MaxObjectBytes.
	ErrTooLarge = errors.New("object too large")
	// ErrClosed means the store was closed.
	ErrClosed = errors.New("store closed")
	// ErrUnavailable wraps failures to reach the backing database; the
	// operation may succeed later.
	ErrUnavailable = errors.New("store unavailable")
)

// MaxObjectBytes bounds the encoded size of one object (labels, spec and
// status together).
const MaxObjectBytes = 1 << 20

// OpType says what an Op does.
type OpType int

const (
	OpCreate OpType = iota + 1
	OpUpdate
	OpUpdateStatus
	OpDelete
)

func (t OpType) String() string {
	switch t {
	case OpCreate:
		return "create"
	case OpUpdate:
		return "update"
	case OpUpdateStatus:
		return "update status"
	case OpDelete:
		return "delete"
	}
	return fmt.Sprintf("OpType(%d)", int(t))
}

// Op is one write.
//
//   - OpCreate stores Object (its Version is ignored); ErrAlreadyExists if
//     a live resource has its key.
//   - OpUpdate replaces labels and spec of Object's key; Object.Version must
//     equal the stored version.
//   - OpUpdateStatus replaces the status of Object's key; Object.Version
//     must equal the stored version.
//   - OpDelete removes Key; Version, when not 0, must equal the stored version.
type Op struct {
	Type    OpType
	Object  *resource.Object
	Key     resource.Key
	Version int64
}

// Result is the outcome of one Op.
type Result struct {
	// Object is the stored resource after the write (nil for deletes and failures).
	Object *resource.Object
	// Revision is the revision the write was given.
	Revision int64
	Err      error
}

// EventType tells a change feed Put from Delete.
type EventType int

const (
	EventPut EventType = iota + 1
	EventDelete
)

// Event is one entry of the change feed.
type Event struct {
	Type     EventType
	Revision int64
	Key      resource.Key
	Object   *resource.Object // nil for deletes
}

// Store is the source of truth. Implementations are safe for concurrent
// use and return objects that the caller owns.
type Store interface {
	// Get returns the live resource with key k, or ErrNotFound.
	Get(ctx context.Context, k resource.Key) (*resource.Object, error)
	// List returns every live resource of kind k (every kind when k is
	// ""), ordered by kind, mesh and name, and the revision the list
	// reflects. An unknown kind is an error.
	List(ctx context.Context, k resource.Kind) ([]*resource.Object, int64, error)
	// Apply commits ops in one transaction; see Op. The returned error is
	// for failures of the whole batch (ErrUnavailable, ErrClosed); failures
	// of single operations are in their Result. If ctx ends before the
	// batch is taken up nothing is written; if it ends later, Apply returns
	// the context's error and the batch may still commit.
	Apply(ctx context.Context, ops ...Op) ([]Result, error)
	// Changes returns up to limit events (all of them when limit <= 0) with
	// revisions greater than after, in revision order, or ErrCompacted.
	Changes(ctx context.Context, after int64, limit int) ([]Event, error)
	// Changed returns a channel that is closed at the next write that may
	// be visible to Changes (in this process, or in another process sharing
	// the database). Take the channel before calling Changes so that no
	// wake-up is lost.
	Changed() <-chan struct{}
	// Close releases the store; later calls, Close included, return ErrClosed.
	Close() error
}

// Compacter is implemented by stores that drop tombstones older than a
// retention period from the change feed (both backends). It returns how
// many it dropped; readers behind the new horizon get ErrCompacted.
type Compacter interface {
	Compact(ctx context.Context, retention time.Duration) (int, error)
}

// Create stores a new resource.
func Create(ctx context.Context, s Store, obj *resource.Object) (*resource.Object, error) {
	return one(ctx, s, Op{Type: OpCreate, Object: obj})
}

// Update replaces labels and spec; obj.Version must be current.
func Update(ctx context.Context, s Store, obj *resource.Object) (*resource.Object, error) {
	return one(ctx, s, Op{Type: OpUpdate, Object: obj})
}

// UpdateStatus replaces status; obj.Version must be current.
func UpdateStatus(ctx context.Context, s Store, obj *resource.Object) (*resource.Object, error) {
	return one(ctx, s, Op{Type: OpUpdateStatus, Object: obj})
}

// Delete removes a resource; version 0 deletes whatever version is stored.
func Delete(ctx context.Context, s Store, k resource.Key, version int64) (int64, error) {
	rs, err := s.Apply(ctx, Op{Type: OpDelete, Key: k, Version: version})
	if err != nil {
		return 0, err
	}
	return rs[0].Revision, rs[0].Err
}

func one(ctx context.Context, s Store, op Op) (*resource.Object, error) {
	rs, err := s.Apply(ctx, op)
	if err != nil {
		return nil, err
	}
	return rs[0].Object, rs[0].Err
}
