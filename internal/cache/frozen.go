package cache

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/meshnames/meshnames/internal/resource"
)

// A resource decoded into Go values costs about a kilobyte for a typical
// MeshService (maps, slices and a dozen small allocations the collector
// must trace), two to three times its stored JSON. Readers want the
// decoded form only around a change: subscribers read a resource right
// after they are told it changed. So an entry stays decoded ("hot") while
// it is recent, and the cache freezes entries untouched for FreezeAfter
// into their stored encoding, compressed into one pointer-free allocation;
// a read of a frozen entry decodes it, as the store would.

// FreezeAfter is how long an entry stays decoded after it last changed.
const FreezeAfter = 30 * time.Second

// freezeBatch bounds the entries frozen while the lock is held once.
const freezeBatch = 2000

// frozen is a resource in its stored encoding, compressed (compress.go).
// Kind, mesh and name are the entry's keys and its labels the entry's
// shared set.
type frozen struct {
	version, revision int64
	created, modified int64 // UnixNano
	specLen           int   // the JSON is the spec's, then the status's
	data              []byte
}

// freezeObject encodes o.
func freezeObject(o *resource.Object) (*frozen, error) {
	f := &frozen{version: o.Version, revision: o.Revision, created: o.CreationTime.UnixNano(), modified: o.ModificationTime.UnixNano()}
	var plain []byte
	if o.Spec != nil {
		b, err := json.Marshal(o.Spec)
		if err != nil {
			return nil, fmt.Errorf("encode %s spec: %w", o.Key(), err)
		}
		plain, f.specLen = b, len(b)
	}
	if o.Status != nil {
		b, err := json.Marshal(o.Status)
		if err != nil {
			return nil, fmt.Errorf("encode %s status: %w", o.Key(), err)
		}
		plain = append(plain, b...)
	}
	f.data = compress(plain)
	return f, nil
}

// thaw decodes f as the resource k with labels (which it may keep).
func (f *frozen) thaw(k resource.Key, labels map[string]string) (*resource.Object, error) {
	o := &resource.Object{
		Kind: k.Kind, Mesh: k.Mesh, Name: k.Name, Labels: labels,
		Version: f.version, Revision: f.revision,
		CreationTime: time.Unix(0, f.created).UTC(), ModificationTime: time.Unix(0, f.modified).UTC(),
	}
	err := decompress(f.data, func(plain []byte) error {
		if len(plain) < f.specLen {
			return fmt.Errorf("%d bytes, want at least %d", len(plain), f.specLen)
		}
		var err error
		if o.Spec, err = resource.UnmarshalSpec(k.Kind, plain[:f.specLen]); err != nil {
			return err
		}
		o.Status, err = resource.UnmarshalStatus(k.Kind, plain[f.specLen:])
		return err
	})
	if err != nil {
		return nil, err
	}
	return o, nil
}

// Frozen returns how many times an entry has been frozen: a count of
// decoded resources the cache has let go of.
func (c *Cache) Frozen() uint64 { return c.frozen.Load() }

// freezeLoop freezes the entries that stopped changing, until ctx ends.
func (c *Cache) freezeLoop(ctx context.Context) {
	t := time.NewTicker(FreezeAfter / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.freeze(c.now().Add(-FreezeAfter))
	}
}

// freeze encodes the hot entries stored at or before cutoff and returns
// how many it froze. Encoding happens outside the lock (hot objects are
// never modified); an entry replaced meanwhile is left as it is.
func (c *Cache) freeze(cutoff time.Time) int {
	type candidate struct {
		g    group
		name string
		obj  *resource.Object
	}
	var cands []candidate
	hot := 0
	c.mu.RLock()
	for g, m := range c.groups {
		for name, e := range m {
			if e.hot == nil {
				continue
			}
			hot++
			if e.at <= cutoff.UnixNano() {
				cands = append(cands, candidate{g, name, e.hot})
			}
		}
	}
	c.mu.RUnlock()
	n := 0
	for batch := range slices.Chunk(cands, freezeBatch) {
		fs := make([]*frozen, len(batch))
		for i, cd := range batch {
			f, err := freezeObject(cd.obj)
			if err != nil {
				c.log.Error("cannot freeze a resource; keeping it decoded", "err", err)
				continue
			}
			fs[i] = f
		}
		c.mu.Lock()
		for i, cd := range batch {
			e, ok := c.groups[cd.g][cd.name]
			if !ok || e.hot != cd.obj || fs[i] == nil {
				continue
			}
			e.labels, e.nameLabel = c.labels.hold(cd.name, e.hot.Labels)
			e.hot, e.cold = nil, fs[i]
			c.groups[cd.g][cd.name] = e
			n++
		}
		c.mu.Unlock()
	}
	c.decoded.Set(float64(hot - n))
	c.frozenTotal.Add(float64(n))
	c.frozen.Add(uint64(n))
	return n
}
