package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/meshnames/meshnames/internal/crd"
	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/backend"
)

// plan is a checked resource operation.
type plan struct {
	key  resource.Key
	kind crd.Kind
	ref  crRef
	body []byte // create: the custom resource
}

// Apply implements store.Store; see the package comment for how it
// differs from the SQL stores' transaction.
func (s *Store) Apply(ctx context.Context, ops ...store.Op) ([]store.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, store.ErrClosed
	}
	results := make([]store.Result, len(ops))
	plans := make([]*plan, len(ops))
	for i, op := range ops {
		plans[i], results[i].Err = s.plan(op)
	}
	fz := &fencing{s: s, ctx: ctx}
	if f, ok := store.FenceFrom(ctx); ok {
		fz.f, fz.on = f, true
		if err := fz.refresh(); err != nil {
			return nil, err
		}
	}
	for i, op := range ops {
		for _, d := range op.DependsOn {
			if results[i].Err == nil && (d < 0 || d >= i) {
				results[i].Err = fmt.Errorf("%s: depends on operation %d, which does not come before it in the batch", op.Type, d)
			}
		}
	}
	// later: what runs after the rest, in order: operations that depend on
	// others, and records (which record the writes before them).
	later := func(op store.Op) bool { return len(op.DependsOn) > 0 || op.Type == store.OpAppendRecord }
	// Leases first: a VIP's allocation lease is written before the status
	// that shows the VIP, so that a crash between the two leaves a lease
	// without a holder (quarantined on restart), never a VIP without one.
	for i, op := range ops {
		if results[i].Err == nil && plans[i] == nil && !later(op) {
			results[i].Err = fz.do(func(ctx context.Context) error { return s.writeLease(ctx, op) })
		}
	}
	groups := map[resource.Key][]int{}
	var order []resource.Key
	for i, p := range plans {
		if p == nil || results[i].Err != nil || later(ops[i]) {
			continue
		}
		if _, ok := groups[p.key]; !ok {
			order = append(order, p.key)
		}
		groups[p.key] = append(groups[p.key], i)
	}
	sem := make(chan struct{}, s.o.Workers)
	var wg sync.WaitGroup
	for _, k := range order {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			for _, i := range groups[k] {
				results[i].Err = fz.do(func(ctx context.Context) error {
					results[i] = s.write(ctx, ops[i], plans[i])
					return results[i].Err
				})
			}
		})
	}
	wg.Wait()
	for i, op := range ops {
		if results[i].Err != nil || !later(op) {
			continue
		}
		for _, d := range op.DependsOn {
			if results[d].Err != nil && results[i].Err == nil {
				results[i].Err = fmt.Errorf("%s: operation %d: %w", op.Type, d, store.ErrDependencyFailed)
			}
		}
		if results[i].Err != nil {
			continue
		}
		switch {
		case op.Type == store.OpAppendRecord:
			results[i].Err = fz.do(func(context.Context) error { return s.records.append(*op.Record, s.o.Now()) })
		case plans[i] == nil:
			results[i].Err = fz.do(func(ctx context.Context) error { return s.writeLease(ctx, op) })
		default:
			results[i].Err = fz.do(func(ctx context.Context) error {
				results[i] = s.write(ctx, op, plans[i])
				return results[i].Err
			})
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err := fz.failed(); err != nil {
		return nil, fmt.Errorf("%w (some of the batch's writes may have been made)", err)
	}
	return results, nil
}

// fencing keeps a fenced batch's proof of its lease fresh: every write runs
// before the deadline of a rewrite of the lease (checkFence), and a new
// rewrite is made once half the time to the deadline has passed, so that a
// batch longer than a lease is fenced as well as a short one.
type fencing struct {
	s   *Store
	ctx context.Context
	f   store.Fence
	on  bool

	mu               sync.Mutex
	proved, deadline time.Time
	err              error
}

// refresh rewrites the lease again. fz.mu is held or not needed.
func (fz *fencing) refresh() error {
	now := time.Now()
	d, err := fz.s.checkFence(fz.ctx, fz.f)
	if err != nil {
		fz.err = err
		return err
	}
	fz.proved, fz.deadline = now, d
	return nil
}

// do runs write with a context that ends at the current proof's deadline,
// proving the lease again first when the deadline is near.
func (fz *fencing) do(write func(ctx context.Context) error) error {
	if !fz.on {
		return write(fz.ctx)
	}
	fz.mu.Lock()
	if fz.err != nil {
		err := fz.err
		fz.mu.Unlock()
		return err
	}
	if !fz.deadline.IsZero() && time.Until(fz.deadline) < fz.deadline.Sub(fz.proved)/2 {
		if err := fz.refresh(); err != nil {
			fz.mu.Unlock()
			return err
		}
	}
	deadline := fz.deadline
	fz.mu.Unlock()
	if deadline.IsZero() {
		return write(fz.ctx)
	}
	ctx, cancel := context.WithDeadline(fz.ctx, deadline)
	defer cancel()
	err := write(ctx)
	if err != nil && ctx.Err() != nil && fz.ctx.Err() == nil {
		return fmt.Errorf("%w: the write did not finish before the deadline of its fence: %w", store.ErrUnavailable, err)
	}
	return err
}

// failed returns the fence's failure, if it failed.
func (fz *fencing) failed() error {
	fz.mu.Lock()
	defer fz.mu.Unlock()
	return fz.err
}

// plan checks op and maps it to its custom resource; lease ops are
// checked and get no plan.
func (s *Store) plan(op store.Op) (*plan, error) {
	switch op.Type {
	case store.OpPutLease, store.OpDeleteLease, store.OpCreateLease:
		return nil, checkLeaseOp(op)
	case store.OpAppendRecord:
		if op.Record == nil {
			return nil, fmt.Errorf("%s: no record", op.Type)
		}
		if err := backend.CheckRecord(op.Record); err != nil {
			return nil, fmt.Errorf("%s to %q: %w", op.Type, op.Record.Stream, err)
		}
		return nil, nil
	case store.OpCreate, store.OpUpdate, store.OpUpdateStatus, store.OpPatchStatus:
		if op.Object == nil {
			return nil, fmt.Errorf("%s: no object", op.Type)
		}
		p, err := s.planKey(op.Type, op.Object.Key())
		if err != nil {
			return nil, err
		}
		if err := s.checkObject(op, p); err != nil {
			return nil, fmt.Errorf("%s %s: %w", op.Type, p.key, err)
		}
		return p, nil
	case store.OpDelete:
		return s.planKey(op.Type, op.Key)
	}
	return nil, fmt.Errorf("unknown operation %s", op.Type)
}

func (s *Store) planKey(t store.OpType, k resource.Key) (*plan, error) {
	d, ok := resource.Lookup(k.Kind)
	if !ok {
		return nil, fmt.Errorf("%s: unknown kind %q", t, k.Kind)
	}
	c, _ := crd.For(k.Kind)
	switch {
	case k.Name == "":
		return nil, fmt.Errorf("%s %s: name must not be empty", t, k)
	case d.MeshScoped && k.Mesh == "":
		return nil, fmt.Errorf("%s %s: mesh must be set: %s is mesh-scoped", t, k, k.Kind)
	case !d.MeshScoped && k.Mesh != "":
		return nil, fmt.Errorf("%s %s: mesh must be empty: %s is not mesh-scoped", t, k, k.Kind)
	case !utf8.ValidString(k.Mesh):
		return nil, fmt.Errorf("%s %s: mesh is not valid UTF-8", t, k)
	}
	if d.MeshScoped {
		if msg := validLabelValue(k.Mesh); msg != "" {
			return nil, fmt.Errorf("%s %s: mesh %s", t, k, msg)
		}
	}
	ref, err := s.dec.ref(k)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", t, k, err)
	}
	return &plan{key: k, kind: c, ref: ref}, nil
}

