package backend

import (
	"fmt"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// Row is a resource as the backends store it: live, or a tombstone
// (Deleted) that keeps only its key, version, revision and times. Labels,
// Spec and Status are the JSON text of Encode; Status is "" when there is
// none. Times are Unix nanoseconds.
type Row struct {
	Key               resource.Key
	Version, Revision int64
	Deleted           bool
	Labels            string
	Spec              string
	Status            string
	Created, Modified int64
	// StatusOfOp, not stored, says that Status encodes the status of the
	// operation that wrote the row as it is (a status patch over none
	// that left nothing out): the change feed may take that status
	// instead of decoding Status.
	StatusOfOp bool
}

// Size is what counts against store.MaxObjectBytes.
func (r *Row) Size() int { return len(r.Labels) + len(r.Spec) + len(r.Status) }

// Object decodes a live row into an object the caller owns.
func (r *Row) Object() (*resource.Object, error) {
	return Decode(r.Key, r.Version, r.Revision, r.Created, r.Modified, r.Labels, r.Spec, r.Status)
}

// Encoding is the spec and status of a live row as stored.
func (r *Row) Encoding() *store.Encoding {
	return &store.Encoding{Spec: r.Spec, Status: r.Status}
}

// Next decides what the resource operation op, prepared as p, writes over
// cur, the stored row of its key (nil when there is none; a tombstone is
// not live), at now: the next row, whose Revision the caller gives, or the
// operation's failure (store.ErrAlreadyExists, ErrNotFound, ErrConflict,
// ErrTooLarge, a status patch that does not apply) naming the operation
// and the key.
func Next(op store.Op, p *Prepared, cur *Row, now int64) (Row, error) {
	next := Row{Key: p.Key, Labels: p.Enc.Labels, Spec: p.Enc.Spec, Status: p.Enc.Status, Modified: now}
	fail := func(err error, detail string) (Row, error) {
		return Row{}, fmt.Errorf("%s %s: %w%s", op.Type, p.Key, err, detail)
	}
	if p.EncodeErr != nil {
		return fail(p.EncodeErr, "")
	}
	live := cur != nil && !cur.Deleted
	switch op.Type {
	case store.OpCreate:
		if live {
			return fail(store.ErrAlreadyExists, "")
		}
		next.Version, next.Created = 1, now
		if !op.Created.IsZero() {
			next.Created = op.Created.UnixNano()
		}
	case store.OpUpdate, store.OpUpdateStatus, store.OpDelete, store.OpPatchStatus:
		want := op.Version
		if op.Type != store.OpDelete {
			want = op.Object.Version
		}
		switch {
		case !live:
			return fail(store.ErrNotFound, "")
		case op.Type == store.OpPatchStatus:
			// Not versioned: the writer replaces only what it owns.
		case op.Type != store.OpDelete || want != 0:
			if want != cur.Version {
				return fail(store.ErrConflict, fmt.Sprintf(" (version %d, stored %d)", want, cur.Version))
			}
		}
		next.Version, next.Created = cur.Version+1, cur.Created
		switch op.Type {
		case store.OpUpdate:
			next.Status = cur.Status
		case store.OpUpdateStatus:
			next.Labels, next.Spec = cur.Labels, cur.Spec
		case store.OpPatchStatus:
			next.Labels, next.Spec = cur.Labels, cur.Spec
			var err error
			if next.Status, next.StatusOfOp, err = PatchStatus(cur.Status, next.Status, op.Patch); err != nil {
				return fail(err, "")
			}
		case store.OpDelete:
			next.Deleted = true // a tombstone keeps no labels, spec or status
			next.Labels, next.Spec, next.Status = "", "", ""
		}
	}
	if next.Size() > store.MaxObjectBytes {
		return fail(store.ErrTooLarge, fmt.Sprintf(" (%d bytes, limit %d)", next.Size(), store.MaxObjectBytes))
	}
	return next, nil
}

// LiveRevision is the revision of r when it holds a live resource, 0
// when r is nil or a tombstone (store.Result.Previous).
func LiveRevision(r *Row) int64 {
	if r == nil || r.Deleted {
		return 0
	}
	return r.Revision
}
