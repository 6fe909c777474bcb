package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store/backend"
)

// The key space. Every key starts with one byte naming its table; the
// parts of a key are separated by NUL, which no name, mesh, stream or term
// may contain (backend.Check, backend.CheckRecord), so that the bytewise
// order of keys is the order of their parts.
const (
	tMeta      = 'm' // m<name> -> big-endian uint64
	tObject    = 'o' // o<kind>\0<mesh>\0<name> -> row
	tRevision  = 'r' // r<revision> -> <kind>\0<mesh>\0<name>: the change feed
	tTombstone = 'd' // d<modified><kind>\0<mesh>\0<name> -> empty: tombstones by age
	tLease     = 'l' // l<name> -> expiry, value
	tRecord    = 'a' // a<stream>\0<seq> -> record
	tTerm      = 't' // t<stream>\0<term>\0<seq> -> empty
	tTime      = 'i' // i<stream>\0<time><seq> -> empty: late records by age (frontierKey)
)

// Meta keys.
var (
	metaFormat    = []byte("mformat")    // the format of this key space
	metaRevision  = []byte("mrevision")  // the last revision given out
	metaCompacted = []byte("mcompacted") // the compaction horizon
	metaRecords   = []byte("mrecords")   // the last record sequence number
)

// format is the version of the key space and row encodings, stored at
// metaFormat when a store is created; Open refuses any other.
const format = 1

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// ordered maps an int64 to a uint64 of the same order (flips the sign
// bit), so that negative times sort before positive ones.
func ordered(v int64) uint64 { return uint64(v) ^ (1 << 63) }

// unordered is the inverse of ordered.
func unordered(u uint64) int64 { return int64(u ^ (1 << 63)) }

// objectPath is <kind>\0<mesh>\0<name>.
func objectPath(k resource.Key) []byte {
	b := make([]byte, 0, len(k.Kind)+len(k.Mesh)+len(k.Name)+2)
	b = append(b, k.Kind...)
	b = append(b, 0)
	b = append(b, k.Mesh...)
	b = append(b, 0)
	return append(b, k.Name...)
}

func parseObjectPath(b []byte) (resource.Key, error) {
	parts := strings.SplitN(string(b), "\x00", 3)
	if len(parts) != 3 {
		return resource.Key{}, fmt.Errorf("bad object key %q", b)
	}
	return resource.Key{Kind: resource.Kind(parts[0]), Mesh: parts[1], Name: parts[2]}, nil
}

func objectKey(k resource.Key) []byte { return append([]byte{tObject}, objectPath(k)...) }

// kindPrefix is the prefix of the object keys of kind k, or of every
// object when k is "".
func kindPrefix(k resource.Kind) []byte {
	if k == "" {
		return []byte{tObject}
	}
	return append(append([]byte{tObject}, k...), 0)
}

func revisionKey(rev int64) []byte { return appendRevisionKey(nil, rev) }

// The append forms of the keys and values the writer builds (into one
// buffer it reuses: a batch copies what it is given).

func appendRevisionKey(b []byte, rev int64) []byte {
	return binary.BigEndian.AppendUint64(append(b, tRevision), uint64(rev))
}

// parseRevisionKey returns the revision of a revision key.
func parseRevisionKey(k []byte) (int64, bool) {
	if len(k) != 9 || k[0] != tRevision {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(k[1:])), true
}

func tombstoneKey(modified int64, k resource.Key) []byte {
	b := append([]byte{tTombstone}, u64(ordered(modified))...)
	return append(b, objectPath(k)...)
}

func leaseKey(name string) []byte { return append([]byte{tLease}, name...) }

func recordKey(stream string, seq int64) []byte { return appendRecordKey(nil, stream, seq) }

func appendRecordKey(b []byte, stream string, seq int64) []byte {
	b = append(append(append(b, tRecord), stream...), 0)
	return binary.BigEndian.AppendUint64(b, uint64(seq))
}

func recordPrefix(stream string) []byte { return append(append([]byte{tRecord}, stream...), 0) }

func termPrefix(stream, term string) []byte {
	b := append(append([]byte{tTerm}, stream...), 0)
	return append(append(b, term...), 0)
}

func termKey(stream, term string, seq int64) []byte { return appendTermKey(nil, stream, term, seq) }

func appendTermKey(b []byte, stream, term string, seq int64) []byte {
	b = append(append(append(b, tTerm), stream...), 0)
	b = append(append(b, term...), 0)
	return binary.BigEndian.AppendUint64(b, uint64(seq))
}

// frontierKey holds the latest time of any record of stream so far
// (ordered, big-endian). A record at or after it is stored without a time
// key: such records are in time order by sequence number, and
// CompactRecords finds the old ones from the start of the stream. Only a
// record older than the frontier (a time given by its writer, a clock set
// back) is in the time index, where CompactRecords finds it wherever it
// is. A store written before the frontier existed indexed every record.
func frontierKey(stream string) []byte {
	return append(append([]byte(nil), "mfrontier\x00"...), stream...)
}

