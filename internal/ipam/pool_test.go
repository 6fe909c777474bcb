package ipam_test

import (
	"errors"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/ipam"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// addrComparer lets go-cmp compare netip.Addr, whose fields are unexported.
var addrComparer = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })

func mustPool(t testing.TB, prefix string) *ipam.Pool {
	t.Helper()
	p, err := ipam.NewPool(netip.MustParsePrefix(prefix))
	if err != nil {
		t.Fatalf("NewPool(%s): %v", prefix, err)
	}
	return p
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

// allocateN allocates n addresses at now, failing the test on an error.
func allocateN(t *testing.T, p *ipam.Pool, now time.Time, n int) []netip.Addr {
	t.Helper()
	var out []netip.Addr
	for range n {
		a, err := p.Allocate(now)
		if err != nil {
			t.Fatalf("Allocate after %v: %v", out, err)
		}
		out = append(out, a)
	}
	return out
}

func TestNewPool(t *testing.T) {
	tests := []struct {
		name    string
		prefix  netip.Prefix
		size    uint64
		first   string // first usable address
		wantErr string
	}{
		{name: "v4-slash8", prefix: netip.MustParsePrefix("241.0.0.0/8"), size: 1<<24 - 2, first: "241.0.0.1"},
		{name: "v4-slash30", prefix: netip.MustParsePrefix("10.0.0.4/30"), size: 2, first: "10.0.0.5"},
		{name: "v4-slash0", prefix: netip.MustParsePrefix("0.0.0.0/0"), size: 1<<32 - 2, first: "0.0.0.1"},
		{name: "v4-slash31", prefix: netip.MustParsePrefix("10.0.0.0/31"), wantErr: "prefix 10.0.0.0/31: too small: 0 usable addresses"},
		{name: "v4-slash32", prefix: netip.MustParsePrefix("10.0.0.0/32"), wantErr: "prefix 10.0.0.0/32: too small: 0 usable addresses"},
		{name: "v4-unmasked", prefix: netip.MustParsePrefix("241.0.0.1/8"), wantErr: "prefix 241.0.0.1/8: not masked: host bits must be zero, want 241.0.0.0/8"},
		{name: "v6-slash126", prefix: netip.MustParsePrefix("fd00::/126"), size: 2, first: "fd00::1"},
		{name: "v6-slash127", prefix: netip.MustParsePrefix("fd00::/127"), wantErr: "too small"},
		{name: "v6-slash128", prefix: netip.MustParsePrefix("fd00::/128"), wantErr: "too small"},
		{name: "v6-slash64", prefix: netip.MustParsePrefix("fd00:1:2:3::/64"), size: math.MaxUint64 - 1, first: "fd00:1:2:3::1"},
		{name: "v6-slash48-capped", prefix: netip.MustParsePrefix("fd00:1:2::/48"), size: math.MaxUint64 - 1, first: "fd00:1:2::1"},
		{name: "v6-slash0-capped", prefix: netip.MustParsePrefix("::/0"), size: math.MaxUint64 - 1, first: "::1"},
		{name: "v6-unmasked", prefix: netip.MustParsePrefix("fd00::1/64"), wantErr: "not masked"},
		{name: "v6-top", prefix: netip.MustParsePrefix("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fff0/124"), size: 14, first: "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fff1"},
		{name: "invalid", prefix: netip.Prefix{}, wantErr: "invalid prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ipam.NewPool(tt.prefix)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("NewPool(%s) = %v, want error containing %q", tt.prefix, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewPool(%s): %v", tt.prefix, err)
			}
			if p.Prefix() != tt.prefix {
				t.Errorf("Prefix() = %s, want %s", p.Prefix(), tt.prefix)
			}
			if p.Size() != tt.size {
				t.Errorf("Size() = %d, want %d", p.Size(), tt.size)
			}
			if got := p.Cursor(); got != netip.MustParseAddr(tt.first) {
				t.Errorf("Cursor() = %s, want %s", got, tt.first)
			}
			a, err := p.Allocate(t0)
			if err != nil || a != netip.MustParseAddr(tt.first) {
				t.Errorf("first Allocate = %v, %v; want %s", a, err, tt.first)
			}
		})
	}
}