// checkObject checks what op writes of its object.
func (s *Store) checkObject(op store.Op, p *plan) error {
	o := op.Object
	d := resource.MustLookup(o.Kind)
	if op.Type == store.OpCreate || op.Type == store.OpUpdate {
		if o.Spec == nil || reflect.TypeOf(o.Spec) != d.SpecType() {
			return fmt.Errorf("spec is %T, want %T", o.Spec, d.NewSpec())
		}
		body, err := s.dec.encode(p.kind, p.ref, o)
		if err != nil {
			return err
		}
		st, _ := json.Marshal(o.Status)
		if len(body)+len(st) > store.MaxObjectBytes {
			return fmt.Errorf("%w: %d bytes, at most %d", store.ErrTooLarge, len(body)+len(st), store.MaxObjectBytes)
		}
		p.body = body
		for k, v := range o.Labels {
			if msg := validLabelValue(v); msg != "" {
				return fmt.Errorf("label %s: value %s", k, msg)
			}
		}
	}
	if op.Type == store.OpPatchStatus && op.Patch == nil {
		return errors.New("a status patch needs Patch")
	}
	if op.Type != store.OpUpdate {
		switch {
		case !d.HasStatus && (o.Status != nil || op.Type != store.OpCreate):
			return fmt.Errorf("%s has no status", o.Kind)
		case o.Status != nil && reflect.TypeOf(o.Status) != d.StatusType():
			return fmt.Errorf("status is %T, want %T", o.Status, d.NewStatus())
		}
	}
	return nil
}