func timePrefix(stream string) []byte { return append(append([]byte{tTime}, stream...), 0) }

func timeKey(stream string, at, seq int64) []byte { return appendTimeKey(nil, stream, at, seq) }

func appendTimeKey(b []byte, stream string, at, seq int64) []byte {
	b = append(append(append(b, tTime), stream...), 0)
	b = binary.BigEndian.AppendUint64(b, ordered(at))
	return binary.BigEndian.AppendUint64(b, uint64(seq))
}

// prefixEnd is the smallest key greater than every key starting with p
// (nil when there is none: p is all 0xff).
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// row is a resource as stored (backend.Row).
type row = backend.Row

const rowDeleted = 1

// encodeRow is the value of an object key: a flags byte, then version,
// revision (uvarints), created, modified (varints), then labels and spec
// (each a uvarint length and the bytes) and the status (the rest).
func encodeRow(r *row) []byte {
	return appendRow(make([]byte, 0, 1+4*binary.MaxVarintLen64+2*binary.MaxVarintLen32+r.Size()), r)
}

func appendRow(b []byte, r *row) []byte {
	var flags byte
	if r.Deleted {
		flags |= rowDeleted
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, uint64(r.Version))
	b = binary.AppendUvarint(b, uint64(r.Revision))
	b = binary.AppendVarint(b, r.Created)
	b = binary.AppendVarint(b, r.Modified)
	b = binary.AppendUvarint(b, uint64(len(r.Labels)))
	b = append(b, r.Labels...)
	b = binary.AppendUvarint(b, uint64(len(r.Spec)))
	b = append(b, r.Spec...)
	return append(b, r.Status...)
}

var errCorrupt = errors.New("corrupt value")

// reader reads the parts of an encoded value, remembering the first
// failure.
type reader struct {
	b   []byte
	err error
}

func (d *reader) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *reader) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

// int64 reads a uvarint that must fit an int64.
func (d *reader) int64() int64 {
	v := d.uvarint()
	if v > math.MaxInt64 {
		d.err = errCorrupt
		return 0
	}
	return int64(v)
}

func (d *reader) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errCorrupt
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *reader) fixed64() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.err = errCorrupt
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

// decodeRow decodes the value of key k. The strings are copies: v may be
// reused by the database after the call.
func decodeRow(k resource.Key, v []byte) (*row, error) {
	if len(v) == 0 || v[0]&^rowDeleted != 0 {
		return nil, fmt.Errorf("decode %s: %w", k, errCorrupt)
	}
	r := &row{Key: k, Deleted: v[0]&rowDeleted != 0}
	d := reader{b: v[1:]}
	r.Version, r.Revision = d.int64(), d.int64()
	r.Created, r.Modified = d.varint(), d.varint()
	r.Labels, r.Spec = string(d.bytes()), string(d.bytes())
	if d.err != nil {
		return nil, fmt.Errorf("decode %s: %w", k, d.err)
	}
	r.Status = string(d.b)
	return r, nil
}

// encodeLease is the value of a lease key: the expiry (Unix nanoseconds, 0
// for never; 8 bytes) and the value.
func encodeLease(expires int64, value []byte) []byte {
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(value)), uint64(expires)), value...)
}

func decodeLease(name string, v []byte) (expires int64, value []byte, err error) {
	if len(v) < 8 {
		return 0, nil, fmt.Errorf("decode lease %q: %w", name, errCorrupt)
	}
	return int64(binary.BigEndian.Uint64(v)), v[8:], nil
}

// encodeRecord is the value of a record key: its time (8 bytes, Unix
// nanoseconds), the number of terms and each term (uvarint length and
// bytes), then the data.
func encodeRecord(at int64, terms []string, data []byte) []byte {
	n := 8 + binary.MaxVarintLen16 + len(data)
	for _, t := range terms {
		n += binary.MaxVarintLen16 + len(t)
	}
	return appendRecord(make([]byte, 0, n), at, terms, data)
}

func appendRecord(b []byte, at int64, terms []string, data []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(at))
	b = binary.AppendUvarint(b, uint64(len(terms)))
	for _, t := range terms {
		b = binary.AppendUvarint(b, uint64(len(t)))
		b = append(b, t...)
	}
	return append(b, data...)
}

// decodeRecord decodes a record value into a record the caller owns.
func decodeRecord(v []byte) (at time.Time, terms []string, data []byte, err error) {
	d := reader{b: v}
	ns := int64(d.fixed64())
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)) {
		d.err = errCorrupt
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		terms = append(terms, string(d.bytes()))
	}
	if d.err != nil {
		return time.Time{}, nil, nil, d.err
	}
	if len(d.b) > 0 {
		data = append([]byte(nil), d.b...)
	}
	return time.Unix(0, ns).UTC(), terms, data, nil
}