func TestPool_Contains(t *testing.T) {
	v4 := mustPool(t, "241.0.0.0/29")
	v6 := mustPool(t, "fd00::/125")
	big := mustPool(t, "fd00::/64")
	tests := []struct {
		name string
		pool *ipam.Pool
		ip   netip.Addr
		want bool
	}{
		{"v4-network", v4, netip.MustParseAddr("241.0.0.0"), false},
		{"v4-first-usable", v4, netip.MustParseAddr("241.0.0.1"), true},
		{"v4-last-usable", v4, netip.MustParseAddr("241.0.0.6"), true},
		{"v4-broadcast", v4, netip.MustParseAddr("241.0.0.7"), false},
		{"v4-outside-above", v4, netip.MustParseAddr("241.0.0.8"), false},
		{"v4-outside-below", v4, netip.MustParseAddr("240.255.255.255"), false},
		{"v4-mapped-in-v4-pool", v4, netip.MustParseAddr("::ffff:241.0.0.1"), false},
		{"v6-in-v4-pool", v4, netip.MustParseAddr("fd00::1"), false},
		{"zero-addr", v4, netip.Addr{}, false},
		{"v6-first", v6, netip.MustParseAddr("fd00::"), false},
		{"v6-first-usable", v6, netip.MustParseAddr("fd00::1"), true},
		{"v6-last-usable", v6, netip.MustParseAddr("fd00::6"), true},
		{"v6-last", v6, netip.MustParseAddr("fd00::7"), false},
		{"v6-zoned", v6, netip.MustParseAddr("fd00::1%eth0"), false},
		{"v4-in-v6-pool", v6, netip.MustParseAddr("241.0.0.1"), false},
		{"slash64-last-usable", big, netip.MustParseAddr("fd00::ffff:ffff:ffff:fffe"), true},
		{"slash64-last", big, netip.MustParseAddr("fd00::ffff:ffff:ffff:ffff"), false},
		{"slash64-next-prefix", big, netip.MustParseAddr("fd00:0:0:1::1"), false},
		{"slash64-below", big, netip.MustParseAddr("fcff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.pool.Contains(tt.ip); got != tt.want {
				t.Errorf("%s.Contains(%s) = %v, want %v", tt.pool.Prefix(), tt.ip, got, tt.want)
			}
		})
	}
}

func TestPool_FirstAndLastNeverHandedOut(t *testing.T) {
	for _, tt := range []struct {
		name, prefix string
		want         []netip.Addr
	}{
		{"v4", "10.0.0.4/30", addrs("10.0.0.5", "10.0.0.6")},
		{"v6", "fd00::4/126", addrs("fd00::5", "fd00::6")},
		{"v4-top", "255.255.255.252/30", addrs("255.255.255.253", "255.255.255.254")},
		{"v6-top", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffc/126", addrs("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffd", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPool(t, tt.prefix)
			got := allocateN(t, p, t0, 2)
			if diff := cmp.Diff(tt.want, got, addrComparer); diff != "" {
				t.Errorf("allocations (-want +got):\n%s", diff)
			}
			if a, err := p.Allocate(t0); !errors.Is(err, ipam.ErrExhausted) {
				t.Errorf("third Allocate = %v, %v; want ErrExhausted", a, err)
			}
			pfx := p.Prefix()
			first, last := pfx.Addr(), got[1].Next()
			for _, ip := range []netip.Addr{first, last} {
				if err := p.Reserve(ip); !errors.Is(err, ipam.ErrNotInPool) {
					t.Errorf("Reserve(%s) = %v, want ErrNotInPool", ip, err)
				}
			}
		})
	}
}

