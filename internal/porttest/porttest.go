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
	"os"
	"path/filepath"
	"sync"
	"syscall"
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
// in this process nor any other process using porttest on this machine
// while it runs: a port drawn for one server is not drawn again for
// another before the first has bound it. go test runs packages in
// parallel processes, which could otherwise draw the same port before
// either server bound it ("bind: address already in use"); each process
// therefore holds a lock on a file per port it returned (reserve) until
// it exits.
func Free() (int, error) {
	mu.Lock()
	defer mu.Unlock()
	for range 1000 {
		port := RangeLow + rand.IntN(RangeHigh-RangeLow)
		if given[port] || !reserve(port) {
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

// reserve takes the lock of port's file in the machine's temporary
// directory and keeps it until the process exits (the kernel releases a
// flock with the last descriptor of its file); false when another
// process holds it. Where the lock cannot be taken for another reason
// (no such directory), it reserves nothing and says true: the bind
// checks still hold.
func reserve(port int) bool {
	dir := filepath.Join(os.TempDir(), "meshnames-porttest")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprint(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return !errors.Is(err, syscall.EWOULDBLOCK)
	}
	held = append(held, f) // kept open: the lock lasts as long as the process
	return true
}

// held are the files whose locks reserve keeps.
var held []*os.File
