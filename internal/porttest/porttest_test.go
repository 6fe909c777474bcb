package porttest

import (
	"fmt"
	"net"
	"testing"
)

// TestFree: the port is in the range and can be bound for TCP and UDP,
// and no port is returned twice (servers started one after another bind
// theirs only later).
func TestFree(t *testing.T) {
	seen := map[int]bool{}
	for range 500 {
		p, err := Free()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("Free() returned %d twice", p)
		}
		seen[p] = true
		if p < RangeLow || p >= RangeHigh {
			t.Fatalf("Free() = %d, outside [%d, %d)", p, RangeLow, RangeHigh)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("port %d from Free cannot be bound: %v", p, err)
		}
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("port %d from Free cannot be bound for UDP: %v", p, err)
		}
		l.Close()
		u.Close()
	}
}

// TestReserve: a port reserved once is not reserved again while the lock
// is held, as another process would find it (flock conflicts between two
// opens of the file, in one process as in two).
func TestReserve(t *testing.T) {
	p, err := Free()
	if err != nil {
		t.Fatal(err)
	}
	if reserve(p) {
		t.Fatalf("port %d, returned by Free, was reserved again", p)
	}
}
