//go:build !linux

package dnsserver

import "syscall"

// udpSockets is one where SO_REUSEPORT is not used.
func udpSockets() int { return 1 }

// reusePort is never called with one socket.
func reusePort(_, _ string, _ syscall.RawConn) error { return nil }
