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
//
// # Leases and records
//
// Beside the resources the store keeps leases (Lease: small named records
// that are replaced, for the control plane's bookkeeping) and record
// streams (Record: append-only logs such as the audit log, queried by
// terms and time through Recorder). Neither has a revision or is in the
// change feed. Both are written by Apply, so a write and its record commit
// together (Op.DependsOn).
//
// # Fencing
//
// Controllers write only while their instance leads (ARCHITECTURE.md
// section 3). A leader that was cut off may not have noticed yet that
// another instance took over; fencing keeps its writes out. The elector
// puts a Fence in the context it gives the leader's work (WithFence); Apply
// called with that context checks, in the transaction of the writes, that
// the fence's lease still names the same holder and term and has not
// expired by the database's clock, and holds that lease row until commit,
// so a takeover waits for the write rather than overtaking it. When the
// check fails the whole batch fails with ErrFenced and nothing of it is
// written. Writes without a fence (the API's) are not checked.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	// ErrDiskFull means the store's disk has no room for the write; the
	// store wraps it with ErrUnavailable, as writes succeed again once
	// there is room.
	ErrDiskFull = errors.New("disk full")
	// ErrDependencyFailed means an operation named in Op.DependsOn failed,
	// so the operation that depends on it was not written.
	ErrDependencyFailed = errors.New("an operation it depends on failed")
	// ErrFenced means the batch carried a Fence that is no longer current:
	// another instance leads, or the lease expired. Nothing was written;
	// the writer must stop, it is not the leader.
	ErrFenced = errors.New("fenced: the writer no longer holds the leader lease")
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
	// OpPutLease creates or replaces Lease.
	OpPutLease
	// OpDeleteLease removes the lease named Lease.Name; removing one that
	// does not exist is not an error.
	OpDeleteLease
	// OpPatchStatus replaces the parts of a status that one controller
	// owns (see StatusPatch).
	OpPatchStatus
	// OpCreateLease creates Lease only if no lease of its name exists
	// (expired ones included); otherwise it fails with ErrAlreadyExists.
	OpCreateLease
	// OpAppendRecord appends Record to its stream (see Record).
	OpAppendRecord
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
	case OpPutLease:
		return "put lease"
	case OpDeleteLease:
		return "delete lease"
	case OpPatchStatus:
		return "patch status"
	case OpCreateLease:
		return "create lease"
	case OpAppendRecord:
		return "append record"
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
//   - OpPutLease and OpDeleteLease write Lease (see Lease).
//   - OpCreateLease writes Lease only when no lease of its name exists,
//     expired or not, and fails with ErrAlreadyExists otherwise: instances
//     that start together agree on one value (a signing key created at
//     first start) without a read-then-write race.
//   - OpAppendRecord appends Record to its stream (see Record).
//
// DependsOn, on any operation, lists the indexes of earlier operations of
// the same Apply call that must have succeeded for this one to run; when
// one failed, this one writes nothing and fails with ErrDependencyFailed.
// It lets a record of a write (an audit entry, a history event) commit
// with the write and only with it.
//   - OpPatchStatus replaces, in the stored status of Object's key, only
//     the parts Patch names, taking them from Object.Status; labels, spec
//     and the rest of the status stay as stored. Object.Version is not
//     checked: each controller owns its parts, so controllers writing one
//     status at the same time do not conflict, and a controller's result
//     computed from an older state is replaced by its next write, which the
//     change it missed causes. The version is bumped like any write.
type Op struct {
	Type OpType
	// Object is what a create, an update or a status write writes. The
	// status of an OpPatchStatus may be handed to the readers of the
	// change feed as it is (a patch over no status that leaves nothing
	// out stores exactly it): the caller must not modify it once Apply
	// is called.
	Object *resource.Object
	Patch  *StatusPatch
	// Handed, for OpCreate and OpUpdate, hands Object to the store: the
	// caller neither modifies it nor anything it holds (labels, spec,
	// status) once Apply is called, and the change feed's readers get
	// its labels, spec and status as they are, not a deep copy (a
	// runner's creates and a zone's synced resources, each written once).
	Handed bool
	// DiscardObject leaves Result.Object nil: the caller needs only the
	// error and the revision, and the store skips decoding what it wrote
	// (controllers' writes, most of the writes of a busy control plane).
	DiscardObject bool
	// Base, for OpPatchStatus, is the object the new status was decided
	// over, read-only: when the stored resource is still at Base's
	// revision, the store builds the written object from Base's labels
	// and spec (sharing them) and the patched status, instead of decoding
	// the stored row for the change feed. The caller must not modify Base
	// afterwards (a cache's shared object is never modified).
	Base    *resource.Object
	Key     resource.Key
	Version int64
	// Created, for OpCreate, is the creation time to record instead of the
	// store's clock (zero for the store's): a controllers' runner decides a
	// new resource's names with it before storing it (the oldest service
	// keeps a contested name). The Kubernetes store ignores it.
	Created   time.Time
	Lease     *Lease
	Record    *Record
	DependsOn []int
}

