package cli

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer safe for the reporter's goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestProgress_Terminal: on a terminal the count is rewritten in place on
// one line, which is erased at the end.
func TestProgress_Terminal(t *testing.T) {
	var out lockedBuffer
	p := &progress{w: &out, total: 4, terminal: true, stop: make(chan struct{}), stopped: make(chan struct{})}
	go p.redraw(time.Millisecond)
	for range 3 {
		p.add()
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "3 of 4") {
		if time.Now().After(deadline) {
			t.Fatalf("no line shows 3 of 4: %q", out.String())
		}
		time.Sleep(time.Millisecond)
	}
	p.add()
	p.finish()
	got := out.String()
	if !strings.HasPrefix(got, "\rapplying: ") || !strings.HasSuffix(got, "\r\x1b[K") || strings.Contains(got, "\n") {
		t.Errorf("terminal output %q: want lines rewritten with \\r, no newline, erased at the end", got)
	}
	if !strings.Contains(got, "applying: 3 of 4 resources (75%)\x1b[K") {
		t.Errorf("terminal output %q lacks the count of 3", got)
	}
}

// TestProgress_NotATerminal: without --progress nothing is reported when
// standard error is not a terminal; the nil reporter is safe to use.
func TestProgress_NotATerminal(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, 1000, false)
	if p != nil {
		t.Fatal("newProgress on a buffer without force: want nil")
	}
	p.add()
	p.finish()
	if out.Len() != 0 {
		t.Errorf("wrote %q", out.String())
	}
	forced := newProgress(&out, 1000, true)
	for range 1000 {
		forced.add()
	}
	forced.finish()
	if n := strings.Count(out.String(), "\n"); n != 10 {
		t.Errorf("--progress over 1000 writes printed %d lines, want 10 (one per tenth):\n%s", n, out.String())
	}
}
