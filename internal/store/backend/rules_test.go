package backend

import (
	"strings"
	"testing"
	"time"
)

func TestPrefixEnd(t *testing.T) {
	for prefix, want := range map[string]string{
		"a":                "b",
		"vip/":             "vip0",
		"vip/MeshService/": "vip/MeshService0",
		"a~":               "a\x7f",
		"~":                "\x7f",
		" ":                "!",
		"%":                "&",
	} {
		if got := PrefixEnd(prefix); got != want {
			t.Errorf("PrefixEnd(%q) = %q, want %q", prefix, got, want)
		}
	}
}

func TestLeaseExpiryEncoding(t *testing.T) {
	withNanos := time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.FixedZone("x", 3600))
	for _, tc := range []struct {
		in   time.Time
		want int64
	}{
		{time.Time{}, 0},
		{withNanos, withNanos.UnixNano()},
		{time.Unix(0, -1), -1},
		{time.Unix(0, 1), 1},
	} {
		got, err := EncodeExpiry(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("EncodeExpiry(%v) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
		if back := DecodeExpiry(got); !back.Equal(tc.in) || back.IsZero() != tc.in.IsZero() {
			t.Errorf("DecodeExpiry(EncodeExpiry(%v)) = %v", tc.in, back)
		}
	}
	for _, bad := range []time.Time{
		time.Unix(0, 0), // would read back as never
		time.Date(1677, 1, 1, 0, 0, 0, 0, time.UTC),   // before int64 nanoseconds
		time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC),   // after
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),      // near zero but not zero
		time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), // "forever" spelled as a date
	} {
		if n, err := EncodeExpiry(bad); err == nil {
			t.Errorf("EncodeExpiry(%v) = %d, nil; want an error", bad, n)
		}
	}
}

func TestCheckLeaseName(t *testing.T) {
	good := []string{"a", "vip/MeshService/241.0.0.7", " ~!%_", strings.Repeat("x", MaxLeaseName)}
	bad := []string{"", strings.Repeat("x", MaxLeaseName+1), "a\x00", "a\t", "a\x7f", "é", "\xff"}
	for _, n := range good {
		if err := CheckLeaseName(n); err != nil {
			t.Errorf("CheckLeaseName(%q) = %v", n, err)
		}
	}
	for _, n := range bad {
		if CheckLeaseName(n) == nil {
			t.Errorf("CheckLeaseName(%q) = nil, want an error", n)
		}
	}
}

// TestLeases_PrefixUsesPrimaryKey checks that the prefix query is a range
// scan of the primary key, not a scan of the table.
