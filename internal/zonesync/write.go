package zonesync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

func (l *link) savePosition(ctx context.Context, revision int64) error {
	v, _ := json.Marshal(Position{Epoch: l.peerEpoch, Revision: revision})
	rs, err := l.st.Apply(ctx, store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: l.ackLease, Value: v}})
	if err == nil {
		err = rs[0].Err
	}
	if err != nil {
		return fmt.Errorf("record the peer's revision %d: %w", revision, err)
	}
	return nil
}

// maxWriteRounds bounds how often a write that lost a race (a controller
// wrote the resource's status in between) is tried again with what the
// store holds.
const maxWriteRounds = 8

// write stores puts and deletes; an operation that lost a race is tried
// again with the store's current state. New resources the creator decides
// are stored through it, after the rest (which may hold what names them).
func (l *link) write(ctx context.Context, revision int64, puts []*resource.Object, dels []resource.Key) error {
	fresh := false
	for round := 0; len(puts)+len(dels) > 0; round++ {
		if round == maxWriteRounds {
			return fmt.Errorf("writing %d resources from %s kept losing races with other writers", len(puts)+len(dels), l.peer)
		}
		var ops []store.Op
		var opPut []int // index into puts of each op, -1 for deletes
		var opDel []int
		var created []store.Creation // by the creator
		var createdPut []int
		for i, obj := range puts {
			cur, err := l.current(ctx, obj.Key(), fresh)
			if err != nil {
				return err
			}
			if cur == nil && l.creator != nil && !l.side.keepStatus() && l.creator.Decides(obj.Kind) {
				created = append(created, store.Creation{Object: obj})
				createdPut = append(createdPut, i)
				continue
			}
			for _, op := range l.putOps(ctx, revision, obj, cur) {
				ops = append(ops, op)
				opPut = append(opPut, i)
				opDel = append(opDel, -1)
			}
		}
		for i, k := range dels {
			cur, err := l.current(ctx, k, fresh)
			if err != nil {
				return err
			}
			if cur == nil || l.admit.Owns(cur, l.side.writer()) != nil {
				continue // gone already, or not the peer's to delete
			}
			ops = append(ops, store.Op{Type: store.OpDelete, Key: k, Version: cur.Version})
			opPut = append(opPut, -1)
			opDel = append(opDel, i)
		}
		if len(ops)+len(created) == 0 {
			return nil
		}
		var retryPuts []*resource.Object
		var retryDels []resource.Key
		var deleted []resource.Key
		retried := map[int]bool{}
		// took takes in r, the result of writing puts[put] or deleting
		// dels[del] (-1 for neither), k's.
		took := func(r store.Result, put, del int, k resource.Key) {
			if r.Revision > l.lastWrite {
				l.lastWrite = r.Revision
			}
			switch {
			case r.Err == nil:
				if del >= 0 {
					deleted = append(deleted, dels[del])
				}
			case errors.Is(r.Err, store.ErrConflict) || errors.Is(r.Err, store.ErrAlreadyExists) || errors.Is(r.Err, store.ErrNotFound):
				if put >= 0 && !retried[put] {
					retried[put] = true
					retryPuts = append(retryPuts, puts[put])
				} else if del >= 0 {
					retryDels = append(retryDels, dels[del])
				}
			default:
				l.refused(ctx, revision, &k, refuse("invalid", "%s: %v", k, r.Err))
			}
		}
		if len(ops) > 0 {
			rs, err := l.st.Apply(ctx, ops...)
			if err != nil {
				return fmt.Errorf("store what %s sent: %w", l.peer, err)
			}
			for j, r := range rs {
				k := ops[j].Key
				if ops[j].Object != nil {
					k = ops[j].Object.Key()
				}
				took(r, opPut[j], opDel[j], k)
			}
		}
		if len(created) > 0 {
			// What this batch stored above may name them (a generator that
			// came with the services it selects): decided over it.
			for j := range created {
				created[j].After = l.lastWrite
			}
			rs, ok, err := l.creator.Create(ctx, created)
			if err == nil && !ok {
				// No controllers run here: plain creates, named later.
				cops := make([]store.Op, len(created))
				for j, c := range created {
					cops[j] = l.putOps(ctx, revision, c.Object, nil)[0]
				}
				rs, err = l.st.Apply(ctx, cops...)
			}
			if err != nil {
				return fmt.Errorf("store what %s sent: %w", l.peer, err)
			}
			for j, r := range rs {
				took(r, createdPut[j], -1, created[j].Object.Key())
			}
		}
		if len(deleted) > 0 {
			l.deletedByPeer(deleted)
		}
		puts, dels, fresh = retryPuts, retryDels, true
	}
	return nil
}

// current returns what is stored at k, from the cache, or from the store
// when fresh (after a lost race); nil when nothing is. It is read only
// (the cache's own object).
func (l *link) current(ctx context.Context, k resource.Key, fresh bool) (*resource.Object, error) {
	if !fresh {
		cur, _ := l.cache.Peek(k)
		return cur, nil
	}
	cur, err := l.st.Get(ctx, k)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return cur, err
}

// putOps returns the writes that make the store hold obj, given cur.
func (l *link) putOps(ctx context.Context, revision int64, obj, cur *resource.Object) []store.Op {
	if !l.side.keepStatus() {
		obj.Status = nil
	}
	if cur == nil {
		// obj was decoded for this write: the store may keep it.
		return []store.Op{{Type: store.OpCreate, Object: obj, Handed: true, DiscardObject: true}}
	}
	if err := l.admit.Owns(cur, l.side.writer()); err != nil {
		k := obj.Key()
		l.refused(ctx, revision, &k, refuse("owner", "%v", err))
		return nil
	}
	var ops []store.Op
	version := cur.Version
	if !admission.SameIntent(cur, obj) {
		o := obj.Clone()
		o.Version = version
		ops = append(ops, store.Op{Type: store.OpUpdate, Object: o, Handed: true, DiscardObject: true})
		version++
	}
	if l.side.keepStatus() && !sameJSON(cur.Status, obj.Status) {
		o := obj.Clone()
		o.Version = version
		ops = append(ops, store.Op{Type: store.OpUpdateStatus, Object: o, DiscardObject: true})
	}
	return ops
}

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
