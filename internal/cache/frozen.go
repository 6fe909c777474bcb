package cache

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// A resource decoded into Go values costs about a kilobyte for a typical
// MeshService (maps, slices and a dozen small allocations the collector
// must trace), two to three times its stored JSON. Readers want the
// decoded form only around a change: subscribers read a resource right
// after they are told it changed. So an entry stays decoded ("hot") while
// it is recent, and the cache freezes entries untouched for FreezeAfter
// into their stored encoding, compressed into one pointer-free allocation;
// a read of a frozen entry decodes it, as the store would. A store that
// holds every resource in its own memory in such a form (store.Keeper:
// the Kubernetes store, whose copy of a MeshService is about 170 bytes)
// hands the freezer its copy of the same revision, which the entry holds
// instead of encoding one of its own.
//
// A burst of changes (the echoes of the controllers' first status writes
// to every service of a large store) would keep every resource decoded at
// once: at 100,000 services that is 150 MB live for half a minute,
// allocated among the records the controllers build at the same time and
// keep for good, and the runtime cannot give back the spans those records
// pin once the decoded resources are freed. So the entries the change
// feed decoded are also bounded in number: when a change takes them past
// MaxDecoded, the freezer freezes the oldest down to half of it, whatever
// their age.
//
// The entries of a list of the store (the cache's start) do not count:
// they are allocated before the controllers start, so freeing them at
// the freeze leaves whole spans free, and the controllers' first passes
// read every one of them, which is cheap while they are decoded.

// FreezeAfter is how long an entry stays decoded after it last changed.
const FreezeAfter = 30 * time.Second

// MaxDecoded is the default bound on decoded entries (Cache.maxHot).
const MaxDecoded = 10_000

// SetMaxDecoded sets the bound on decoded entries (MaxDecoded by
// default); call it before Run. A store whose changes come slowly needs
// fewer: see KubeMaxDecoded.
func (c *Cache) SetMaxDecoded(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.maxHot = max(n, 2) // a freeze keeps half: at least one
}

// KubeMaxDecoded is the bound on decoded entries in Kubernetes mode. Its
// changes come at the API server's write rate (a few hundred a second),
// so a first naming keeps each decoded for FreezeAfter and thousands at
// once, allocated among the records that stay: the readers of a change
// read it within milliseconds, and 2,000 entries are several seconds of
// changes. At 10,000 Services it took the unused heap left after the
// naming from 14.5 to 9.0 MiB (BenchmarkKubeLiveHeap, one run each).
const KubeMaxDecoded = 2_000

// freezeBatch bounds the entries frozen while the lock is held once.
const freezeBatch = 2000

// frozen is a resource in its stored encoding, in one pointer-free
// allocation: the version, revision, creation and modification times
// (UnixNano) and the length of the spec's JSON, as varints, then the JSON
// of the spec followed by the status's, compressed (compress.go). Kind,
// mesh and name are the entry's keys and its labels the entry's shared
// set.
type frozen []byte

// freezeObject encodes o; enc, when not nil, is o's spec and status as
// stored, which it takes as they are.
func freezeObject(o *resource.Object, enc *store.Encoding) (frozen, error) {
	var plain []byte
	specLen := 0
	switch {
	case enc != nil:
		plain = make([]byte, 0, len(enc.Spec)+len(enc.Status))
		plain = append(append(plain, enc.Spec...), enc.Status...)
		specLen = len(enc.Spec)
	case o.Spec != nil:
		b, err := resource.MarshalSpec(o.Spec)
		if err != nil {
			return nil, fmt.Errorf("encode %s spec: %w", o.Key(), err)
		}
		plain, specLen = b, len(b)
	}
	if enc == nil && o.Status != nil {
		b, err := resource.MarshalStatus(o.Status)
		if err != nil {
			return nil, fmt.Errorf("encode %s status: %w", o.Key(), err)
		}
		plain = append(plain, b...)
	}
	var head [5 * binary.MaxVarintLen64]byte
	h := binary.AppendVarint(head[:0], o.Version)
	h = binary.AppendVarint(h, o.Revision)
	h = binary.AppendVarint(h, o.CreationTime.UnixNano())
	h = binary.AppendVarint(h, o.ModificationTime.UnixNano())
	h = binary.AppendVarint(h, int64(specLen))
	return compress(h, plain), nil
}