// validLabelValue checks what Kubernetes accepts as a label value, which
// the mesh is stored as.
func validLabelValue(v string) string {
	if len(v) > 63 {
		return "must be at most 63 characters (a Kubernetes label value)"
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Sprintf("%q: a Kubernetes label value has only letters, digits, '-', '_' and '.'", v)
		}
	}
	return ""
}

// write makes one resource operation and waits for its echo.
func (s *Store) write(ctx context.Context, op store.Op, p *plan) store.Result {
	var raw json.RawMessage
	var ack ackKey
	var err error
	switch op.Type {
	case store.OpCreate:
		raw, err = s.create(ctx, op, p)
	case store.OpUpdate:
		raw, err = s.update(ctx, op, p)
	case store.OpUpdateStatus:
		raw, err = s.updateStatus(ctx, p, op.Object.Version, op.Object.Status)
	case store.OpPatchStatus:
		raw, err = s.patchStatus(ctx, op, p)
	case store.OpDelete:
		ack, err = s.delete(ctx, op, p)
	}
	if err != nil {
		return store.Result{Err: fmt.Errorf("%s %s: %w", op.Type, p.key, storeErr(ctx, err))}
	}
	var d decoded
	switch {
	case op.Type == store.OpDelete:
	case op.DiscardObject:
		// The echo's key is all the caller needs: decoding the whole
		// response (the spec's checks, the status) is work the watch
		// does again for the echo.
		if ack, err = writtenAck(p.kind, raw); err != nil {
			return store.Result{Err: fmt.Errorf("%s %s: %w", op.Type, p.key, err)}
		}
	default:
		if d, err = s.dec.decode(p.kind, raw); err != nil {
			return store.Result{Err: fmt.Errorf("%s %s: %w", op.Type, p.key, err)}
		}
		ack = ackKey{ref: d.ref, version: d.version}
	}
	rev, err := s.echo(ctx, ack)
	if err != nil {
		return store.Result{Err: fmt.Errorf("%s %s: written, but %w", op.Type, p.key, err)}
	}
	r := store.Result{Revision: rev}
	if d.obj != nil {
		d.obj.Revision = rev
		r.Object = d.obj
	}
	return r
}

