package kube

import (
	"encoding/json"
	"strings"
	"sync"

	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/store"
)

// leaseWatch tells readers when the store's leases change
// (store.LeaseNotifier), from a watch of the Lease objects that hold
// them. Without it the API's keys and revocations were read by polling:
// two lists of every meshnames Lease (VIP allocations and token records
// among them) four times a second, forever, by every instance. The
// reads themselves stay lists of the API server: the watch only says when
// to make them.
type leaseWatch struct {
	mu sync.Mutex
	// live: the watch is running, so a change will be heard of.
	live bool
	// waits are the channels LeasesChanged handed out, by prefix.
	waits map[string]chan struct{}
}

var _ store.LeaseNotifier = (*Store)(nil)

// LeasesChanged implements store.LeaseNotifier.
func (s *Store) LeasesChanged(prefix string) <-chan struct{} {
	w := &s.leaseWatch
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.live {
		return nil
	}
	ch, ok := w.waits[prefix]
	if !ok {
		ch = make(chan struct{})
		w.waits[prefix] = ch
	}
	return ch
}

// wake closes the channels of the prefixes that match.
func (w *leaseWatch) wake(match func(prefix string) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for p, ch := range w.waits {
		if match(p) {
			close(ch)
			delete(w.waits, p)
		}
	}
}

// stop ends the notifications: the store closes.
func (w *leaseWatch) stop() {
	w.mu.Lock()
	w.live = false
	w.mu.Unlock()
	w.wake(every)
}

func every(string) bool { return true }

// leaseHandler is the kubeapi.Handler of the watch.
type leaseHandler struct{ w *leaseWatch }

// Replace: a list again, after which no earlier change can be told apart.
func (h leaseHandler) Replace([]json.RawMessage, string) { h.w.wake(every) }

// Watching records whether a change will be heard of; when it no longer
// will, every reader is woken to poll instead.
func (h leaseHandler) Watching(err error) {
	h.w.mu.Lock()
	h.w.live = err == nil
	h.w.mu.Unlock()
	if err != nil {
		h.w.wake(every)
	}
}

// Event wakes the readers of the prefixes of the lease written or deleted.
func (h leaseHandler) Event(ev kubeapi.Event) {
	if ev.Type != kubeapi.Added && ev.Type != kubeapi.Modified && ev.Type != kubeapi.Deleted {
		return
	}
	var o struct {
		Metadata kubeapi.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(ev.Object, &o); err != nil {
		h.w.wake(every) // cannot tell which: every reader reads again
		return
	}
	name := o.Metadata.Annotations[annLeaseName]
	h.w.wake(func(prefix string) bool { return strings.HasPrefix(name, prefix) })
}
