package reconcile

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestQueue_DeduplicatesAndDrains(t *testing.T) {
	q := New[string]()
	q.Add("a", "b", "a")
	q.Add("b", "c")
	if n := q.Len(); n != 3 {
		t.Fatalf("Len = %d, want 3", n)
	}
	got := q.Next(context.Background())
	slices.Sort(got)
	if !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("Next = %v, want [a b c]", got)
	}
	if n := q.Len(); n != 0 {
		t.Errorf("Len after Next = %d, want 0", n)
	}
}

func TestQueue_NextBlocksUntilAdd(t *testing.T) {
	q := New[int]()
	got := make(chan []int)
	go func() { got <- q.Next(context.Background()) }()
	select {
	case v := <-got:
		t.Fatalf("Next returned %v before anything was added", v)
	case <-time.After(20 * time.Millisecond):
	}
	q.Add(7)
	if v := <-got; !slices.Equal(v, []int{7}) {
		t.Errorf("Next = %v, want [7]", v)
	}
}

func TestQueue_NextReturnsNilWhenCancelled(t *testing.T) {
	q := New[int]()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if v := q.Next(ctx); v != nil {
		t.Errorf("Next on a cancelled context = %v, want nil", v)
	}
}

func TestQueue_AddAfterAndClose(t *testing.T) {
	q := New[string]()
	q.AddAfter(time.Millisecond, "retry")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if v := q.Next(ctx); !slices.Equal(v, []string{"retry"}) {
		t.Fatalf("Next = %v, want [retry]", v)
	}
	q.AddAfter(10*time.Millisecond, "never")
	q.Close()
	time.Sleep(30 * time.Millisecond)
	if n := q.Len(); n != 0 {
		t.Errorf("a retry scheduled before Close fired after it (Len %d)", n)
	}
}

func TestQueue_Batches(t *testing.T) {
	q := New[string]()
	ctx, cancel := context.WithCancel(context.Background())
	ch := q.Batches(ctx)
	q.Add("a", "a", "b")
	select {
	case got := <-ch:
		slices.Sort(got)
		if !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("batch %v, want [a b]", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no batch")
	}
	cancel()
	select {
	case _, ok := <-ch:
		if ok {
			t.Error("a batch after cancel")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("channel not closed after cancel")
	}
}

// BenchmarkQueue_Bursts adds and takes bursts of 1,000 keys, as a zone's
// runner does through an initial sync.
func BenchmarkQueue_Bursts(b *testing.B) {
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("svc-%d", i)
	}
	q := New[string]()
	b.ReportAllocs()
	for b.Loop() {
		q.Add(keys...)
		if got := q.Take(); len(got) != len(keys) {
			b.Fatalf("took %d keys, want %d", len(got), len(keys))
		}
	}
}
