package porttest

import (
	"fmt"
	"net"
	"testing"
)

// TestFree: the port is in the range and can be bound for TCP and UDP;
// a port held by a listener is never returned.
func TestFree(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	for range 50 {
		p, err := Free()
		if err != nil {
			t.Fatal(err)
		}
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
