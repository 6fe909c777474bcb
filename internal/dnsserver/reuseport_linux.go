package dnsserver

import (
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// udpSockets is how many UDP sockets share the DNS port: one per core (at
// most 8). One socket is read by one goroutine, which caps a server at
// about one core of packets; with SO_REUSEPORT the kernel spreads the
// clients over several.
func udpSockets() int { return min(runtime.GOMAXPROCS(0), 8) }

// reusePort sets SO_REUSEPORT on a socket before it binds.
func reusePort(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}); err != nil {
		return err
	}
	return serr
}
