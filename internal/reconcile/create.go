package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// creation is one resource of a Create request.
type creation struct {
	obj  *resource.Object
	with []store.Op
	req  *createReq
	i    int // obj's index in req
}

// create decides and writes the resources of req and of the other
// requests waiting, and answers them all, whatever happens.
func (t *term) create(ctx context.Context, req *createReq) error {
	reqs := []*createReq{req}
	n := len(req.creates)
	for n < t.r.o.BatchSize {
		select {
		case more := <-t.r.creates:
			reqs = append(reqs, more)
			n += len(more.creates)
			continue
		default:
		}
		break
	}
	var after int64
	for _, req := range reqs {
		for _, cr := range req.creates {
			after = max(after, cr.After)
		}
	}
	if after > 0 {
		if err := t.catchUp(ctx, after); err != nil {
			for _, req := range reqs {
				req.err = err
				close(req.done)
			}
			return err
		}
	}
	start := time.Now()
	now := t.r.o.Now()
	t.creating = make(map[resource.Key]creation, n)
	var keys []resource.Key
	for _, req := range reqs {
		req.results = make([]store.Result, len(req.creates))
		for i, cr := range req.creates {
			obj := cr.Object
			k := obj.Key()
			_, stored := t.r.o.Cache.RevisionOf(k)
			_, twice := t.creating[k]
			switch {
			case t.owned(k.Kind).empty():
				req.results[i].Err = fmt.Errorf("%s: the controllers decide no status of kind %s", k, k.Kind)
				continue
			case stored || twice:
				req.results[i].Err = fmt.Errorf("%s: %w", k, store.ErrAlreadyExists)
				continue
			}
			// As the store will hold it: the cores compare creation times
			// (the oldest service keeps a contested name).
			obj.Status, obj.Revision, obj.Version = nil, 0, 1
			obj.CreationTime = time.Unix(0, now.UnixNano()).UTC()
			t.creating[k] = creation{obj: obj, with: cr.With, req: req, i: i}
			keys = append(keys, k)
			for _, c := range t.r.cores {
				if c.Watches(k.Kind) {
					c.Observe(k, obj)
				}
			}
		}
	}
	err := t.pass(ctx, keys)
	t.creating = nil
	for _, req := range reqs {
		req.err, req.fenced = err, errors.Is(err, errFenced)
		close(req.done)
	}
	t.r.passes.WithLabelValues("create").Observe(time.Since(start).Seconds())
	return err
}

// queueCreate queues the create of cr's resource with the status st the
// cores decided for it (want is its sum), and the history of its names.
func (t *term) queueCreate(ctx context.Context, cr creation, st resource.Status, p patch, want uint64) error {
	obj := cr.obj
	k := obj.Key()
	t.written.Put(k, want)
	with := append(t.record(obj, st, store.StatusPatch(p)), cr.with...) // obj has no status yet
	obj.Status = st
	done := func(res store.Result) { cr.req.results[cr.i] = res }
	op := store.Op{Type: store.OpCreate, Object: obj, Handed: true, DiscardObject: true, Created: obj.CreationTime}
	return t.queueStatus(ctx, pendingWrite{Write: Write{Op: op, Done: done}, key: k, created: true}, with)
}
