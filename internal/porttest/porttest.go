// Package porttest picks loopback ports for the servers that tests and
// benchmarks start as real processes (every listener on a free port).
//
// It imports only the standard library; test code only (the layering test
// keeps it out of the binary).
package porttest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
)

// Range is where Free draws ports: below Linux's default ephemeral range
// (32768-60999). A port the kernel hands out for port 0 is also what it
// hands out as the local port of outgoing connections (the tests' HTTP
// clients, PostgreSQL connections), and such a connection took a server's
// port between the check and the server's bind often enough to fail a run
// now and then.
const (
	RangeLow  = 20000
	RangeHigh = 32000
)

var (
	mu    sync.Mutex
	given = map[int]bool{}
)

// Free returns a loopback port that was free for both TCP and UDP (a DNS
// listener takes both) a moment ago, and that it has not returned before
// in this process: a port drawn for one server is not drawn again for
// another before the first has bound it.
func Free() (int, error) {
	mu.Lock()
	defer mu.Unlock()
	for range 1000 {
		port := RangeLow + rand.IntN(RangeHigh-RangeLow)
		if given[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		given[port] = true
		return port, nil
	}
	return 0, errors.New("porttest: no free loopback port between 20000 and 32000")
}
