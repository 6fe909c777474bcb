package zonesync

import (
	"context"
	"fmt"

	pb "github.com/meshnames/meshnames/api/zonesync/v1"
	"github.com/meshnames/meshnames/internal/resource"
)

func (l *link) applyLoop(ctx context.Context, inbox <-chan received, positions chan int64) error {
	defer close(positions)
	for in := range inbox {
		if in.inventory != nil {
			if err := l.checkInventory(ctx, in.inventory); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			continue
		}
		raw := in.changes
		c, err := DecodeChanges(raw)
		if err != nil {
			l.refused(ctx, 0, nil, err)
			// What the batch carried is lost to this side, and the
			// batches after it will move the position past it.
			if err := l.askFullState(fmt.Sprintf("this side refused a whole batch: %v", err)); err != nil {
				return err
			}
			continue
		}
		if err := l.apply(ctx, c, int64(len(raw))); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if c.Snapshot && !c.Last {
			continue // the position moves once the whole snapshot is in
		}
		// Hand the position to positionLoop, replacing one it has not taken
		// yet: only the latest matters.
		select {
		case positions <- c.Revision:
		default:
			select {
			case <-positions:
			default:
			}
			positions <- c.Revision
		}
	}
	return nil
}

// checkInventory compares what this side holds of the peer's resources,
// everything the peer sent before inv being written, with inv, and asks
// for a full state when they differ.
func (l *link) checkInventory(ctx context.Context, inv *pb.Inventory) error {
	if err := l.cache.WaitFor(ctx, l.lastWrite); err != nil {
		return err
	}
	held := heldInventory(l.side)
	if held.count == inv.GetCount() && held.sum == inv.GetSum() {
		l.log.Debug("this side holds what the peer sent", "peer", l.peer, "resources", held.count, "revision", inv.GetRevision())
		return nil
	}
	if l.askedFull {
		// The full state this stream got did not make them agree (this
		// side refuses something of it): the next stream asks again.
		l.log.Debug("what this side holds of the peer's still differs from the peer's inventory", "peer", l.peer, "resources", held.count, "inventory", inv.GetCount(), "revision", inv.GetRevision())
		return nil
	}
	reason := fmt.Sprintf("this side holds %d of the peer's resources, the peer's inventory at revision %d names %d", held.count, inv.GetRevision(), inv.GetCount())
	if held.count == inv.GetCount() {
		reason = fmt.Sprintf("this side holds %d of the peer's resources, as many as the peer's inventory at revision %d names, but not the same ones", held.count, inv.GetRevision())
	}
	l.log.Warn("what this side holds of the peer's differs from the peer's inventory; asking for a full state", "peer", l.peer, "reason", reason)
	return l.askFullState(reason)
}

// askFullState asks the peer for a full state (it sends at most one per
// stream).
func (l *link) askFullState(reason string) error {
	if !l.inventories {
		return nil // the peer would not understand
	}
	l.askedFull = true
	if err := l.sendEnvelope(&pb.Envelope{Body: &pb.Envelope_FullStateRequest{FullStateRequest: &pb.FullStateRequest{Reason: reason}}}); err != nil {
		return fmt.Errorf("ask for a full state: %w", err)
	}
	return nil
}

// positionLoop records how far this store has the peer's feed and then
// acknowledges it. It runs beside applyLoop, so that the position's write
// overlaps the next batch's, and the store commits both in one transaction
// when they meet; it is written only after the batch it covers.
func (l *link) positionLoop(ctx context.Context, positions <-chan int64) error {
	for rev := range positions {
		if err := l.savePosition(ctx, rev); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		l.stats.received(rev, 0, 0)
		if err := l.sendEnvelope(&pb.Envelope{Body: &pb.Envelope_Ack{Ack: &pb.Ack{Revision: rev}}}); err != nil {
			return fmt.Errorf("send an ack: %w", err)
		}
	}
	return nil
}

// refused counts and logs a refusal and tells the peer.
func (l *link) refused(ctx context.Context, revision int64, key *resource.Key, err error) {
	l.stats.refused(refusalReason(err), err)
	args := []any{"peer", l.peer, "reason", refusalReason(err), "err", err}
	if key != nil {
		args = append(args, "kind", key.Kind, "mesh", key.Mesh, "name", key.Name)
	}
	l.log.Warn("refused what the peer sent", args...)
	rej := &pb.Rejection{Revision: revision, Reason: err.Error()}
	if key != nil {
		rej.Key = wireKey(*key)
	}
	if ctx.Err() == nil {
		_ = l.sendEnvelope(&pb.Envelope{Body: &pb.Envelope_Rejection{Rejection: rej}})
	}
}

// apply stores one batch: puts and deletes the peer may make. Only once
// they are all written does positionLoop record how far this store has the
// peer's feed (so a crash in between makes the peer send the batch again,
// which changes nothing the second time) and acknowledge it.
func (l *link) apply(ctx context.Context, c *pb.Changes, size int64) error {
	if err := l.cache.WaitFor(ctx, l.lastWrite); err != nil {
		return err
	}
	if c.Snapshot && l.seen == nil {
		l.seen = map[resource.Key]bool{}
	}
	var puts []*resource.Object
	index := make(map[resource.Key]int, len(c.Put))
	for _, r := range c.Put {
		obj, err := l.side.decode(r)
		if err == nil {
			obj, err = l.side.accept(obj)
		}
		if err == nil {
			if errs := l.admit.Admit(obj, l.side.writer()); len(errs) > 0 {
				err = refuse("invalid", "%s: %v", obj.Key(), errs)
			}
		}
		if err != nil {
			k := resource.Key{Kind: resource.Kind(r.GetKind()), Mesh: r.GetMesh(), Name: r.GetName()}
			l.refused(ctx, c.Revision, &k, err)
			continue
		}
		if i, dup := index[obj.Key()]; dup {
			puts[i] = obj // a later put of the same key wins
			continue
		}
		index[obj.Key()] = len(puts)
		puts = append(puts, obj)
		if l.seen != nil {
			l.seen[obj.Key()] = true
		}
	}
	var dels []resource.Key
	resolve := l.side.resolver()
	for _, wk := range c.Delete {
		k, err := decodeKey(wk)
		if err != nil {
			l.refused(ctx, c.Revision, nil, err)
			continue
		}
		for _, target := range resolve(k) {
			if _, put := index[target]; !put {
				dels = append(dels, target)
			}
		}
	}
	if err := l.write(ctx, c.Revision, puts, dels); err != nil {
		return err
	}
	if c.Snapshot && c.Last {
		if err := l.cache.WaitFor(ctx, l.lastWrite); err != nil {
			return err
		}
		var stale []resource.Key
		for _, k := range l.side.owned() {
			if !l.seen[k] {
				stale = append(stale, k)
			}
		}
		l.seen = nil
		if len(stale) > 0 {
			l.log.Info("a full state from the peer left resources out; deleting them", "peer", l.peer, "count", len(stale))
		}
		if err := l.write(ctx, c.Revision, nil, stale); err != nil {
			return err
		}
		l.stats.snapshotReceived()
	}
	l.stats.received(0, int64(len(c.Put)+len(c.Delete)), size)
	return nil
}
