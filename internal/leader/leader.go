// Package leader decides which control-plane instance runs the controllers.
// Controllers write status; with several instances on one store exactly one
// of them must do so (ARCHITECTURE.md section 3).
//
// Local is the elector of the embedded store, whose single process is always
// the leader. Lease elects one of the instances sharing a PostgreSQL schema
// through a Campaign (the store's lease row and a session that stands for
// the leader being alive; see lease.go). Lease hands its work a context
// carrying a store.Fence, so that every write the work makes is checked
// against the lease in its own transaction: a deposed leader that has not
// noticed yet cannot write.
//
// It imports store (for the fence) and nothing else of this module: the
// SQL of the election lives with the store (store/postgres). An elector's
// Run is called once; its other methods are safe for concurrent use.
package leader

import (
	"context"
	"sync/atomic"
)

// LeaseName names the leader lease in the store's leases table.
const LeaseName = "leader"

// Elector runs work while this instance leads.
type Elector interface {
	// Run calls lead each time this instance becomes the leader, with a
	// context that ends when leadership is lost or ctx ends, and returns
	// when ctx ends. lead must return when its context ends.
	Run(ctx context.Context, lead func(ctx context.Context)) error
	// Leading reports whether this instance leads now.
	Leading() bool
	// Self is this instance's identity as a lease holder.
	Self() string
}

// Local is always the leader.
type Local struct {
	// ID names the instance in Self.
	ID      string
	running atomic.Bool
}

// Run calls lead once and returns when it does.
func (l *Local) Run(ctx context.Context, lead func(ctx context.Context)) error {
	l.running.Store(true)
	defer l.running.Store(false)
	lead(ctx)
	return nil
}

// Leading reports whether Run is running.
func (l *Local) Leading() bool { return l.running.Load() }

// Self returns ID.
func (l *Local) Self() string { return l.ID }