func TestPool_NextFit(t *testing.T) {
	p := mustPool(t, "241.0.0.0/29") // .1 to .6
	got := allocateN(t, p, t0, 3)
	// Released addresses, even with their quarantine over, come after the
	// untouched ones: the cursor moves on.
	for _, ip := range addrs("241.0.0.2", "241.0.0.1") {
		if err := p.Release(ip, t0); err != nil {
			t.Fatal(err)
		}
	}
	got = append(got, allocateN(t, p, t0, 4)...)
	want := addrs("241.0.0.1", "241.0.0.2", "241.0.0.3", "241.0.0.4", "241.0.0.5", "241.0.0.6", "241.0.0.1")
	if diff := cmp.Diff(want, got, addrComparer); diff != "" {
		t.Errorf("allocation order (-want +got):\n%s", diff)
	}
	if c := p.Cursor(); c != netip.MustParseAddr("241.0.0.2") {
		t.Errorf("Cursor() = %s, want 241.0.0.2", c)
	}
	// The cursor survives Release and Reserve.
	if err := p.Release(netip.MustParseAddr("241.0.0.5"), t0); err != nil {
		t.Fatal(err)
	}
	if err := p.Reserve(netip.MustParseAddr("241.0.0.5")); err != nil {
		t.Fatal(err)
	}
	if c := p.Cursor(); c != netip.MustParseAddr("241.0.0.2") {
		t.Errorf("Cursor() after Release and Reserve = %s, want 241.0.0.2", c)
	}
	a, err := p.Allocate(t0)
	if err != nil || a != netip.MustParseAddr("241.0.0.2") {
		t.Errorf("Allocate = %v, %v; want 241.0.0.2", a, err)
	}
}

func TestPool_WrapAround(t *testing.T) {
	p := mustPool(t, "fd00::/125") // ::1 to ::6
	if err := p.SetCursor(netip.MustParseAddr("fd00::5")); err != nil {
		t.Fatal(err)
	}
	if err := p.Reserve(netip.MustParseAddr("fd00::6")); err != nil {
		t.Fatal(err)
	}
	if err := p.Reserve(netip.MustParseAddr("fd00::1")); err != nil {
		t.Fatal(err)
	}
	got := allocateN(t, p, t0, 4)
	want := addrs("fd00::5", "fd00::2", "fd00::3", "fd00::4")
	if diff := cmp.Diff(want, got, addrComparer); diff != "" {
		t.Errorf("allocation order (-want +got):\n%s", diff)
	}
	if err := p.SetCursor(netip.MustParseAddr("fd00::7")); !errors.Is(err, ipam.ErrNotInPool) {
		t.Errorf("SetCursor(fd00::7) = %v, want ErrNotInPool", err)
	}
}

// TestPool_Errors checks each operation's errors on one pool state: .1 used,
// .2 quarantined, .3 to .6 free.
func TestPool_Errors(t *testing.T) {
	until := t0.Add(time.Minute)
	newPool := func(t *testing.T) *ipam.Pool {
		p := mustPool(t, "241.0.0.0/29")
		allocateN(t, p, t0, 2)
		if err := p.Release(netip.MustParseAddr("241.0.0.2"), until); err != nil {
			t.Fatal(err)
		}
		return p
	}
	used, quarantined, free := netip.MustParseAddr("241.0.0.1"), netip.MustParseAddr("241.0.0.2"), netip.MustParseAddr("241.0.0.3")
	outside, broadcast := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("241.0.0.7")
	tests := []struct {
		name    string
		op      func(p *ipam.Pool) error
		want    error
		wantMsg string
	}{
		{"reserve-free", func(p *ipam.Pool) error { return p.Reserve(free) }, nil, ""},
		{"reserve-used", func(p *ipam.Pool) error { return p.Reserve(used) }, ipam.ErrInUse, "reserve 241.0.0.1: in use"},
		{"reserve-quarantined", func(p *ipam.Pool) error { return p.Reserve(quarantined) }, nil, ""},
		{"reserve-outside", func(p *ipam.Pool) error { return p.Reserve(outside) }, ipam.ErrNotInPool, "reserve 10.0.0.1: not in pool 241.0.0.0/29"},
		{"reserve-broadcast", func(p *ipam.Pool) error { return p.Reserve(broadcast) }, ipam.ErrNotInPool, ""},
		{"release-used", func(p *ipam.Pool) error { return p.Release(used, until) }, nil, ""},
		{"release-free", func(p *ipam.Pool) error { return p.Release(free, until) }, ipam.ErrNotInUse, "release 241.0.0.3: not in use"},
		{"release-quarantined", func(p *ipam.Pool) error { return p.Release(quarantined, until) }, ipam.ErrNotInUse, "release 241.0.0.2: not in use: quarantined"},
		{"release-outside", func(p *ipam.Pool) error { return p.Release(outside, until) }, ipam.ErrNotInPool, ""},
		{"quarantine-free", func(p *ipam.Pool) error { return p.Quarantine(free, until) }, nil, ""},
		{"quarantine-quarantined", func(p *ipam.Pool) error { return p.Quarantine(quarantined, until) }, nil, ""},
		{"quarantine-used", func(p *ipam.Pool) error { return p.Quarantine(used, until) }, ipam.ErrInUse, "quarantine 241.0.0.1: in use"},
		{"quarantine-outside", func(p *ipam.Pool) error { return p.Quarantine(outside, until) }, ipam.ErrNotInPool, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPool(t)
			_, used0, q0 := p.Stats(t0)
			err := tt.op(p)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("got error %v, want %v", err, tt.want)
			}
			if tt.wantMsg != "" && err.Error() != tt.wantMsg {
				t.Errorf("error message %q, want %q", err, tt.wantMsg)
			}
			if err != nil {
				// A failed operation changes nothing.
				if _, u, q := p.Stats(t0); u != used0 || q != q0 {
					t.Errorf("after failed op Stats = used %d quarantined %d, want %d %d", u, q, used0, q0)
				}
			}
		})
	}
}