// StatusPatch names the parts of a status one controller owns: top-level
// status fields by their JSON name (such as "addresses" or "vips"), and
// the conditions of some types. A field absent from the new status is
// removed; the conditions of the named types are replaced by those of the
// new status, in its order, after the others.
type StatusPatch struct {
	Fields     []string
	Conditions []string
}

// Lease is a small named record kept beside the resources for the control
// plane's own bookkeeping: VIP allocations and their quarantine (so that
// both survive restarts and leader changes), and the leader lease. Leases
// are not resources: they have no revision, are not in the change feed and
// are not served by the API. Writing one in the same Apply as a status
// write commits both in one transaction.
type Lease struct {
	// Name identifies the lease, such as "vip/MeshService/241.0.0.7"; at
	// most 253 bytes of printable ASCII.
	Name string
	// Value is opaque to the store; at most MaxLeaseValueBytes.
	Value []byte
	// ExpiresAt is when the lease stops mattering; zero means never. The
	// store keeps expired leases until they are deleted: expiry is the
	// reader's business.
	ExpiresAt time.Time
}

// MaxLeaseValueBytes bounds Lease.Value.
const MaxLeaseValueBytes = 4096

// Record is one entry of an append-only record stream kept beside the
// resources: the audit log of the API's writes, the history of hostnames
// and VIPs. Like leases, records have no revision and are not in the
// change feed; unlike them, they are never replaced, only appended and,
// past a retention, compacted away (Recorder).
type Record struct {
	// Stream names the log, such as "audit" or "history": 1 to 63 lower
	// case letters, digits and '-'.
	Stream string
	// Seq is given by the store at append: it increases with every record
	// (of any stream) in commit order, so a reader that has seen Seq N has
	// seen every record below it. Ignored on append.
	Seq int64
	// Time is when the recorded event happened; the zero time means the
	// store's clock at the append.
	Time time.Time
	// Terms are what the record can be found by (RecordQuery.Terms), such
	// as "name=redis" or "vip=241.0.0.7": at most MaxRecordTerms, each 1
	// to MaxRecordTermBytes bytes of UTF-8 without control characters.
	Terms []string
	// Data is opaque to the store; at most MaxRecordBytes.
	Data []byte
}

// Limits of a Record.
const (
	MaxRecordBytes     = 16 << 10
	MaxRecordTerms     = 16
	MaxRecordTermBytes = 512
)

// RecordQuery selects the records of one stream.
type RecordQuery struct {
	Stream string
	// Terms, when not empty, keep the records that carry every one.
	Terms []string
	// Since and Until, when not zero, keep Since <= Time < Until.
	Since, Until time.Time
	// After and Before, when not 0, keep After < Seq < Before: the
	// cursors of paging.
	After, Before int64
	// Limit bounds the result: at most MaxRecordLimit, DefaultRecordLimit
	// when 0 or less.
	Limit int
	// Descending returns the newest records first.
	Descending bool
}

// Limits of a RecordQuery.
const (
	DefaultRecordLimit = 1000
	MaxRecordLimit     = 10000
)

// Recorder is implemented by stores that keep record streams (both
// backends; OpAppendRecord fails on a store that does not).
type Recorder interface {
	// Records returns the records q selects in Seq order (newest first
	// when q.Descending), each the caller's to keep.
	Records(ctx context.Context, q RecordQuery) ([]Record, error)
	// CompactRecords deletes the records of stream older than before and
	// returns how many it deleted.
	CompactRecords(ctx context.Context, stream string, before time.Time) (int, error)
}

