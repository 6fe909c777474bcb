package faults

import (
	"net"
	"sync"
	"testing"
	"time"
)

// cut is how a proxy fails.
type cut int

const (
	open   cut = iota // forwarding
	silent            // nothing forwarded, connections kept open: a partition that drops packets
	reset             // every connection reset, new ones too
)

func (c cut) String() string { return [...]string{"open", "silent", "reset"}[c] }

// proxy forwards TCP connections to target and fails on demand: silently
// (it stops forwarding and holds new connections without dialling, so
// that both ends wait, as behind a network that drops packets; healing
// lets the held bytes through, as TCP retransmission would) or with
// resets (every connection, and each new one, is reset).
type proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cond  *sync.Cond // on mu: state changed
	state cut
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// startProxy listens on a free loopback port; it stops when t ends.
func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		_ = ln.Close()
		p.set(reset)
		p.wg.Wait()
	})
	return p
}

// addr is where clients connect.
func (p *proxy) addr() string { return p.ln.Addr().String() }

// set changes how the proxy forwards: open heals, silent and reset cut.
func (p *proxy) set(c cut) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state = c
	if c == reset {
		for conn := range p.conns {
			resetConn(conn)
		}
	}
	p.cond.Broadcast()
}

// resetConn closes conn with a RST rather than a FIN.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// pass waits while the proxy is silent; false when it resets.
func (p *proxy) pass() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.state == silent {
		p.cond.Wait()
	}
	return p.state == open
}

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// serve forwards one connection once the proxy lets it through.
func (p *proxy) serve(c net.Conn) {
	p.track(c, true)
	defer p.track(c, false)
	if !p.pass() {
		resetConn(c)
		return
	}
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		resetConn(c)
		return
	}
	p.track(up, true)
	defer p.track(up, false)
	var wg sync.WaitGroup
	for _, pair := range [][2]net.Conn{{c, up}, {up, c}} {
		wg.Go(func() { p.pump(pair[0], pair[1]) })
	}
	wg.Wait()
}

// track adds or removes a connection the proxy holds; a connection made
// while the proxy resets is reset at once.
func (p *proxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !add {
		delete(p.conns, c)
		return
	}
	p.conns[c] = struct{}{}
	if p.state == reset {
		resetConn(c)
	}
}

// pump copies src to dst, waiting before each write while the proxy is
// silent; it closes both ends when either fails or the proxy resets.
func (p *proxy) pump(dst, src net.Conn) {
	defer func() { _, _ = dst.Close(), src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.pass() {
				resetConn(dst)
				resetConn(src)
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a failure: both ends close, as the peers would see
		}
	}
}