// thaw decodes f as the resource k with labels (which it may keep).
func (f frozen) thaw(k resource.Key, labels map[string]string) (*resource.Object, error) {
	head, rest, err := f.header()
	if err != nil {
		return nil, err
	}
	specLen := head[4]
	o := &resource.Object{
		Kind: k.Kind, Mesh: k.Mesh, Name: k.Name, Labels: labels,
		Version: head[0], Revision: head[1],
		CreationTime: time.Unix(0, head[2]).UTC(), ModificationTime: time.Unix(0, head[3]).UTC(),
	}
	err = decompress(rest, func(plain []byte) error {
		if specLen < 0 || int64(len(plain)) < specLen {
			return fmt.Errorf("%d bytes, want at least %d", len(plain), specLen)
		}
		var err error
		if o.Spec, err = resource.UnmarshalSpec(k.Kind, plain[:specLen]); err != nil {
			return err
		}
		o.Status, err = resource.UnmarshalStatus(k.Kind, plain[specLen:])
		return err
	})
	if err != nil {
		return nil, err
	}
	return o, nil
}

// header reads the varints before f's compressed JSON: version, revision,
// creation and modification times and the spec's length.
func (f frozen) header() (head [5]int64, rest []byte, err error) {
	rest = f
	for i := range head {
		v, n := binary.Varint(rest)
		if n <= 0 {
			return head, nil, fmt.Errorf("frozen header: field %d of %d unreadable", i+1, len(head))
		}
		head[i], rest = v, rest[n:]
	}
	return head, rest, nil
}

// appendJSON appends the document of the resource f holds, as
// AppendJSON writes it for f.thaw(k, labels), from the JSON f holds
// rather than from a decoded resource (a list of 100,000 frozen services
// decoded every one only to encode it again). A resource frozen without
// a spec, or with a null status, is thawed first: their encodings are the
// decoder's defaults, which only it knows.
func (f frozen) appendJSON(b []byte, k resource.Key, labels map[string]string) ([]byte, error) {
	head, rest, err := f.header()
	if err != nil {
		return nil, err
	}
	specLen := head[4]
	direct := false
	out := b
	err = decompress(rest, func(plain []byte) error {
		if specLen <= 0 || int64(len(plain)) < specLen {
			return nil
		}
		spec, status := plain[:specLen], plain[specLen:]
		if len(status) == 0 {
			status = nil
		} else if status[0] != '{' {
			return nil
		}
		direct = true
		var err error
		out, err = resource.AppendDocument(b, k, time.Unix(0, head[2]).UTC(), time.Unix(0, head[3]).UTC(), labels, spec, status)
		return err
	})
	if err != nil || direct {
		return out, err
	}
	o, err := f.thaw(k, labels)
	if err != nil {
		return nil, err
	}
	return o.AppendJSON(b)
}

// revision returns the revision of the resource f holds, without
// decoding it; false when the header is unreadable.
func (f frozen) revision() (int64, bool) {
	_, n := binary.Varint(f) // the version
	if n <= 0 {
		return 0, false
	}
	rev, m := binary.Varint(f[n:])
	return rev, m > 0
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
		case <-c.pressure:
		}
		c.freeze(c.now().Add(-FreezeAfter))
	}
}

// candidate is a hot entry the freezer may freeze.
type candidate struct {
	g    group
	name string
	obj  *resource.Object
	enc  *store.Encoding
	at   int64
}

// partitionNewer moves the candidates stored after cutoff to the end of
// cands and returns how many there are.
func partitionNewer(cands []candidate, cutoff int64) int {
	end := len(cands)
	for i := 0; i < end; {
		if cands[i].at > cutoff {
			end--
			cands[i], cands[end] = cands[end], cands[i]
		} else {
			i++
		}
	}
	return len(cands) - end
}