// Fence is a leader's claim on a lease: writes made under it are valid
// only while the lease named Lease holds LeaseValue (the same holder and
// term) and has not expired by the database's clock.
type Fence struct {
	// Lease names the lease, such as "leader".
	Lease string
	// Holder identifies the instance that holds it.
	Holder string
	// Term increases each time the lease changes hands.
	Term int64
}

// fenceValue is the encoding of a fenced lease's Value.
type fenceValue struct {
	Holder string `json:"holder"`
	Term   int64  `json:"term"`
}

// LeaseValue is the Value of the lease while f holds it. The encoding is
// deterministic, so the fence check compares bytes.
func (f Fence) LeaseValue() []byte {
	b, _ := json.Marshal(fenceValue{Holder: f.Holder, Term: f.Term}) // cannot fail
	return b
}

// ParseFence reads the holder and term of a lease written with
// Fence.LeaseValue.
func ParseFence(l Lease) (Fence, error) {
	var v fenceValue
	if err := json.Unmarshal(l.Value, &v); err != nil {
		return Fence{}, fmt.Errorf("lease %q: not a fenced lease: %w", l.Name, err)
	}
	return Fence{Lease: l.Name, Holder: v.Holder, Term: v.Term}, nil
}

type fenceKey struct{}

// WithFence returns a context whose Apply calls are fenced by f.
func WithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

// FenceFrom returns the fence of ctx, if any.
func FenceFrom(ctx context.Context) (Fence, bool) {
	f, ok := ctx.Value(fenceKey{}).(Fence)
	return f, ok
}

// Result is the outcome of one Op.
type Result struct {
	// Object is the stored resource after the write (nil for deletes and failures).
	Object *resource.Object
	// Revision is the revision the write was given.
	Revision int64
	// Previous is the revision of the resource this write replaced, 0
	// when there was none (a create) or the store does not say (a
	// subscriber that wrote at Revision over Previous, and had seen
	// Previous, has seen everything up to Revision).
	Previous int64
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
	// Object is nil for deletes. It is read-only: the store may hand the
	// same object to every reader of its feed (and keep it), so a reader
	// that changes it clones it first.
	Object *resource.Object
	// Encoding, when the store has it at hand (its own recent writes), is
	// Object's spec and status as the store encoded them: a reader that
	// keeps resources encoded (the cache's freezer) takes it rather than
	// encode Object again. Read-only.
	Encoding *Encoding
}

// Encoding is a resource's spec and status as a store encodes them
// (JSON, "" for none), which decode to the resource's.
type Encoding struct{ Spec, Status string }

// Store is the source of truth. Implementations are safe for concurrent
// use and return objects that the caller owns, except the change feed's
// (Event.Object), which are read-only.
type Store interface {
	// Get returns the live resource with key k, or ErrNotFound.
	Get(ctx context.Context, k resource.Key) (*resource.Object, error)
	// List returns every live resource of kind k (every kind when k is
	// ""), ordered by kind, mesh and name, and the revision the list
	// reflects. An unknown kind is an error.
	List(ctx context.Context, k resource.Kind) ([]*resource.Object, int64, error)
	// Apply commits ops in one transaction; see Op. The returned error is
	// for failures of the whole batch (ErrUnavailable, ErrClosed, ErrFenced
	// when ctx carries a fence that is no longer current); failures of
	// single operations are in their Result. If ctx ends before the
	// batch is taken up nothing is written; if it ends later, Apply returns
	// the context's error and the batch may still commit.
	Apply(ctx context.Context, ops ...Op) ([]Result, error)
	// Changes returns up to limit events (all of them when limit <= 0) with
	// revisions greater than after, in revision order, or ErrCompacted.
	Changes(ctx context.Context, after int64, limit int) ([]Event, error)
	// Leases returns the leases whose names start with prefix, ordered by
	// name, expired ones included.
	Leases(ctx context.Context, prefix string) ([]Lease, error)
	// Changed returns a channel that is closed at the next write that may
	// be visible to Changes (in this process, or in another process sharing
	// the database). Take the channel before calling Changes so that no
	// wake-up is lost.
	Changed() <-chan struct{}
	// Close releases the store; later calls, Close included, return ErrClosed.
	Close() error
}

// Keeper is implemented by a store that holds every live resource in its
// own memory, in a compact form that never changes once made (the
// Kubernetes store, whose source of truth is the API server): a reader
// that keeps resources encoded (the cache's freezer) holds the store's
// copy rather than a copy of its own.
type Keeper interface {
	// Kept returns the store's copy of revision rev of the resource k;
	// false when it holds another revision, or none.
	Kept(k resource.Key, rev int64) (Kept, bool)
}

