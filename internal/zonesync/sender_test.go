package zonesync

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	pb "github.com/meshnames/meshnames/api/zonesync/v1"
	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// relatedSide is a side that sends every resource as it is and, for a
// Zone event, the resources of related_ again (as the global does for a
// Zone whose spec.enabled may have changed).
type relatedSide struct {
	related_ []*resource.Object
}

func (s relatedSide) prepare(obj *resource.Object) (*outItem, error) { return newOutItem(obj, "") }
func (relatedSide) pass(*outItem) (bool, bool)                       { return true, false }
func (relatedSide) outTombstone(k resource.Key) (resource.Key, bool) { return k, true }
func (s relatedSide) related(_ context.Context, ev store.Event) []*resource.Object {
	if ev.Key.Kind == resource.Zone {
		return s.related_
	}
	return nil
}
func (relatedSide) decode(r *pb.Resource) (*resource.Object, error)       { return DecodeResource(r) }
func (relatedSide) accept(obj *resource.Object) (*resource.Object, error) { return obj, nil }
func (relatedSide) writer() admission.Writer                              { return admission.Writer{} }
func (relatedSide) resolver() func(resource.Key) []resource.Key {
	return func(k resource.Key) []resource.Key { return []resource.Key{k} }
}
func (relatedSide) owned() []resource.Key { return nil }
func (relatedSide) keepStatus() bool      { return true }
func (relatedSide) expected() inventory   { return inventory{} }

// TestSendEvents_BatchesFitTheReceiver pins that the sender's batches stay
// within what a receiver takes (DecodeChanges) also when one event brings
// thousands of related resources, which a batch of their own once carried
// past MaxBatchItems: the receiver refused it and its services never
// reached the zone. A batch that ends inside an event brings the peer
// only to the revision before it.
func TestSendEvents_BatchesFitTheReceiver(t *testing.T) {
	const from, n = 41, MaxBatchItems + 1500
	var services []*resource.Object
	for i := range n {
		services = append(services, meshService("default", fmt.Sprintf("svc-%05d", i), 80))
	}
	type batch struct {
		revision int64
		keys     []string
	}
	var sent []batch
	var l *link
	l = &link{peer: "west", side: relatedSide{related_: services}, stats: newStats("west", newMetrics(nil)),
		send: func(env *pb.Envelope) error {
			raw := env.GetChanges()
			if raw == nil {
				return nil
			}
			c, err := DecodeChanges(raw)
			if err != nil {
				t.Fatalf("the receiver refuses batch %d: %v", len(sent), err)
			}
			var names []string
			for _, r := range c.Put {
				names = append(names, r.GetName())
			}
			sent = append(sent, batch{c.Revision, names})
			go l.acked(c.Revision) // the peer keeps up
			return nil
		}}
	l.init()
	before := meshService("default", "before", 80)
	after := meshService("default", "after", 80)
	item := func(o *resource.Object) *outItem {
		it, err := newOutItem(o, "")
		if err != nil {
			t.Fatal(err)
		}
		return it
	}
	zone := resource.Key{Kind: resource.Zone, Name: "east"}
	evs := []outEvent{
		{typ: store.EventPut, rev: 42, key: before.Key(), put: item(before)},
		{typ: store.EventPut, rev: 43, key: zone},
		{typ: store.EventPut, rev: 44, key: after.Key(), put: item(after)},
	}
	if _, err := l.sendEvents(context.Background(), from, evs); err != nil {
		t.Fatal(err)
	}

	seen := map[string]int{} // name -> the batch that carried it
	last := int64(from)
	claimed := -1 // the first batch that brings the peer past the Zone's event
	for i, b := range sent {
		if len(b.keys) > batchItems {
			t.Errorf("batch %d carries %d resources, over the sender's %d", i, len(b.keys), batchItems)
		}
		if b.revision < last {
			t.Errorf("batch %d brings the peer back to %d after %d", i, b.revision, last)
		}
		last = b.revision
		if claimed < 0 && b.revision >= 43 {
			claimed = i
		}
		for _, k := range b.keys {
			seen[k] = i
		}
	}
	if len(seen) != n+2 {
		t.Fatalf("%d distinct resources sent in %d batches, want %d", len(seen), len(sent), n+2)
	}
	if last != 44 {
		t.Errorf("the last batch brings the peer to %d, want 44", last)
	}
	// Every related service is sent by the first batch that claims the
	// Zone's revision: a peer resuming from a batch's revision gets them all.
	for _, svc := range services {
		if i := seen[svc.Name]; i > claimed {
			t.Fatalf("%s went in batch %d, after batch %d claimed revision %d", svc.Name, i, claimed, sent[claimed].revision)
		}
	}
}

// pagedFeed hands a stream its events in the pages given, as the global's
// shared window can: a page shorter than the limit while more follow.
type pagedFeed struct{ pages [][]outEvent }

func (f *pagedFeed) changes(_ context.Context, after int64, _ int) ([]outEvent, error) {
	for _, p := range f.pages {
		if p[0].rev > after {
			return p, nil
		}
	}
	return nil, nil
}

func (*pagedFeed) close() {}