// writtenAck reads the key of a write's echo from the API server's
// response to it: the object's name, namespace and resourceVersion.
func writtenAck(c crd.Kind, raw []byte) (ackKey, error) {
	m, err := kubeapi.MetaOf(raw)
	if err != nil {
		return ackKey{}, fmt.Errorf("decode %s: %w", c.Kind, err)
	}
	return ackOf(c, m.Namespace, m.Name, m.ResourceVersion)
}

// echo waits until the watch has shown the write ack and returns the
// revision the feed gave it. When the watch stays silent for EchoTimeout
// the write stands anyway: its revision is then the feed's current one.
func (s *Store) echo(ctx context.Context, ack ackKey) (int64, error) {
	var rev int64
	err := s.waitFor(ctx, func() bool {
		if r, ok := s.acks.get(ack); ok {
			rev = r
			return true
		}
		if !ack.deleted && s.progress[ack.ref.kind] >= ack.version {
			rev = s.rev // shown and forgotten among newer events
			return true
		}
		return false
	})
	if errors.Is(err, store.ErrUnavailable) {
		s.o.Log.Warn("kube store: a write was acknowledged before its watch showed it", "object", ack.ref.String(), "err", err)
		s.mu.Lock()
		rev = s.rev
		s.mu.Unlock()
		return rev, nil
	}
	return rev, err
}

func (s *Store) create(ctx context.Context, op store.Op, p *plan) (json.RawMessage, error) {
	var raw json.RawMessage
	if err := s.c.Create(ctx, p.kind.Resource(), p.ref.namespace, p.body, &raw); err != nil {
		return nil, err
	}
	if op.Object.Status == nil {
		return raw, nil
	}
	// The status subresource ignores the status of a create: write it next.
	var meta struct {
		Metadata kubeapi.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		return nil, err
	}
	v, _ := kubeapi.Revision(meta.Metadata.ResourceVersion)
	return s.updateStatus(ctx, p, v, op.Object.Status)
}

