// Package ipam owns one address pool over a netip.Prefix: which addresses of
// the prefix are in use, which are quarantined and until when, and the cursor
// from which the next address is handed out (ARCHITECTURE.md section 5,
// seed 000 "VIPs management"). It decides nothing about services: the VIP
// controller (internal/vips) maps services to addresses and persists what
// must survive a restart.
//
// # Addresses
//
// A pool numbers its usable addresses with offsets. The first address of the
// prefix (the network address) and the last (the IPv4 broadcast; IPv6 has
// none, but its last address is excluded too) are never handed out (issue 4,
// ARCHITECTURE.md section 5):
//
//	prefix 241.0.0.0/8
//	address  241.0.0.0  241.0.0.1  241.0.0.2  ...  241.255.255.254  241.255.255.255
//	offset   (network)  0          1          ...  16777213         (broadcast)
//
// A prefix with more than 64 host bits (an IPv6 /63 or shorter) is capped:
// the pool uses the 2^64-2 addresses that follow the first one, so an offset
// always fits in a uint64. No pool ever needs more.
//
// # Memory and cost
//
// Taken addresses (used or quarantined) are kept in a bitmap of 4096-bit
// pages allocated on first use. Pools of up to 2^25 usable addresses (a /7
// for IPv4) index their pages with a slice plus a bitset of full pages;
// larger pools (IPv6 /64) keep pages in a map and drop a page once it is
// empty, so memory follows the number of taken addresses, never the size of
// the prefix. A /8 holds 160 KiB with a million addresses taken and 2.3 MiB
// with all of them (BenchmarkPool_Allocate1M measures both).
//
// Allocate is next-fit: it scans from the cursor (the address after the last
// one it handed out, wrapping around), skipping full pages and full 64-bit
// words with one bit operation each, so a freed address is reused as late as
// possible. A free counter makes an exhausted pool fail in O(1). The
// quarantine is a map plus a min-heap on its end time, so expiring k entries
// costs O(k log n).
//
// # Time
//
// The package never reads the clock: callers pass now (Allocate, Stats,
// Expire) and the end of a quarantine (Release, Quarantine), so tests drive
// it with a fake clock and a pool is a deterministic function of the calls
// made on it. A quarantine that ends at T is over at now == T.
//
// # Imports
//
// ipam is a leaf: it imports only the standard library. It must not import
// internal/resource, internal/store or any controller; they import it.
//
// # Concurrency
//
// A Pool is not safe for concurrent use. The VIP controller owns its pools
// and calls them from its single reconcile goroutine (seed 000: allocation is
// single-threaded, by the leader).
package ipam
