// Package leader decides which control-plane instance runs the controllers.
// Controllers write status; with several instances on one store exactly one
// of them must do so (ARCHITECTURE.md section 3).
//
// Local is the elector of the embedded store, whose single process is always
// the leader. PostgresLock elects one of the instances sharing a PostgreSQL
// schema with a session advisory lock; the lease with a fencing term of the
// high-availability milestone will implement the same interface.
//
// It imports only the standard library and pgx.
package leader

import "context"

// Elector runs work while this instance leads.
type Elector interface {
	// Run calls lead each time this instance becomes the leader, with a
	// context that ends when leadership is lost or ctx ends, and returns
	// when ctx ends. lead must return when its context ends.
	Run(ctx context.Context, lead func(ctx context.Context)) error
}

// Local is always the leader.
type Local struct{}

// Run calls lead once and returns when it does.
func (Local) Run(ctx context.Context, lead func(ctx context.Context)) error {
	lead(ctx)
	return nil
}