func TestPool_ReserveEndsQuarantine(t *testing.T) {
	p := mustPool(t, "241.0.0.0/30")
	a := allocateN(t, p, t0, 1)[0]
	if err := p.Release(a, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := p.Reserve(a); err != nil {
		t.Fatalf("Reserve of a quarantined address: %v", err)
	}
	if _, used, q := p.Stats(t0); used != 1 || q != 0 {
		t.Errorf("Stats = used %d quarantined %d, want 1 0", used, q)
	}
	if _, ok := p.NextExpiry(); ok {
		t.Error("NextExpiry reports a quarantine after Reserve took it")
	}
	// Expire does not report it: the caller's record for it is now an
	// allocation, which must stay.
	if got := p.Expire(t0.Add(2 * time.Hour)); len(got) != 0 {
		t.Errorf("Expire = %v, want none", got)
	}
}

func TestPool_AllocateSkipsQuarantined(t *testing.T) {
	p := mustPool(t, "241.0.0.0/29")
	allocateN(t, p, t0, 6)
	until := t0.Add(30 * time.Second)
	for _, ip := range addrs("241.0.0.3", "241.0.0.5") {
		if err := p.Release(ip, until); err != nil {
			t.Fatal(err)
		}
	}
	for _, now := range []time.Time{t0, until.Add(-time.Nanosecond)} {
		_, err := p.Allocate(now)
		if !errors.Is(err, ipam.ErrExhausted) {
			t.Fatalf("Allocate(%s) inside the quarantine = %v, want ErrExhausted", now, err)
		}
		want := "allocate from 241.0.0.0/29: pool exhausted: 2 addresses in quarantine, the first until 2026-01-01T00:00:30Z"
		if err.Error() != want {
			t.Errorf("error %q, want %q", err, want)
		}
		var ee *ipam.ExhaustedError
		if !errors.As(err, &ee) {
			t.Fatalf("error %T, want *ipam.ExhaustedError", err)
		}
		wantErr := ipam.ExhaustedError{Prefix: p.Prefix(), Size: 6, Quarantined: 2, NextExpiry: until}
		if diff := cmp.Diff(wantErr, *ee, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
			t.Errorf("ExhaustedError (-want +got):\n%s", diff)
		}
	}
	if got, ok := p.NextExpiry(); !ok || !got.Equal(until) {
		t.Errorf("NextExpiry() = %s, %v; want %s", got, ok, until)
	}
	// A quarantine is over at its end time.
	got := allocateN(t, p, until, 2)
	if diff := cmp.Diff(addrs("241.0.0.3", "241.0.0.5"), got, addrComparer); diff != "" {
		t.Errorf("allocations at the end of the quarantine (-want +got):\n%s", diff)
	}
	_, err := p.Allocate(until)
	if want := "allocate from 241.0.0.0/29: pool exhausted: all 6 addresses in use"; err == nil || err.Error() != want {
		t.Errorf("Allocate on a full pool = %v, want %q", err, want)
	}
}

func TestPool_QuarantineKeepsLaterEnd(t *testing.T) {
	a := netip.MustParseAddr("241.0.0.1")
	for _, tt := range []struct {
		name   string
		ends   []time.Duration
		expiry time.Duration
	}{
		{"extend", []time.Duration{10 * time.Second, 20 * time.Second}, 20 * time.Second},
		{"shorten-ignored", []time.Duration{20 * time.Second, 10 * time.Second}, 20 * time.Second},
		{"same", []time.Duration{10 * time.Second, 10 * time.Second}, 10 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPool(t, "241.0.0.0/30")
			if err := p.Reserve(netip.MustParseAddr("241.0.0.2")); err != nil {
				t.Fatal(err)
			}
			for _, d := range tt.ends {
				if err := p.Quarantine(a, t0.Add(d)); err != nil {
					t.Fatal(err)
				}
			}
			if got, _ := p.NextExpiry(); !got.Equal(t0.Add(tt.expiry)) {
				t.Errorf("NextExpiry() = %s, want %s", got, t0.Add(tt.expiry))
			}
			if _, err := p.Allocate(t0.Add(tt.expiry - time.Nanosecond)); !errors.Is(err, ipam.ErrExhausted) {
				t.Errorf("Allocate before the end = %v, want ErrExhausted", err)
			}
			if got, err := p.Allocate(t0.Add(tt.expiry)); err != nil || got != a {
				t.Errorf("Allocate at the end = %v, %v; want %s", got, err, a)
			}
		})
	}
}

