// Package history owns the history of hostnames and VIPs: the record
// stream "history" in the store where every assignment of a hostname or
// VIP to a service, and its release or loss, is kept (by any controller,
// in any zone), and the answer to "who held this, from when to when".
//
// Controllers call Op to append an event in the same Apply as the status
// write that makes it true, depending on it (store.Op.DependsOn), so the
// history never claims what the status does not hold. Find and Holdings
// are the query side (GET /history, meshnames inspect history).
//
// It imports api, resource and store only. Its functions are pure or safe
// for concurrent use.
package history

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// Stream is the record stream of the history.
const Stream = "history"

// Term prefixes: an event can be found by its VIP, its hostname and its
// service.
const (
	TermVIP      = "vip="
	TermHostname = "hostname="
	TermService  = "service="
)

// Op returns the store operation that appends e; dependsOn names the ops
// of the same Apply that must succeed for it to be written (the status
// write that assigns or releases the value). e.Seq is ignored; a zero
// e.Time is the store's clock. It fails unless exactly one of e.Hostname
// and e.VIP is set, e.Event is one of api.HistoryAssigned,
// HistoryReleased and HistoryLost, and e.Kind and e.Name are set.
func Op(e api.HistoryEvent, dependsOn ...int) (store.Op, error) {
	e.Seq = 0
	e.Hostname, e.VIP = Hostname(e.Hostname), VIP(e.VIP)
	if err := check(e); err != nil {
		return store.Op{}, fmt.Errorf("history event of %s: %w", service(e.Kind, e.Mesh, e.Name), err)
	}
	data, _ := json.Marshal(e) // plain strings: cannot fail
	return store.Op{Type: store.OpAppendRecord, Record: &store.Record{Stream: Stream, Time: e.Time, Terms: terms(e), Data: data},
		DependsOn: dependsOn}, nil
}

func check(e api.HistoryEvent) error {
	switch {
	case (e.Hostname == "") == (e.VIP == ""):
		return fmt.Errorf("set exactly one of hostname and vip")
	case e.Event != api.HistoryAssigned && e.Event != api.HistoryReleased && e.Event != api.HistoryLost:
		return fmt.Errorf("event %q is not assigned, released or lost", e.Event)
	case e.Kind == "" || e.Name == "":
		return fmt.Errorf("kind and name are required")
	}
	return nil
}

func terms(e api.HistoryEvent) []string {
	var ts []string
	if e.VIP != "" {
		ts = append(ts, TermVIP+e.VIP)
	}
	if e.Hostname != "" {
		ts = append(ts, TermHostname+e.Hostname)
	}
	ts = append(ts, TermService+service(e.Kind, e.Mesh, e.Name))
	for i, t := range ts {
		if len(t) > store.MaxRecordTermBytes {
			ts[i] = t[:store.MaxRecordTermBytes]
		}
	}
	return ts
}

func service(k resource.Kind, mesh, name string) string {
	return string(k) + "/" + mesh + "/" + name
}

// Hostname is the form hostnames are kept and found in: lower case,
// without a trailing dot.
func Hostname(h string) string { return strings.ToLower(strings.TrimSuffix(h, ".")) }

// VIP is the form VIPs are kept and found in: the address's canonical
// text (an unparsable one is kept as given).
func VIP(ip string) string {
	if a, err := netip.ParseAddr(ip); err == nil {
		return a.Unmap().String()
	}
	return ip
}

// Query selects history events by one hostname or one VIP.
type Query struct {
	VIP, Hostname string
	Since         time.Time
	Limit         int
}

// Find returns the events of q.VIP or q.Hostname, oldest first, and
// whether there were more than q.Limit (the oldest are then left out).
func Find(ctx context.Context, rec store.Recorder, q Query) ([]api.HistoryEvent, bool, error) {
	var term string
	switch {
	case (q.VIP == "") == (q.Hostname == ""):
		return nil, false, fmt.Errorf("history: give exactly one of a VIP and a hostname")
	case q.VIP != "":
		term = TermVIP + VIP(q.VIP)
	default:
		term = TermHostname + Hostname(q.Hostname)
	}
	limit := q.Limit
	if limit <= 0 || limit > store.MaxRecordLimit-1 {
		limit = store.MaxRecordLimit - 1
	}
	// Newest first, one more than asked, to tell whether older ones were
	// left out; then oldest first for the reader.
	rs, err := rec.Records(ctx, store.RecordQuery{Stream: Stream, Terms: []string{term}, Since: q.Since, Limit: limit + 1, Descending: true})
	if err != nil {
		return nil, false, fmt.Errorf("history: %w", err)
	}
	truncated := len(rs) > limit
	if truncated {
		rs = rs[:limit]
	}
	out := make([]api.HistoryEvent, 0, len(rs))
	for i := len(rs) - 1; i >= 0; i-- {
		var e api.HistoryEvent
		if err := json.Unmarshal(rs[i].Data, &e); err != nil {
			return nil, false, fmt.Errorf("history: event %d: %w", rs[i].Seq, err)
		}
		e.Seq, e.Time = rs[i].Seq, rs[i].Time
		out = append(out, e)
	}
	return out, truncated, nil
}

// Holdings turns events (oldest first, as Find returns them) into who held
// each value from when to when, ordered by start (an open start first).
// An assignment opens a holding of the service (in its zone) and value; a
// release or loss closes it. A second assignment of an open holding
// changes nothing; a close without an assignment (which happened before
// the history kept begins) is a holding with no start.
func Holdings(events []api.HistoryEvent) []api.HistoryHolding {
	type key struct {
		zone, mesh, name, hostname, vip string
		kind                            resource.Kind
	}
	open := map[key]int{} // index in out of the open holding
	var out []api.HistoryHolding
	for _, e := range events {
		k := key{e.Zone, e.Mesh, e.Name, e.Hostname, e.VIP, e.Kind}
		i, isOpen := open[k]
		switch e.Event {
		case api.HistoryAssigned:
			if !isOpen {
				open[k] = len(out)
				out = append(out, api.HistoryHolding{Zone: e.Zone, Mesh: e.Mesh, Kind: e.Kind, Name: e.Name,
					Hostname: e.Hostname, VIP: e.VIP, From: e.Time})
			}
		case api.HistoryReleased, api.HistoryLost:
			if !isOpen {
				i = len(out)
				out = append(out, api.HistoryHolding{Zone: e.Zone, Mesh: e.Mesh, Kind: e.Kind, Name: e.Name,
					Hostname: e.Hostname, VIP: e.VIP})
			}
			out[i].Until, out[i].End, out[i].Reason = e.Time, e.Event, e.Reason
			delete(open, k)
		}
	}
	slices.SortStableFunc(out, func(a, b api.HistoryHolding) int {
		return a.From.Compare(b.From) // the zero time (an unknown start) first
	})
	if out == nil {
		out = []api.HistoryHolding{}
	}
	return out
}
