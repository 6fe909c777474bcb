package backend

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/meshnames/meshnames/internal/store"
)

// MaxLeaseName bounds store.Lease.Name, in bytes.
const MaxLeaseName = 253

// MaxStream bounds store.Record.Stream, in bytes.
const MaxStream = 63

// CheckLeaseName enforces store.Lease's name rules: 1 to 253 bytes of
// printable ASCII (space to tilde). Besides being what the contract says,
// ASCII keeps PostgreSQL text and SQLite TEXT alike, and lets PrefixEnd
// compute a range bound without carrying.
func CheckLeaseName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("name is required")
	case len(name) > MaxLeaseName:
		return fmt.Errorf("name is %d bytes, limit %d", len(name), MaxLeaseName)
	case !PrintableASCII(name):
		return fmt.Errorf("name must be printable ASCII")
	}
	return nil
}

// PrintableASCII reports whether s is only space to tilde.
func PrintableASCII(s string) bool {
	for i := range len(s) {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// EncodeExpiry turns ExpiresAt into Unix nanoseconds: 0 for the zero time
// (never). A time that nanoseconds since 1970 in an int64 cannot hold
// (before 1678 or after 2262), and the Unix epoch itself, which would read
// back as never, are refused.
func EncodeExpiry(t time.Time) (int64, error) {
	if t.IsZero() {
		return 0, nil
	}
	n := t.UnixNano()
	switch {
	case !time.Unix(0, n).Equal(t):
		return 0, fmt.Errorf("expiry %v is out of range (years 1678 to 2262)", t)
	case n == 0:
		return 0, fmt.Errorf("expiry %v is the Unix epoch, which is stored as never: use the zero time for never", t)
	}
	return n, nil
}

// DecodeExpiry is the inverse of EncodeExpiry.
func DecodeExpiry(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// PrefixEnd returns the smallest string greater than every string that
// starts with prefix, for a non-empty printable ASCII prefix: the prefix
// with its last byte incremented (at most '~'+1, so still ASCII).
func PrefixEnd(prefix string) string {
	b := []byte(prefix)
	b[len(b)-1]++
	return string(b)
}

// CheckLease enforces the rules of the lease of a put or create: its name,
// the size of its value, an expiry that can be stored. It returns the
// expiry as EncodeExpiry does. The error does not name the operation.
func CheckLease(l *store.Lease) (int64, error) {
	if err := CheckLeaseName(l.Name); err != nil {
		return 0, err
	}
	if len(l.Value) > store.MaxLeaseValueBytes {
		return 0, fmt.Errorf("value: %w (%d bytes, limit %d)", store.ErrTooLarge, len(l.Value), store.MaxLeaseValueBytes)
	}
	return EncodeExpiry(l.ExpiresAt)
}

// Dedupe returns terms without repetitions, in first-seen order.
func Dedupe(terms []string) []string {
	out := make([]string, 0, len(terms))
	for _, t := range terms {
		dup := false
		for _, o := range out {
			dup = dup || o == t
		}
		if !dup {
			out = append(out, t)
		}
	}
	return out
}

// CheckRecord enforces store.Record's rules.
func CheckRecord(r *store.Record) error {
	if err := CheckStream(r.Stream); err != nil {
		return err
	}
	if len(r.Terms) > store.MaxRecordTerms {
		return fmt.Errorf("%d terms, limit %d", len(r.Terms), store.MaxRecordTerms)
	}
	for i, t := range r.Terms {
		if err := CheckTerm(t); err != nil {
			return fmt.Errorf("terms[%d]: %w", i, err)
		}
	}
	if len(r.Data) > store.MaxRecordBytes {
		return fmt.Errorf("data: %w (%d bytes, limit %d)", store.ErrTooLarge, len(r.Data), store.MaxRecordBytes)
	}
	if !r.Time.IsZero() {
		if n := r.Time.UnixNano(); !time.Unix(0, n).Equal(r.Time) {
			return fmt.Errorf("time %v is out of range (years 1678 to 2262)", r.Time)
		}
	}
	return nil
}

// CheckStream enforces the rules of a record stream's name.
func CheckStream(s string) error {
	if s == "" || len(s) > MaxStream || strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-')
	}) {
		return fmt.Errorf("stream %q must be 1 to %d lower case letters, digits and '-'", s, MaxStream)
	}
	return nil
}

// CheckTerm enforces the rules of a record's term.
func CheckTerm(t string) error {
	switch {
	case t == "":
		return fmt.Errorf("must not be empty")
	case len(t) > store.MaxRecordTermBytes:
		return fmt.Errorf("is %d bytes, limit %d", len(t), store.MaxRecordTermBytes)
	case !utf8.ValidString(t) || strings.ContainsFunc(t, unicode.IsControl):
		return fmt.Errorf("must be UTF-8 without control characters")
	}
	return nil
}

// CheckRecordQuery enforces the rules of a store.RecordQuery (its stream
// and terms) and returns the number of records it may return.
func CheckRecordQuery(q store.RecordQuery) (limit int, err error) {
	if err := CheckStream(q.Stream); err != nil {
		return 0, err
	}
	for i, t := range q.Terms {
		if err := CheckTerm(t); err != nil {
			return 0, fmt.Errorf("terms[%d]: %w", i, err)
		}
	}
	limit = q.Limit
	if limit <= 0 {
		limit = store.DefaultRecordLimit
	}
	return min(limit, store.MaxRecordLimit), nil
}