func TestPool_Expire(t *testing.T) {
	p := mustPool(t, "241.0.0.0/28") // .1 to .14
	allocateN(t, p, t0, 14)
	rel := func(ip string, d time.Duration) {
		t.Helper()
		if err := p.Release(netip.MustParseAddr(ip), t0.Add(d)); err != nil {
			t.Fatal(err)
		}
	}
	rel("241.0.0.9", 10*time.Second)
	rel("241.0.0.2", 10*time.Second)
	rel("241.0.0.4", 20*time.Second)
	rel("241.0.0.7", 30*time.Second)
	rel("241.0.0.8", 40*time.Second)

	if got := p.Expire(t0.Add(9 * time.Second)); len(got) != 0 {
		t.Errorf("Expire before any end = %v, want none", got)
	}
	if diff := cmp.Diff(addrs("241.0.0.2", "241.0.0.9"), p.Expire(t0.Add(10*time.Second)), addrComparer); diff != "" {
		t.Errorf("Expire at 10s (-want +got):\n%s", diff)
	}
	// Allocate drops ended quarantines on its own: .4 ended at 20s, and
	// Expire reports it once, if it is still free.
	if got, err := p.Allocate(t0.Add(25 * time.Second)); err != nil || got != netip.MustParseAddr("241.0.0.2") {
		t.Fatalf("Allocate at 25s = %v, %v; want 241.0.0.2 (next-fit from the cursor at .1)", got, err)
	}
	// .7 ends at 30s, is handed out and released again: its new record is
	// current, so Expire must not report it. .9, ended at 10s and reported
	// then, is handed out: not reported again.
	if err := p.SetCursor(netip.MustParseAddr("241.0.0.5")); err != nil {
		t.Fatal(err)
	}
	for _, want := range addrs("241.0.0.7", "241.0.0.9") {
		if got, err := p.Allocate(t0.Add(30 * time.Second)); err != nil || got != want {
			t.Fatalf("Allocate at 30s = %v, %v; want %s", got, err, want)
		}
	}
	rel("241.0.0.7", 90*time.Second)
	// .8 ends at 40s but is taken first by Reserve (a ClusterIP): the
	// caller's allocation record replaces the quarantine record.
	if err := p.Reserve(netip.MustParseAddr("241.0.0.8")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(addrs("241.0.0.4"), p.Expire(t0.Add(45*time.Second)), addrComparer); diff != "" {
		t.Errorf("Expire at 45s (-want +got):\n%s", diff)
	}
	if got := p.Expire(t0.Add(45 * time.Second)); len(got) != 0 {
		t.Errorf("second Expire = %v, want none", got)
	}
	if diff := cmp.Diff(addrs("241.0.0.7"), p.Expire(t0.Add(90*time.Second)), addrComparer); diff != "" {
		t.Errorf("Expire at 90s (-want +got):\n%s", diff)
	}
}

func TestPool_Stats(t *testing.T) {
	type stats struct{ Size, Used, Quarantined uint64 }
	p := mustPool(t, "fd00::/124") // 14 usable
	get := func(now time.Time) stats {
		s, u, q := p.Stats(now)
		return stats{s, u, q}
	}
	steps := []struct {
		name string
		do   func() error
		now  time.Time
		want stats
	}{
		{"empty", func() error { return nil }, t0, stats{14, 0, 0}},
		{"allocate-5", func() error { _, err := allocate(p, t0, 5); return err }, t0, stats{14, 5, 0}},
		{"reserve", func() error { return p.Reserve(netip.MustParseAddr("fd00::e")) }, t0, stats{14, 6, 0}},
		{"release-2", func() error {
			return errors.Join(p.Release(netip.MustParseAddr("fd00::1"), t0.Add(time.Minute)),
				p.Release(netip.MustParseAddr("fd00::2"), t0.Add(2*time.Minute)))
		}, t0, stats{14, 4, 2}},
		{"quarantine-free", func() error { return p.Quarantine(netip.MustParseAddr("fd00::9"), t0.Add(3*time.Minute)) }, t0, stats{14, 4, 3}},
		{"one-ended", func() error { return nil }, t0.Add(time.Minute), stats{14, 4, 2}},
		{"all-ended", func() error { return nil }, t0.Add(3 * time.Minute), stats{14, 4, 0}},
		{"before-again", func() error { return nil }, t0, stats{14, 4, 3}}, // Stats changes nothing
		{"expired", func() error { p.Expire(t0.Add(time.Hour)); return nil }, t0, stats{14, 4, 0}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if diff := cmp.Diff(s.want, get(s.now)); diff != "" {
			t.Errorf("%s: Stats (-want +got):\n%s", s.name, diff)
		}
	}
}

func allocate(p *ipam.Pool, now time.Time, n int) ([]netip.Addr, error) {
	var out []netip.Addr
	for range n {
		a, err := p.Allocate(now)
		if err != nil {
			return out, err
		}
		out = append(out, a)
	}
	return out, nil
}

// TestPool_PageBoundaries crosses the 4096-address pages of the bitmap in a
// dense pool (a /18, 4 pages) and a sparse one (a /64): full pages are
// skipped, and the last usable address is handed out before wrapping.
func TestPool_PageBoundaries(t *testing.T) {
	for _, prefix := range []string{"10.0.0.0/18", "fd00::/64"} {
		t.Run(strings.NewReplacer("/", "-", ":", "").Replace(prefix), func(t *testing.T) {
			p := mustPool(t, prefix)
			// Fill the first two pages but one address in the second.
			got := allocateN(t, p, t0, 2*4096)
			hole := got[4096+17]
			if err := p.Release(hole, t0); err != nil {
				t.Fatal(err)
			}
			if err := p.SetCursor(got[0]); err != nil {
				t.Fatal(err)
			}
			if a, err := p.Allocate(t0); err != nil || a != hole {
				t.Errorf("Allocate from the start = %v, %v; want the hole %s", a, err, hole)
			}
			a, err := p.Allocate(t0)
			if err != nil || a != got[len(got)-1].Next() {
				t.Errorf("Allocate after two full pages = %v, %v; want %s", a, err, got[len(got)-1].Next())
			}
			// The last usable address, then wrap-around to a hole at the start.
			last := lastAddr(p.Prefix()).Prev()
			if err := p.SetCursor(last); err != nil {
				t.Fatal(err)
			}
			if err := p.Release(got[5], t0); err != nil {
				t.Fatal(err)
			}
			gotLast := allocateN(t, p, t0, 2)
			if diff := cmp.Diff([]netip.Addr{last, got[5]}, gotLast, addrComparer); diff != "" {
				t.Errorf("allocations at the end (-want +got):\n%s", diff)
			}
		})
	}
}

// lastAddr returns the last address of a prefix.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := range b {
		keep := min(max(p.Bits()-8*i, 0), 8)
		b[i] |= byte(0xff >> keep)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func TestPool_ExpireSorted(t *testing.T) {
	p := mustPool(t, "241.0.0.0/24")
	got := allocateN(t, p, t0, 100)
	for i := len(got) - 1; i >= 0; i -= 3 {
		if err := p.Release(got[i], t0.Add(time.Duration(i%7)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	exp := p.Expire(t0.Add(time.Hour))
	if len(exp) != 34 {
		t.Errorf("Expire returned %d addresses, want 34", len(exp))
	}
	for i := 1; i < len(exp); i++ {
		if !exp[i-1].Less(exp[i]) {
			t.Fatalf("Expire not sorted: %s before %s", exp[i-1], exp[i])
		}
	}
}
