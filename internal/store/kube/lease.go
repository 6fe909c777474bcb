package kube

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/store"
)

// Annotations and labels of the Lease objects that hold store leases.
const (
	leaseLabel       = "meshnames.io/lease"
	annLeaseName     = "meshnames.io/lease-name"
	annLeaseValue    = "meshnames.io/lease-value"
	annLeaseExpires  = "meshnames.io/lease-expires"
	annLeaseFencedAt = "meshnames.io/fenced-at"
	// LeaderLease is the store lease the leader holds, and
	// LeaderObject the Lease object that holds it.
	LeaderLease  = "leader"
	LeaderObject = "meshnames-leader"
)

// leaseObject is a coordination.k8s.io/v1 Lease.
type leaseObject struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Metadata   kubeapi.ObjectMeta `json:"metadata"`
	Spec       leaseSpec          `json:"spec"`
}

type leaseSpec struct {
	HolderIdentity       *string `json:"holderIdentity,omitempty"`
	LeaseDurationSeconds *int32  `json:"leaseDurationSeconds,omitempty"`
	AcquireTime          *string `json:"acquireTime,omitempty"`
	RenewTime            *string `json:"renewTime,omitempty"`
	LeaseTransitions     *int32  `json:"leaseTransitions,omitempty"`
}

// microTime is the format of a Lease's times.
const microTime = "2006-01-02T15:04:05.000000Z07:00"

// leaseObjectName returns the name of the Lease object of store lease
// name: readable where it can be, and unique by a hash of the whole name.
func leaseObjectName(name string) string {
	if name == LeaderLease {
		return LeaderObject
	}
	var b strings.Builder
	b.WriteString("mn-")
	for i := 0; i < len(name) && b.Len() < 43; i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
			b.WriteByte(c)
		case c >= 'A' && c <= 'Z':
			b.WriteByte(c + 'a' - 'A')
		default:
			b.WriteByte('-')
		}
	}
	sum := sha256.Sum256([]byte(name))
	b.WriteString("-")
	b.WriteString(hex.EncodeToString(sum[:8]))
	return b.String()
}

// checkLeaseOp checks a lease operation as the SQL stores do.
func checkLeaseOp(op store.Op) error {
	if op.Lease == nil {
		return fmt.Errorf("%s: no lease", op.Type)
	}
	l := op.Lease
	if err := checkLeaseName(l.Name); err != nil {
		return fmt.Errorf("%s: %w", op.Type, err)
	}
	put := op.Type == store.OpPutLease || op.Type == store.OpCreateLease
	if put && len(l.Value) > store.MaxLeaseValueBytes {
		return fmt.Errorf("%s %q: %w: value of %d bytes, at most %d", op.Type, l.Name, store.ErrTooLarge, len(l.Value), store.MaxLeaseValueBytes)
	}
	// The range of the SQL stores, which keep expiries in Unix nanoseconds.
	if e := l.ExpiresAt; put && !e.IsZero() && (e.Year() < 1678 || e.Year() > 2261) {
		return fmt.Errorf("%s %q: expiry %v is out of range (years 1678 to 2261)", op.Type, l.Name, e)
	}
	return nil
}

func checkLeaseName(name string) error {
	if name == "" || len(name) > 253 {
		return fmt.Errorf("lease name must be 1 to 253 bytes, got %d", len(name))
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x20 || name[i] > 0x7e {
			return fmt.Errorf("lease name %q: only printable ASCII", name)
		}
	}
	return nil
}

// cachedLease is what the store last read or wrote of a lease.
type cachedLease struct {
	rv      string
	value   []byte
	expires time.Time
}

// leaseCache remembers the leases the fence checks and the elector use,
// so that a fenced batch usually costs one request: the conditional
// rewrite of the lease, from the resourceVersion it last saw.
type leaseCache struct {
	mu    sync.Mutex
	m     map[string]cachedLease
	gates map[string]*gate
}

// gate serializes this process's rewrites of one lease (fence checks and
// the elector's renewals), so that they do not conflict with each other,
// and lets fenced batches share one: a rewrite that started after a batch
// asked proves the lease held after that moment just as well as the
// batch's own.
type gate struct {
	mu   sync.Mutex
	last proof
}

// proof is a successful rewrite of a lease with value, started at
// started, and the deadline it gives the writes it fences.
type proof struct {
	value    []byte
	started  time.Time
	deadline time.Time
}

func (c *leaseCache) gate(name string) *gate {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gates == nil {
		c.gates = map[string]*gate{}
	}
	g, ok := c.gates[name]
	if !ok {
		g = &gate{}
		c.gates[name] = g
	}
	return g
}

func (c *leaseCache) get(name string) (cachedLease, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.m[name]
	return l, ok
}