func (s *Store) update(ctx context.Context, op store.Op, p *plan) (json.RawMessage, error) {
	if err := s.current(p, op.Object.Version); err != nil {
		return nil, err
	}
	spec, err := resource.MarshalSpec(op.Object.Spec)
	if err != nil {
		return nil, err
	}
	patch := []kubeapi.PatchOp{
		{Op: "add", Path: "/metadata/resourceVersion", Value: strconv.FormatInt(op.Object.Version, 10)},
		{Op: "add", Path: "/metadata/labels", Value: s.dec.storedLabels(p.kind, op.Object)},
		{Op: "add", Path: "/spec", Value: json.RawMessage(spec)},
	}
	var raw json.RawMessage
	if err := s.c.Patch(ctx, p.kind.Resource(), p.ref.namespace, p.ref.name, "", kubeapi.JSONPatch, patch, &raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// current checks that the copy holds the key of p, at version (when not 0).
func (s *Store) current(p *plan, version int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entry(p.key)
	switch {
	case !ok:
		return store.ErrNotFound
	case version != 0 && e.version != version:
		return store.ErrConflict
	}
	return nil
}

// updateStatus writes status conditionally on version.
func (s *Store) updateStatus(ctx context.Context, p *plan, version int64, status resource.Status) (json.RawMessage, error) {
	if version <= 0 {
		return nil, store.ErrConflict
	}
	rv := strconv.FormatInt(version, 10)
	var raw json.RawMessage
	var err error
	if status == nil {
		patch := map[string]any{"metadata": map[string]any{"resourceVersion": rv}, "status": nil}
		err = s.c.Patch(ctx, p.kind.Resource(), p.ref.namespace, p.ref.name, "status", kubeapi.MergePatch, patch, &raw)
	} else {
		st, merr := json.Marshal(status)
		if merr != nil {
			return nil, merr
		}
		patch := []kubeapi.PatchOp{
			{Op: "add", Path: "/metadata/resourceVersion", Value: rv},
			{Op: "add", Path: "/status", Value: json.RawMessage(st)},
		}
		err = s.c.Patch(ctx, p.kind.Resource(), p.ref.namespace, p.ref.name, "status", kubeapi.JSONPatch, patch, &raw)
	}
	if err != nil {
		return nil, err
	}
	return raw, nil
}

// patchStatus replaces the parts of the status op.Patch names: it reads
// the current status (the copy's, then the API server's after a
// conflict), patches it and writes it conditionally, until a write holds.
func (s *Store) patchStatus(ctx context.Context, op store.Op, p *plan) (json.RawMessage, error) {
	next, err := json.Marshal(op.Object.Status)
	if err != nil {
		return nil, err
	}
	if op.Object.Status == nil {
		next = nil
	}
	s.mu.Lock()
	e, ok := s.entry(p.key)
	s.mu.Unlock()
	if !ok {
		return nil, store.ErrNotFound
	}
	data, err := e.json()
	if err != nil {
		return nil, err
	}
	cur, err := statusOf(data)
	if err != nil {
		return nil, err
	}
	version := e.version
	for attempt := 0; ; attempt++ {
		merged, _, err := backend.PatchStatus(cur, string(next), op.Patch)
		if err != nil {
			return nil, err
		}
		var st resource.Status
		if merged != "" {
			if st, err = resource.UnmarshalStatus(p.key.Kind, []byte(merged)); err != nil {
				return nil, err
			}
		}
		raw, err := s.updateStatus(ctx, p, version, st)
		if err == nil || !errors.Is(err, kubeapi.ErrConflict) || attempt == 20 {
			return raw, err
		}
		// Someone wrote since: read the API server's current status.
		var live cr
		if err := s.c.Get(ctx, p.kind.Resource(), p.ref.namespace, p.ref.name, &live); err != nil {
			return nil, err
		}
		version, _ = kubeapi.Revision(live.Metadata.ResourceVersion)
		cur = ""
		if len(live.Status) > 0 && string(live.Status) != "null" {
			cur = string(live.Status)
		}
	}
}

// statusOf returns the status JSON of an entry's object ("" for none).
func statusOf(data []byte) (string, error) {
	var doc struct {
		Status json.RawMessage `json:"status"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return "", err
	}
	if len(doc.Status) == 0 || string(doc.Status) == "null" {
		return "", nil
	}
	return string(doc.Status), nil
}

func (s *Store) delete(ctx context.Context, op store.Op, p *plan) (ackKey, error) {
	s.mu.Lock()
	e, ok := s.entry(p.key)
	s.mu.Unlock()
	if !ok {
		return ackKey{}, store.ErrNotFound
	}
	pre := kubeapi.Preconditions{UID: e.uid.String()}
	if op.Version != 0 {
		if op.Version != e.version {
			return ackKey{}, store.ErrConflict
		}
		pre.ResourceVersion = strconv.FormatInt(op.Version, 10)
	}
	if err := s.c.Delete(ctx, p.kind.Resource(), p.ref.namespace, p.ref.name, pre); err != nil {
		return ackKey{}, err
	}
	return ackKey{ref: p.ref, uid: e.uid, deleted: true}, nil
}

// storeErr maps an API error to the store's sentinel errors.
func storeErr(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return err
	case errors.Is(err, kubeapi.ErrNotFound):
		return fmt.Errorf("%w (%w)", store.ErrNotFound, err)
	case errors.Is(err, kubeapi.ErrAlreadyExists):
		return fmt.Errorf("%w (%w)", store.ErrAlreadyExists, err)
	case errors.Is(err, kubeapi.ErrConflict):
		return fmt.Errorf("%w (%w)", store.ErrConflict, err)
	case errors.Is(err, kubeapi.ErrUnavailable):
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}
