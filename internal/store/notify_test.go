package store

import (
	"sync"
	"testing"
)

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestNotifier_NotifyClosesCurrentChannelOnly(t *testing.T) {
	var n Notifier
	n.Notify() // no waiters: nothing to close, must not panic

	a := n.C()
	if b := n.C(); a != b {
		t.Fatal("C() before a Notify returned two different channels")
	}
	if isClosed(a) {
		t.Fatal("channel closed before Notify")
	}
	n.Notify()
	if !isClosed(a) {
		t.Fatal("channel still open after Notify")
	}
	c := n.C()
	if isClosed(c) {
		t.Fatal("channel taken after Notify is already closed")
	}
	n.Notify()
	n.Notify() // a second Notify with no new waiter must not close twice
	if !isClosed(c) {
		t.Fatal("channel still open after second Notify")
	}
}

func TestNotifier_WakesManyWaiters(t *testing.T) {
	var n Notifier
	const waiters = 20
	var ready, done sync.WaitGroup
	ready.Add(waiters)
	done.Add(waiters)
	for range waiters {
		go func() {
			defer done.Done()
			ch := n.C()
			ready.Done()
			<-ch
		}()
	}
	ready.Wait()
	n.Notify()
	done.Wait()
}
