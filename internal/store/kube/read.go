package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// This file holds the reads: Get and Changes from the store's copy, and
// List, which first catches the copy up with what the API server has
// committed (see the package doc).

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, k resource.Key) (*resource.Object, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, store.ErrClosed
	}
	e, ok := s.entry(k)
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("get %s: %w", k, store.ErrNotFound)
	}
	return e.object()
}

// List implements store.Store. It first waits until the copy reflects
// every write committed before the call (see the package comment).
func (s *Store) List(ctx context.Context, k resource.Kind) ([]*resource.Object, int64, error) {
	if k != "" {
		if _, ok := resource.Lookup(k); !ok {
			return nil, 0, fmt.Errorf("list: unknown kind %q: must be one of %v", k, resource.KindNames())
		}
	}
	if err := s.catchUp(ctx); err != nil {
		return nil, 0, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, 0, store.ErrClosed
	}
	entries := make([]*entry, 0, len(s.refs))
	for ref, e := range s.refs {
		if k == "" || ref.kind == k {
			entries = append(entries, e)
		}
	}
	rev := s.rev
	s.mu.Unlock()
	out := make([]*resource.Object, 0, len(entries))
	for _, e := range entries {
		o, err := e.object()
		if err != nil {
			return nil, 0, err
		}
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b *resource.Object) int {
		return strings.Compare(string(a.Kind)+"\x00"+a.Mesh+"\x00"+a.Name, string(b.Kind)+"\x00"+b.Mesh+"\x00"+b.Name)
	})
	return out, rev, nil
}

// catchUp lists every kind (a consistent read) and waits until the copy
// holds each listed object at least at its listed version, and nothing
// the list no longer holds but what was created since.
func (s *Store) catchUp(ctx context.Context) error {
	type listed struct {
		version int64
		uid     string
	}
	for _, k := range s.kinds {
		want := map[crRef]listed{}
		rv, err := s.c.List(ctx, k.Resource(), "", kubeapi.ListOptions{}, func(raw json.RawMessage) error {
			var m struct {
				Metadata kubeapi.ObjectMeta `json:"metadata"`
			}
			if err := json.Unmarshal(raw, &m); err != nil {
				return err
			}
			ref := crRef{kind: k.Kind, name: m.Metadata.Name}
			if k.Namespaced {
				ref.namespace = m.Metadata.Namespace
			}
			v, _ := kubeapi.Revision(m.Metadata.ResourceVersion)
			want[ref] = listed{v, m.Metadata.UID}
			return nil
		})
		if err != nil {
			return s.unavailable(ctx, "list", err)
		}
		listRV, _ := kubeapi.Revision(rv)
		caughtUp := func() bool {
			if s.progress[k.Kind] >= listRV {
				return true
			}
			for ref, l := range want {
				if v, ok := s.versionOf(ref); !ok || v < l.version {
					return false
				}
			}
			for ref, e := range s.refs {
				if _, ok := want[ref]; ref.kind == k.Kind && !ok && e.version <= listRV {
					return false // deleted before the list; the watch has not shown it yet
				}
			}
			return true
		}
		if err := s.waitFor(ctx, caughtUp); err != nil {
			return fmt.Errorf("list: the watch of %s does not catch up with the API server: %w", k.Plural, err)
		}
	}
	return nil
}

// versionOf returns the version of the copy of ref, valid or not. s.mu is held.
func (s *Store) versionOf(ref crRef) (int64, bool) {
	if e, ok := s.refs[ref]; ok {
		return e.version, true
	}
	if d, ok := s.invalid[ref]; ok {
		return d.version, true
	}
	return 0, false
}

// waitFor waits until cond, called with s.mu held, holds, for at most
// EchoTimeout.
func (s *Store) waitFor(ctx context.Context, cond func() bool) error {
	timeout := time.NewTimer(s.o.EchoTimeout)
	defer timeout.Stop()
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return store.ErrClosed
		}
		ok, ch := cond(), s.advanced
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout.C:
			return fmt.Errorf("%w: no echo from the watch within %s", store.ErrUnavailable, s.o.EchoTimeout)
		case <-ch:
		}
	}
}

// Changes implements store.Store.
func (s *Store) Changes(ctx context.Context, after int64, limit int) ([]store.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, store.ErrClosed
	}
	if after < s.feed.start || after > 0 && after <= s.base {
		s.mu.Unlock()
		return nil, fmt.Errorf("changes after %d: the feed of this process starts at %d: %w", after, max(s.feed.start, s.base), store.ErrCompacted)
	}
	type event struct {
		e *entry
		o *resource.Object // handed off (handOff), or nil
	}
	var evs []event
	for i := s.feed.after(after); i < len(s.feed.events); i++ {
		if e := s.feed.events[i].e; e != nil {
			o := s.fresh[e]
			delete(s.fresh, e)
			evs = append(evs, event{e, o})
			if limit > 0 && len(evs) == limit {
				break
			}
		}
	}
	for e := range s.fresh {
		if e.rev <= after {
			delete(s.fresh, e) // the reader has it from elsewhere
		}
	}
	s.mu.Unlock()
	out := make([]store.Event, len(evs))
	for i, ev := range evs {
		e := ev.e
		out[i] = store.Event{Type: store.EventDelete, Revision: e.rev, Key: e.key}
		if e.tombstone() {
			continue
		}
		o := ev.o
		if o == nil {
			var err error
			if o, err = e.object(); err != nil {
				return nil, err
			}
		}
		out[i].Type, out[i].Object = store.EventPut, o
	}
	return out, nil
}

// Changed implements store.Store.
func (s *Store) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}