// TestSendLoop_ReadsOnAfterAShortPage pins that the sender reads its feed
// again after a page shorter than pageSize instead of waiting for the
// store's next change: the rest was written before it started waiting,
// so nothing would wake it until the next heartbeat (or the next write).
func TestSendLoop_ReadsOnAfterAShortPage(t *testing.T) {
	st := newCP(t, "global").st // nothing is written to it: Changed never fires
	item := func(name string) *outItem {
		it, err := newOutItem(meshService("default", name, 80), "")
		if err != nil {
			t.Fatal(err)
		}
		return it
	}
	feed := &pagedFeed{pages: [][]outEvent{
		{{typ: store.EventPut, rev: 1, key: msKey("default", "a"), put: item("a")}},
		{{typ: store.EventPut, rev: 2, key: msKey("default", "b"), put: item("b")}},
	}}
	revisions := make(chan int64, 16)
	var l *link
	l = &link{peer: "west", side: relatedSide{}, st: st, feed: feed, heartbeat: time.Hour,
		stats: newStats("west", newMetrics(nil)), log: slog.New(slog.DiscardHandler),
		send: func(env *pb.Envelope) error {
			if c, err := DecodeChanges(env.GetChanges()); err == nil {
				revisions <- c.Revision
				go l.acked(c.Revision)
			}
			return nil
		}}
	l.init()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.sendLoop(ctx, Position{}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sendLoop = %v", err)
		}
	}()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case rev := <-revisions:
			if rev == 2 {
				return
			}
		case <-deadline:
			t.Fatal("the second page was not sent within 5 s of the first (the sender waited for a change)")
		}
	}
}

// churnSide is relatedSide with an inventory during which something is
// written (what a busy store does while a large inventory is taken), and
// which does not send Dataplanes.
type churnSide struct {
	relatedSide
	during func()
}

func (s churnSide) pass(it *outItem) (bool, bool) { return it.key.Kind != resource.Dataplane, false }
func (s churnSide) expected() inventory {
	s.during()
	return inventory{count: 1}
}

// TestSendInventory_WhatChangedWhileTaken: an inventory taken while the
// store moved goes out only when nothing written meanwhile changes what
// the peer holds; otherwise it is dropped, to be taken again.
func TestSendInventory_WhatChangedWhileTaken(t *testing.T) {
	dp := func() *resource.Object {
		return &resource.Object{Kind: resource.Dataplane, Mesh: "default", Name: "web-1", Spec: &resource.DataplaneSpec{
			Networking: resource.DataplaneNetworking{Address: "10.0.0.1", Inbound: []resource.Inbound{{Port: 80, Tags: map[string]string{resource.TagService: "web"}}}}}}
	}
	for _, tc := range []struct {
		name   string
		during func(p *cp)
		sent   bool
	}{
		{"a service the peer does not have", func(p *cp) { p.put(meshService("default", "new", 80), resource.ModeZone, "east") }, false},
		{"a deletion", func(p *cp) { p.delete(msKey("default", "known")) }, false},
		{"a Dataplane the peer does not get", func(p *cp) { p.put(dp(), resource.ModeZone, "east") }, true},
		{"a service the stream sent as it is", func(p *cp) { p.put(meshService("default", "known", 80), resource.ModeZone, "east") }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p := newCP(t, "east")
			known := p.put(meshService("default", "known", 80), resource.ModeZone, "east")
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := p.c.WaitFor(wctx, known.Revision); err != nil {
				t.Fatal(err)
			}
			var inventories []*pb.Inventory
			side := churnSide{during: func() {
				tc.during(p)
				_, written, err := p.st.List(ctx, resource.Mesh) // the store's revision
				if err != nil {
					t.Fatal(err)
				}
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				if err := p.c.WaitFor(wctx, written); err != nil {
					t.Fatalf("the cache did not reach the write during the inventory: %v", err)
				}
			}}
			l := &link{peer: "west", side: side, st: p.st, cache: p.c, feed: directFeed{st: p.st, side: side},
				stats: newStats("west", newMetrics(nil)), inventories: true, log: p.log, heartbeat: time.Hour,
				send: func(env *pb.Envelope) error {
					if inv := env.GetInventory(); inv != nil {
						inventories = append(inventories, inv)
					}
					return nil
				}}
			l.init()
			it, err := newOutItem(known, "")
			if err != nil {
				t.Fatal(err)
			}
			l.digests[it.keyHash] = it.digest // sent on this stream as it is
			rev := p.c.Revision()
			to, _, ok, err := l.sendInventory(ctx, rev)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.sent || len(inventories) != map[bool]int{false: 0, true: 1}[tc.sent] {
				t.Fatalf("inventory sent: %v (%d messages), want %v", ok, len(inventories), tc.sent)
			}
			if tc.sent && (to != rev+1 || inventories[0].GetRevision() != rev+1) {
				t.Errorf("the feed read to %d, the inventory at %d; want both at the write during it, %d", to, inventories[0].GetRevision(), rev+1)
			}
			if !tc.sent && to != rev {
				t.Errorf("a dropped inventory read the feed to %d, want it left at %d for the loop", to, rev)
			}
		})
	}
}
