package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// progress reports how many of total resources apply has written, on w
// (standard error). On a terminal it rewrites one line in place, at most
// every tick, and erases it at the end, before the results are printed.
// Elsewhere (--progress into a file or a pipe) it prints a line at each
// tenth of the total, so that a log shows how far a large apply got.
// Its methods are safe for concurrent use.
type progress struct {
	w        io.Writer
	total    int
	terminal bool

	mu      sync.Mutex
	done    int
	shown   int // the last count shown
	printed bool
	stop    chan struct{}
	stopped chan struct{}
}

// progressTick is how often the terminal line is rewritten.
const progressTick = 100 * time.Millisecond

// newProgress returns a reporter for total writes, or nil (which reports
// nothing) when w is not a terminal and force is false.
func newProgress(w io.Writer, total int, force bool) *progress {
	terminal := isTerminal(w)
	if total == 0 || (!terminal && !force) {
		return nil
	}
	p := &progress{w: w, total: total, terminal: terminal, stop: make(chan struct{}), stopped: make(chan struct{})}
	if terminal {
		go p.redraw(progressTick)
	} else {
		close(p.stopped)
	}
	return p
}

// isTerminal reports whether w is a character device (a terminal, or
// /dev/null, where writing costs nothing).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// add counts one write done.
func (p *progress) add() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	if !p.terminal && p.done*10/p.total > p.shown*10/p.total {
		p.shown = p.done
		fmt.Fprintf(p.w, "applied %d of %d resources (%d%%)\n", p.done, p.total, p.done*100/p.total)
	}
}

// redraw rewrites the terminal line every tick until finish.
func (p *progress) redraw(tick time.Duration) {
	defer close(p.stopped)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		p.mu.Lock()
		if p.done != p.shown || !p.printed {
			p.shown, p.printed = p.done, true
			fmt.Fprintf(p.w, "\rapplying: %d of %d resources (%d%%)\x1b[K", p.done, p.total, p.done*100/p.total)
		}
		p.mu.Unlock()
	}
}

// finish stops the reporter and erases the terminal line.
func (p *progress) finish() {
	if p == nil {
		return
	}
	if p.terminal {
		close(p.stop)
	}
	<-p.stopped
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.printed {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}