func (c *leaseCache) set(name string, l cachedLease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[name] = l
}

func (c *leaseCache) drop(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, name)
}

// readLease decodes a Lease object into a store lease.
func readLease(o *leaseObject) (store.Lease, cachedLease, error) {
	a := o.Metadata.Annotations
	l := store.Lease{Name: a[annLeaseName]}
	v, err := base64.StdEncoding.DecodeString(a[annLeaseValue])
	if err != nil {
		return l, cachedLease{}, fmt.Errorf("lease %s: value: %w", o.Metadata.Name, err)
	}
	if len(v) > 0 {
		l.Value = v
	}
	if e := a[annLeaseExpires]; e != "" {
		t, err := time.Parse(time.RFC3339Nano, e)
		if err != nil {
			return l, cachedLease{}, fmt.Errorf("lease %s: expiry: %w", o.Metadata.Name, err)
		}
		l.ExpiresAt = t
	}
	return l, cachedLease{rv: o.Metadata.ResourceVersion, value: l.Value, expires: l.ExpiresAt}, nil
}

// leaseBody returns the Lease object holding l. The leader lease also
// fills in the Lease's own fields, for kubectl and for people.
func (s *Store) leaseBody(l store.Lease) *leaseObject {
	ann := map[string]string{annLeaseName: l.Name, annLeaseValue: base64.StdEncoding.EncodeToString(l.Value)}
	if !l.ExpiresAt.IsZero() {
		ann[annLeaseExpires] = l.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	o := &leaseObject{
		APIVersion: kubeapi.Leases.APIVersion(), Kind: "Lease",
		Metadata: kubeapi.ObjectMeta{
			Name: leaseObjectName(l.Name), Namespace: s.o.SystemNamespace,
			Labels:      map[string]string{leaseLabel: "true", "app.kubernetes.io/managed-by": "meshnames"},
			Annotations: ann,
		},
	}
	if f, err := store.ParseFence(l); l.Name == LeaderLease && err == nil {
		holder := f.Holder
		term := int32(min(f.Term, 1<<31-1))
		now := time.Now().UTC().Format(microTime)
		o.Spec = leaseSpec{HolderIdentity: &holder, LeaseTransitions: &term, RenewTime: &now}
		if !l.ExpiresAt.IsZero() {
			d := int32(max(1, min(time.Until(l.ExpiresAt).Round(time.Second)/time.Second, 1<<31-1)))
			o.Spec.LeaseDurationSeconds = &d
		}
	}
	return o
}

// writeLease makes a lease operation: a put creates or replaces the Lease
// object, unconditionally; a create only creates it.
func (s *Store) writeLease(ctx context.Context, op store.Op) error {
	l := op.Lease
	name := leaseObjectName(l.Name)
	if op.Type == store.OpDeleteLease {
		err := s.c.Delete(ctx, kubeapi.Leases, s.o.SystemNamespace, name, kubeapi.Preconditions{})
		s.leases.drop(l.Name)
		if err != nil && !errors.Is(err, kubeapi.ErrNotFound) {
			return fmt.Errorf("delete lease %q: %w", l.Name, storeErr(ctx, err))
		}
		return nil
	}
	body := s.leaseBody(*l)
	var out leaseObject
	err := s.c.Create(ctx, kubeapi.Leases, s.o.SystemNamespace, body, &out)
	if errors.Is(err, kubeapi.ErrAlreadyExists) && op.Type == store.OpCreateLease {
		return fmt.Errorf("create lease %q: %w", l.Name, store.ErrAlreadyExists)
	}
	if errors.Is(err, kubeapi.ErrAlreadyExists) {
		// Replace: the annotations and the spec, whatever they were.
		ann := map[string]any{annLeaseName: l.Name, annLeaseValue: body.Metadata.Annotations[annLeaseValue], annLeaseExpires: nil}
		if e, ok := body.Metadata.Annotations[annLeaseExpires]; ok {
			ann[annLeaseExpires] = e
		}
		patch := map[string]any{"metadata": map[string]any{"annotations": ann}, "spec": body.Spec}
		err = s.c.Patch(ctx, kubeapi.Leases, s.o.SystemNamespace, name, "", kubeapi.MergePatch, patch, &out)
	}
	if err != nil {
		s.leases.drop(l.Name)
		return fmt.Errorf("put lease %q: %w", l.Name, storeErr(ctx, err))
	}
	if _, c, err := readLease(&out); err == nil {
		s.leases.set(l.Name, c)
	}
	return nil
}

// Leases implements store.Store.
func (s *Store) Leases(ctx context.Context, prefix string) ([]store.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, store.ErrClosed
	}
	var out []store.Lease
	_, err := s.c.List(ctx, kubeapi.Leases, s.o.SystemNamespace, kubeapi.ListOptions{LabelSelector: leaseLabel + "=true"}, func(raw json.RawMessage) error {
		var o leaseObject
		if err := json.Unmarshal(raw, &o); err != nil {
			return err
		}
		l, _, err := readLease(&o)
		if err != nil {
			s.o.Log.Warn("kube store: skipping an unreadable lease", "lease", o.Metadata.Name, "err", err)
			return nil
		}
		if strings.HasPrefix(l.Name, prefix) && leaseObjectName(l.Name) == o.Metadata.Name {
			out = append(out, l)
		}
		return nil
	})
	if err != nil {
		return nil, s.unavailable(ctx, "leases", err)
	}
	slices.SortFunc(out, func(a, b store.Lease) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// getLease reads a lease from the API server and caches it.
func (s *Store) getLease(ctx context.Context, name string) (cachedLease, bool, error) {
	var o leaseObject
	err := s.c.Get(ctx, kubeapi.Leases, s.o.SystemNamespace, leaseObjectName(name), &o)
	if errors.Is(err, kubeapi.ErrNotFound) {
		s.leases.drop(name)
		return cachedLease{}, false, nil
	}
	if err != nil {
		return cachedLease{}, false, err
	}
	_, c, err := readLease(&o)
	if err != nil {
		return cachedLease{}, false, err
	}
	s.leases.set(name, c)
	return c, true, nil
}

// checkFence proves that f's lease is held by f: it rewrites the lease
// conditionally on the resourceVersion at which it named f's holder and
// term, unexpired. It returns the deadline of the batch's writes (zero:
// none; see fenceDeadline).
func (s *Store) checkFence(ctx context.Context, f store.Fence) (time.Time, error) {
	asked := time.Now()
	want := f.LeaseValue()
	g := s.leases.gate(f.Lease)
	g.mu.Lock()
	defer g.mu.Unlock()
	if p := g.last; bytes.Equal(p.value, want) && !p.started.Before(asked) && (p.deadline.IsZero() || p.deadline.After(time.Now())) {
		return p.deadline, nil
	}
	g.last = proof{}
	fenced := func(why string) error {
		return fmt.Errorf("%w: lease %q %s (holder %s, term %d)", store.ErrFenced, f.Lease, why, f.Holder, f.Term)
	}
	l, ok := s.leases.get(f.Lease)
	for attempt := 0; attempt < 10; attempt++ {
		if !ok || attempt > 0 {
			var err error
			if l, ok, err = s.getLease(ctx, f.Lease); err != nil {
				return time.Time{}, s.unavailable(ctx, "fence", err)
			}
			if !ok {
				return time.Time{}, fenced("does not exist")
			}
		}
		now := time.Now()
		if !bytes.Equal(l.value, want) || (!l.expires.IsZero() && !l.expires.After(now)) {
			if attempt == 0 && ok {
				ok = false // the cached copy may be stale: read it again
				continue
			}
			if !bytes.Equal(l.value, want) {
				return time.Time{}, fenced("is held by another holder or term")
			}
			return time.Time{}, fenced("has expired")
		}
		patch := []kubeapi.PatchOp{
			{Op: "add", Path: "/metadata/resourceVersion", Value: l.rv},
			{Op: "add", Path: "/metadata/annotations/" + jsonPointerEscape(annLeaseFencedAt), Value: now.UTC().Format(time.RFC3339Nano)},
		}
		var out leaseObject
		err := s.c.Patch(ctx, kubeapi.Leases, s.o.SystemNamespace, leaseObjectName(f.Lease), "", kubeapi.JSONPatch, patch, &out)
		switch {
		case err == nil:
			l.rv = out.Metadata.ResourceVersion
			s.leases.set(f.Lease, l)
			g.last = proof{value: want, started: now, deadline: fenceDeadline(now, l.expires)}
			return g.last.deadline, nil
		case errors.Is(err, kubeapi.ErrConflict), errors.Is(err, kubeapi.ErrNotFound):
			continue // changed meanwhile: look again
		default:
			return time.Time{}, s.unavailable(ctx, "fence", err)
		}
	}
	return time.Time{}, fenced("keeps changing")
}

// fenceDeadline is when the writes fenced by a rewrite of a lease at
// rewrote must be done: four fifths of the way to the lease's expiry. An
// instance takes the lease over at the earliest a lease duration after
// that rewrite (it restarted their wait), and the expiry is at most a
// lease duration after it, so a fifth of a lease duration at least is left
// between the deadline and a takeover.
func fenceDeadline(rewrote, expires time.Time) time.Time {
	if expires.IsZero() {
		return time.Time{}
	}
	return rewrote.Add(expires.Sub(rewrote) * 4 / 5)
}

// jsonPointerEscape escapes a key for a JSON patch path.
func jsonPointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
