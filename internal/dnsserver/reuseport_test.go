package dnsserver

import (
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The port is taken by the shared sockets: another server (which would
// share it too) is refused, on UDP and TCP alike.
func TestListen_SharedPortRefusedToOthers(t *testing.T) {
	n := 3
	if runtime.GOOS != "linux" {
		n = 1 // no SO_REUSEPORT elsewhere
	}
	pcs, ln, err := listen("127.0.0.1:0", n)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, pc := range pcs {
		defer pc.Close()
	}
	if len(pcs) != n {
		t.Fatalf("%d UDP sockets, want %d", len(pcs), n)
	}
	addr := pcs[0].LocalAddr().String()
	for _, pc := range pcs {
		if pc.LocalAddr().String() != addr {
			t.Fatalf("sockets on %s and %s", addr, pc.LocalAddr())
		}
	}
	if ln.Addr().String() != addr {
		t.Fatalf("TCP on %s, UDP on %s", ln.Addr(), addr)
	}
	for _, n := range []int{1, 2} {
		if _, _, err := listen(addr, n); err == nil || !strings.Contains(err.Error(), "dns.addr: cannot listen on "+addr) {
			t.Errorf("a second listen(%s, %d): %v, want the port refused", addr, n, err)
		}
	}
}

// The kernel spreads clients over the shared sockets.
func TestListen_SpreadsClients(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SO_REUSEPORT sockets are used on Linux only")
	}
	pcs, ln, err := listen("127.0.0.1:0", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, pc := range pcs {
		defer pc.Close()
	}
	const clients = 32
	for range clients {
		c, err := net.Dial("udp", pcs[0].LocalAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	got := make([]int, len(pcs))
	buf := make([]byte, 16)
	for i, pc := range pcs {
		for {
			_ = pc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			if _, _, err := pc.ReadFrom(buf); err != nil {
				break
			}
			got[i]++
		}
	}
	if got[0]+got[1] != clients || got[0] == 0 || got[1] == 0 {
		t.Errorf("datagrams per socket %v, want %d spread over both", got, clients)
	}
}
