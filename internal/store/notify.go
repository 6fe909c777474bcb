package store

import "sync"

// Notifier is the broadcast behind Store.Changed: C returns a channel that
// the next Notify closes. Every backend uses it, so readers see one
// behaviour whatever wakes them (a local commit, a PostgreSQL NOTIFY, a
// safety poll). Spurious wake-ups are allowed: a woken reader asks Changes
// and may find nothing new.
//
// The zero value is ready to use. It is safe for concurrent use; Notify
// never blocks.
type Notifier struct {
	mu sync.Mutex
	ch chan struct{} // nil until someone waits: Notify without waiters costs nothing
}

// C returns a channel that is closed at the next Notify.
func (n *Notifier) C() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

// Notify wakes everyone waiting on a channel returned by C.
func (n *Notifier) Notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
}
