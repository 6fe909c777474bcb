package kube

import (
	"context"
	"encoding/json"
	"time"

	"github.com/meshnames/meshnames/internal/crd"
	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/resource"
)

// This file turns what the watches see (kubeapi.Follow's lists and events,
// one watch per kind) into the store's entries and its change feed, and
// wakes the readers and the writers waiting for their echo.

// kindHandler feeds what kubeapi.Follow sees of one kind to the store.
type kindHandler struct {
	s *Store
	k crd.Kind
}

func (h kindHandler) Replace(items []json.RawMessage, rv string) { h.s.replace(h.k, items, rv) }
func (h kindHandler) Event(ev kubeapi.Event)                     { h.s.event(h.k, ev) }

// event applies one watch event of kind k.
func (s *Store) event(k crd.Kind, ev kubeapi.Event) {
	switch ev.Type {
	case kubeapi.Added, kubeapi.Modified:
		d, err := s.dec.decode(k, ev.Object)
		if err != nil {
			s.o.Log.Warn("kube store: skipping an object it cannot read", "kind", k.Kind, "err", err)
			return
		}
		s.mu.Lock()
		s.handOff(s.put(d, s.o.Now()), d.obj)
		s.mu.Unlock()
		return
	}
	var meta struct {
		Metadata kubeapi.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(ev.Object, &meta); err != nil {
		s.o.Log.Warn("kube store: skipping an event it cannot read", "kind", k.Kind, "err", err)
		return
	}
	v, _ := kubeapi.Revision(meta.Metadata.ResourceVersion)
	id, err := parseUID(meta.Metadata.UID)
	if err != nil {
		// No object the store holds has it: it is not their deletion.
		s.o.Log.Warn("kube store: skipping an event it cannot read", "kind", k.Kind, "err", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.Type {
	case kubeapi.Bookmark:
		s.progress[k.Kind] = max(s.progress[k.Kind], v)
		s.wake()
	case kubeapi.Deleted:
		ref := crRef{kind: k.Kind, name: meta.Metadata.Name}
		if k.Namespaced {
			ref.namespace = meta.Metadata.Namespace
		}
		s.remove(ref, id, v, s.o.Now())
	}
}

// relist lists kind k and brings the copy in line with it; it returns the
// list's resourceVersion.
func (s *Store) relist(ctx context.Context, k crd.Kind) (string, error) {
	var items []json.RawMessage
	rv, err := s.c.List(ctx, k.Resource(), "", kubeapi.ListOptions{}, func(raw json.RawMessage) error {
		items = append(items, raw)
		return nil
	})
	if err != nil {
		return "", err
	}
	s.replace(k, items, rv)
	return rv, nil
}

// replace brings the copy of kind k in line with a list: puts for what
// changed, deletes for what is gone.
func (s *Store) replace(k crd.Kind, raws []json.RawMessage, rv string) {
	items := make([]decoded, 0, len(raws))
	for _, raw := range raws {
		d, err := s.dec.decode(k, raw)
		if err != nil {
			s.o.Log.Warn("kube store: skipping an object it cannot read", "kind", k.Kind, "err", err)
			continue
		}
		items = append(items, d)
	}
	listRV, _ := kubeapi.Revision(rv)
	now := s.o.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[crRef]bool{}
	for _, d := range items {
		seen[d.ref] = true
		s.put(d, now)
	}
	for ref := range s.refs {
		if ref.kind == k.Kind && !seen[ref] {
			s.remove(ref, uid{}, listRV, now)
		}
	}
	for ref := range s.invalid {
		if ref.kind == k.Kind && !seen[ref] {
			delete(s.invalid, ref)
		}
	}
	s.progress[k.Kind] = max(s.progress[k.Kind], listRV)
	s.wake()
}

// nextRev returns the revision of the next event. Revisions are dense,
// and the first event of a process follows the etcd revision at which it
// opened: a process issues at most one event per write to the cluster, so
// its revisions stay below the next process's.
func (s *Store) nextRev() int64 {
	s.rev = max(s.rev, s.base) + 1
	return s.rev
}

// sharedRef returns ref, the custom resource of key k, with the strings of
// k's name and of the store's system namespace rather than those decoded
// from the API server, which the map of refs would otherwise keep: two
// allocations per Service.
func (s *Store) sharedRef(ref crRef, k resource.Key) crRef {
	n := k.Name
	switch {
	case n == ref.name: // cluster-scoped, or of the system namespace
		ref.name = n
		if ref.namespace == s.dec.system {
			ref.namespace = s.dec.system
		}
	case len(n) == len(ref.name)+1+len(ref.namespace) && n[len(ref.name)] == '.' &&
		n[:len(ref.name)] == ref.name && n[len(ref.name)+1:] == ref.namespace:
		ref.name, ref.namespace = n[:len(ref.name)], n[len(ref.name)+1:]
	}
	return ref
}

// put applies the current state of a custom resource and returns the
// entry it added to the feed, if any. s.mu is held.
func (s *Store) put(d decoded, now time.Time) *entry {
	s.progress[d.ref.kind] = max(s.progress[d.ref.kind], d.version)
	defer s.wake()
	ack := ackKey{ref: d.ref, version: d.version}
	prev, had := s.refs[d.ref]
	if d.obj == nil {
		s.invalid[d.ref] = &d
		if had {
			s.deleteKey(prev, s.nextRev(), now)
			delete(s.refs, d.ref)
		}
		s.acks.add(ack, s.rev)
		return nil
	}
	delete(s.invalid, d.ref)
	delete(s.stale, d.ref)
	k := d.obj.Key()
	if had && prev.key == k && prev.uid == d.uid && prev.version == d.version {
		s.acks.add(ack, prev.rev)
		return nil // a relist of what the watch showed
	}
	if had && prev.key != k {
		s.deleteKey(prev, s.nextRev(), now) // its mesh label changed
	}
	plain, err := d.obj.AppendJSON(nil) // what json.Marshal writes, without its copies
	if err != nil {
		s.o.Log.Error("kube store: encoding an object", "kind", k.Kind, "name", k.Name, "err", err)
		return nil
	}
	e := &entry{key: k, uid: d.uid, version: d.version, rev: s.nextRev(), data: compressObject(plain)}
	var live *entry
	if had && prev.key == k {
		live = prev
		delete(s.fresh, prev)
		// The resource keeps the strings of its key for its life:
		// every object read from the store shares them (entry.object), and
		// so does every key a reader keeps of it, rather than each holding
		// the strings of the write it saw (three copies per Service, kept
		// by the cache, the controllers and DNS).
		e.key = prev.key
	}
	s.refs[s.sharedRef(d.ref, e.key)] = e
	if d.reported != "" {
		s.stale[d.ref] = staleReport(d, plain)
	}
	s.feed.add(e, live, 0)
	s.acks.add(ack, e.rev)
	s.notify()
	return e
}

// freshCap bounds the objects the store holds for a feed reader that is
// not reading (handOff).
const freshCap = 1024

// handOff keeps obj, the object a watch event decoded into the feed's
// entry e (nil: none), until Changes hands it out in place of decoding e
// again: the cache reads every event within milliseconds, and decoding
// the stored copy back was a twentieth of the CPU of a first naming of
// 10,000 Services. The first reader takes it; it is dropped once e is
// superseded or a reader has read past it, and the store holds at most
// freshCap, so a store nobody reads keeps nothing for long. s.mu is held.
func (s *Store) handOff(e *entry, obj *resource.Object) {
	if e == nil || len(s.fresh) >= freshCap {
		return
	}
	// The object as entry.object reads it back: the entry's revision and
	// key strings.
	obj.Version, obj.Revision = e.version, e.rev
	obj.Kind, obj.Mesh, obj.Name = e.key.Kind, e.key.Mesh, e.key.Name
	s.fresh[e] = obj
}

// remove applies the deletion of a custom resource (of incarnation uid,
// when known) at resourceVersion v. s.mu is held.
func (s *Store) remove(ref crRef, id uid, v int64, now time.Time) {
	s.progress[ref.kind] = max(s.progress[ref.kind], v)
	defer s.wake()
	delete(s.invalid, ref)
	delete(s.stale, ref)
	e, ok := s.refs[ref]
	if !ok {
		s.acks.add(ackKey{ref: ref, uid: id, deleted: true}, s.rev)
		return
	}
	if id != (uid{}) && e.uid != id {
		return // an older incarnation's deletion, seen after the new one
	}
	delete(s.refs, ref)
	rev := s.nextRev()
	s.deleteKey(e, rev, now)
	s.acks.add(ackKey{ref: ref, uid: id, deleted: true}, rev)
}

// deleteKey adds the deletion of the resource of the live entry e to the
// feed at revision rev (the caller drops e from refs). s.mu is held.
func (s *Store) deleteKey(e *entry, rev int64, now time.Time) {
	delete(s.fresh, e)
	s.feed.add(&entry{key: e.key, rev: rev}, e, now.UnixNano())
	s.notify()
}

// notify wakes the readers of the feed. s.mu is held.
func (s *Store) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// wake wakes the writers waiting for their echo. s.mu is held.
func (s *Store) wake() {
	close(s.advanced)
	s.advanced = make(chan struct{})
}