// newestLast moves the keep newest candidates to the end of cands
// (0 < keep <= len(cands)); of those stored at the same time as the
// oldest of them, as many as needed.
func newestLast(cands []candidate, keep int) {
	ats := make([]int64, len(cands))
	for i, cd := range cands {
		ats[i] = cd.at
	}
	slices.Sort(ats)
	t := ats[len(ats)-keep]
	rest := cands[:len(cands)-partitionNewer(cands, t)]
	need := keep - (len(cands) - len(rest))
	end := len(rest)
	for i := len(rest) - 1; i >= 0 && need > 0; i-- {
		if rest[i].at == t {
			end--
			rest[i], rest[end] = rest[end], rest[i]
			need--
		}
	}
}

// clearCandidates clears the slices freeze used to their capacity and
// returns the longest of those up to limit candidates long, for the next
// freeze: the list of a large store is frozen once, and its candidates
// are not worth keeping the memory for.
func clearCandidates(limit int, used ...[]candidate) []candidate {
	var keep []candidate
	for _, s := range used {
		clear(s[:cap(s)])
		if cap(s) > cap(keep) && cap(s) <= limit {
			keep = s
		}
	}
	return keep[:0]
}

// freeze encodes the hot entries stored at or before cutoff, and the
// oldest others while more than maxHot would stay hot, and returns how
// many it froze. Encoding happens outside the lock (hot objects are never
// modified); an entry replaced meanwhile is left as it is.
func (c *Cache) freeze(cutoff time.Time) int {
	c.freezeMu.Lock()
	defer c.freezeMu.Unlock()
	// The hot entries of the feed, then the old enough ones of a list, in
	// a slice kept from freeze to freeze (a new one each time was a
	// twentieth of what a zone allocated in an initial sync) and cleared
	// after, so that it holds no resource.
	var cands, listed []candidate
	defer func() { c.candidates = clearCandidates(2*c.maxHot, c.candidates, cands, listed) }()
	decoded := 0
	c.mu.RLock()
	cands = c.candidates[:0]
	for g, m := range c.groups {
		for name, e := range m {
			if e.hot == nil {
				continue
			}
			decoded++
			cd := candidate{g, name, e.hot, e.enc, e.at}
			if !e.listed {
				cands = append(cands, cd)
			} else if e.at <= cutoff.UnixNano() {
				listed = append(listed, cd)
			}
		}
	}
	c.mu.RUnlock()
	hot := len(cands)
	// Keep (leave hot) those the age allows, moved to the end; over the
	// bound, only the newest of them, down to half the bound. The rest
	// is not ordered: sorting every candidate by age was a fifth of
	// freezing in a zone's initial sync (ten thousand a time).
	keep := partitionNewer(cands, cutoff.UnixNano())
	if hot > c.maxHot && keep > c.maxHot/2 {
		keep = c.maxHot / 2
		newestLast(cands, keep)
	}
	cands = append(cands[:len(cands)-keep], listed...)
	n := 0
	for batch := range slices.Chunk(cands, freezeBatch) {
		fs := make([]frozen, len(batch))
		ks := make([]store.Kept, len(batch))
		for i, cd := range batch {
			if c.keeper != nil {
				if k, ok := c.keeper.Kept(cd.obj.Key(), cd.obj.Revision); ok {
					ks[i] = k
					continue
				}
			}
			f, err := freezeObject(cd.obj, cd.enc)
			if err != nil {
				c.log.Error("cannot freeze a resource; keeping it decoded", "err", err)
				continue
			}
			fs[i] = f
		}
		c.mu.Lock()
		for i, cd := range batch {
			e, ok := c.groups[cd.g][cd.name]
			if !ok || e.hot != cd.obj || fs[i] == nil && ks[i] == nil {
				continue
			}
			e.labels, e.named = c.labels.hold(cd.name, e.hot.Labels)
			if !e.listed {
				c.hot--
			}
			c.guards.check(e.hot, true)
			e.hot, e.cold, e.kept, e.enc = nil, fs[i], ks[i], nil
			c.groups[cd.g][cd.name] = e
			n++
		}
		c.mu.Unlock()
	}
	c.decoded.Set(float64(decoded - n))
	c.frozenTotal.Add(float64(n))
	c.frozen.Add(uint64(n))
	return n
}