// Kept is one revision of one resource as a Keeper holds it. Its methods
// are safe for concurrent use, and it reads the same for as long as
// anyone holds it, whatever the store does next.
type Kept interface {
	// Object decodes it; the caller owns the result.
	Object() (*resource.Object, error)
	// AppendJSON appends its document, as resource.Object.AppendJSON
	// writes it for Object's result.
	AppendJSON(b []byte) ([]byte, error)
	// Revision is its revision.
	Revision() int64
}

// LeaseNotifier is implemented by a store that can tell when its leases
// change, so that a reader that must see other instances' lease writes
// soon (the API's signing keys and revocations) need not poll: the
// Kubernetes store, which follows its Lease objects with a watch.
type LeaseNotifier interface {
	// LeasesChanged returns a channel closed once a lease whose name
	// starts with prefix is written or deleted after the call, or once the
	// store can no longer tell (its watch failed or listed again, or the
	// store closed). It returns nil while the store cannot tell: the
	// caller then polls.
	LeasesChanged(prefix string) <-chan struct{}
}

// Compacter is implemented by stores that drop tombstones older than a
// retention period from the change feed (both backends). It returns how
// many it dropped; readers behind the new horizon get ErrCompacted.
type Compacter interface {
	Compact(ctx context.Context, retention time.Duration) (int, error)
}

// Creation is a new resource to store, with writes that commit with it
// and only with it (such as the audit entry of the API request that
// creates it): what a writer hands a controller runner that stores new
// resources together with their status (reconcile.Runner.Create). The
// runner hands Object to the store (Op.Handed) when it writes it: the
// writer does not modify it, nor its labels and spec, once the runner
// has created it (one not created, or not taken, is the writer's again).
type Creation struct {
	Object *resource.Object
	With   []Op
	// After is the revision of a write of the caller's that may hold what
	// decides Object's status (a HostnameGenerator stored just before the
	// services it names): the runner observes every change up to it
	// before it decides. 0 for none.
	After int64
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

// Backuper is implemented by the stores that can write an online backup of
// themselves: the embedded engines (pebble and SQLite). PostgreSQL and the
// Kubernetes store do not: their databases have their own backups.
type Backuper interface {
	// Backup writes to w a tar stream of a data directory that holds a
	// consistent snapshot of the store: extracted into an empty
	// directory, it is a data directory the same engine opens. Writes
	// go on during the backup; the snapshot holds every write
	// acknowledged before Backup was called. The stream holds the
	// store's files only (not the lock file, nor anything else in the
	// data directory). When Backup fails, what it wrote to w is not a
	// backup.
	Backup(ctx context.Context, w io.Writer) (BackupInfo, error)
}

// BackupInfo describes a backup that Backup wrote.
type BackupInfo struct {
	// Engine is the engine that wrote it: "pebble" or "sqlite".
	Engine string
	// Revision is the store revision of the snapshot: the last write it
	// holds.
	Revision int64
	// Files are the paths in the tar stream, in its order.
	Files []string
}

// MemoryFlusher is a store that holds recent writes in memory (pebble's
// memtable) and can write them out once a burst of writes is over, and
// drop what it kept to speed up those writes.
type MemoryFlusher interface {
	FlushMemory() error
}

// Known is a feed reader's own copy of the put of key k at revision: the
// object, read-only (nil when the reader has no use for it), and ok when
// the reader holds that very revision (a cache of the store). It must not
// call the store.
type Known func(k resource.Key, revision int64) (obj *resource.Object, ok bool)

// KnownFeed is a store whose change feed takes the objects of puts the
// reader holds already instead of reading and decoding them. A sync
// sender reads its store's whole feed while its cache holds nearly every
// object of it, decoded (a global's feed is every zone's services), or has
// no use for most of it (a zone sends only what was created in it).
type KnownFeed interface {
	// ChangesKnown is Changes, except that a put for which known reports
	// ok comes with the object known returned (nil: none), which the
	// reader must not modify. known is asked before the write is read, so
	// it must report ok only for a key and revision the reader knows to
	// be a put; it may be asked about writes the feed then leaves out (a
	// key written again later in the range).
	ChangesKnown(ctx context.Context, after int64, limit int, known Known) ([]Event, error)
}
