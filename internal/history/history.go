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

// Term prefixes: an event is found by its VIP or its hostname (Find).
// Records of an older format also carry "service=" terms, which nothing
// asks for; they are read like the others.
const (
	TermVIP      = "vip="
	TermHostname = "hostname="
)

// Op returns the store operation that appends e; dependsOn names the ops
// of the same Apply that must succeed for it to be written (the status
// write that assigns or releases the value). e.Seq is ignored; a zero
// e.Time is the store's clock. It fails unless exactly one of e.Hostname
// and e.VIP is set, e.Event is one of api.HistoryAssigned,
// HistoryReleased and HistoryLost, and e.Kind and e.Name are set.
func Op(e api.HistoryEvent, dependsOn ...int) (store.Op, error) {
	op, _, err := Ops([]api.HistoryEvent{e}, dependsOn...)
	return op, err
}

// Ops returns the store operation that appends events, which one write
// makes true, as one record: its data the events, its terms those of
// every event. One record rather than one per event keeps what a write
// costs the store's single writer small (a new service is assigned a
// hostname and a VIP at once). It returns no operation for no events. The
// events are normalized in place.
//
// The data is JSON (decode reads it): one event alone as an object, as Op
// stores it; several events of one service (nearly every record: a
// status write's) as that service's zone, mesh, kind and name once and
// its events without them ("events"); events of several services as an
// array. An event's seq is never stored and its time only when it is not
// the store's clock: the record carries both, and Find takes them from
// it (records written with them, before, read the same).
func Ops(events []api.HistoryEvent, dependsOn ...int) (store.Op, bool, error) {
	if len(events) == 0 {
		return store.Op{}, false, nil
	}
	ts := make([]string, 0, len(events))
	var at time.Time
	oneService := true
	for i := range events {
		e := &events[i]
		e.Seq = 0
		e.Hostname, e.VIP = Hostname(e.Hostname), VIP(e.VIP)
		if err := check(*e); err != nil {
			return store.Op{}, false, fmt.Errorf("history event of %s: %w", service(e.Kind, e.Mesh, e.Name), err)
		}
		oneService = oneService && e.Zone == events[0].Zone && e.Mesh == events[0].Mesh && e.Kind == events[0].Kind && e.Name == events[0].Name
		if e.VIP != "" {
			ts = addTerm(ts, term(TermVIP+e.VIP))
		}
		if e.Hostname != "" {
			ts = addTerm(ts, term(TermHostname+e.Hostname))
		}
		at = e.Time
	}
	data := make([]byte, 0, 128+96*len(events))
	var err error
	switch {
	case len(events) == 1:
		data, err = appendEvent(data, &events[0], true)
	case oneService:
		data = appendService(append(data, '{'), &events[0])
		data = append(data, `,"events":[`...)
		for i := range events {
			if i > 0 {
				data = append(data, ',')
			}
			if data, err = appendEvent(data, &events[i], false); err != nil {
				break
			}
		}
		data = append(data, "]}"...)
	default:
		data = append(data, '[')
		for i := range events {
			if i > 0 {
				data = append(data, ',')
			}
			if data, err = appendEvent(data, &events[i], true); err != nil {
				break
			}
		}
		data = append(data, ']')
	}
	if err != nil {
		return store.Op{}, false, fmt.Errorf("history event of %s: %w", service(events[0].Kind, events[0].Mesh, events[0].Name), err)
	}
	if len(ts) > store.MaxRecordTerms {
		ts = ts[:store.MaxRecordTerms]
	}
	return store.Op{Type: store.OpAppendRecord, Record: &store.Record{Stream: Stream, Time: at, Terms: ts, Data: data},
		DependsOn: dependsOn}, true, nil
}

// appendEvent appends e as its record stores it: what json.Marshal
// writes for e (TestAppendEvent_IsWhatJSONMarshalWrites) without its
// reflection (a new service's history record was a twentieth of what a
// zone spent storing the services it received), without seq and a zero
// time (see Ops), and without its service (zone, mesh, kind and name)
// unless withService. Both forms drop 38 bytes an event, and a service's
// record of two events 75 more, of the 1,300 bytes a zone stores for each
// service it receives. It fails only for a time json.Marshal refuses (a
// year outside 0-9999).
func appendEvent(b []byte, e *api.HistoryEvent, withService bool) ([]byte, error) {
	// Every field is written after a comma; the first comma becomes the
	// object's brace.
	open := len(b)
	if !e.Time.IsZero() {
		t, err := e.Time.MarshalJSON()
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"time":`...), t...)
	}
	if withService {
		b = appendService(append(b, ','), e)
	}
	if e.Hostname != "" {
		b = resource.AppendJSONString(append(b, `,"hostname":`...), e.Hostname)
	}
	if e.VIP != "" {
		b = resource.AppendJSONString(append(b, `,"vip":`...), e.VIP)
	}
	b = resource.AppendJSONString(append(b, `,"event":`...), e.Event)
	if e.Reason != "" {
		b = resource.AppendJSONString(append(b, `,"reason":`...), e.Reason)
	}
	b[open] = '{'
	return append(b, '}'), nil
}

// appendService appends the fields naming e's service, zone (when set),
// mesh, kind and name, without braces.
func appendService(b []byte, e *api.HistoryEvent) []byte {
	if e.Zone != "" {
		b = resource.AppendJSONString(append(b, `"zone":`...), e.Zone)
		b = append(b, ',')
	}
	b = resource.AppendJSONString(append(b, `"mesh":`...), e.Mesh)
	b = resource.AppendJSONString(append(b, `,"kind":`...), string(e.Kind))
	return resource.AppendJSONString(append(b, `,"name":`...), e.Name)
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

// term is t cut to what the store keeps of a term.
func term(t string) string {
	if len(t) > store.MaxRecordTermBytes {
		return t[:store.MaxRecordTermBytes]
	}
	return t
}

// addTerm appends t to ts unless ts has it.
func addTerm(ts []string, t string) []string {
	if slices.Contains(ts, t) {
		return ts
	}
	return append(ts, t)
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
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	var buf [64]byte
	if canon := a.Unmap().AppendTo(buf[:0]); string(canon) != ip {
		return string(canon)
	}
	return ip // canonical already: no copy
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
		events, err := decode(rs[i].Data)
		if err != nil {
			return nil, false, fmt.Errorf("history: event %d: %w", rs[i].Seq, err)
		}
		for _, e := range events {
			// A record of several events (Ops) holds those of other values.
			if q.VIP != "" && e.VIP != VIP(q.VIP) || q.Hostname != "" && e.Hostname != Hostname(q.Hostname) {
				continue
			}
			e.Seq, e.Time = rs[i].Seq, rs[i].Time
			out = append(out, e)
		}
	}
	return out, truncated, nil
}

// decode reads a record's data (Ops): one event, the events of one
// service, or an array of events.
func decode(data []byte) ([]api.HistoryEvent, error) {
	if len(data) > 0 && data[0] == '[' {
		var es []api.HistoryEvent
		err := json.Unmarshal(data, &es)
		return es, err
	}
	var r struct {
		api.HistoryEvent
		Events []api.HistoryEvent `json:"events"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, err
	}
	if r.Events == nil {
		return []api.HistoryEvent{r.HistoryEvent}, nil
	}
	for i := range r.Events {
		e := &r.Events[i]
		e.Zone, e.Mesh, e.Kind, e.Name = r.Zone, r.Mesh, r.Kind, r.Name
	}
	return r.Events, nil
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

// Diff returns the events of a status write that replaces before (nil for
// a service that had none) with after, for the service key in zone: a
// hostname that becomes Available is assigned; one that was Available and
// is now NotAvailable is lost, with the reason; one that goes from the
// status is released; a VIP that appears is assigned, one that goes is
// released. Only the parts after holds are compared: a write of some
// parts of a status says nothing of the others.
func Diff(zone string, key resource.Key, before, after resource.Status, owned store.StatusPatch) []api.HistoryEvent {
	svc := func(st resource.Status) *resource.ServiceStatus {
		if s, ok := st.(resource.ServiceStatusOf); ok && s != nil {
			return s.Service()
		}
		return &resource.ServiceStatus{}
	}
	b, a := svc(before), svc(after)
	// The lists are short (a hostname per generator, a VIP or two):
	// searching them costs less than indexing them in maps, and out is
	// allocated once, for as many events as the new status has entries
	// (a new service gains a hostname and a VIP at once).
	var out []api.HistoryEvent
	add := func(host, vip, event, reason string) {
		if out == nil {
			out = make([]api.HistoryEvent, 0, max(2, len(a.Addresses)+len(a.VIPs)))
		}
		out = append(out, api.HistoryEvent{Zone: zone, Mesh: key.Mesh, Kind: key.Kind, Name: key.Name, Hostname: host, VIP: vip, Event: event, Reason: reason})
	}
	if slices.Contains(owned.Fields, "addresses") {
		// last returns the last of list with hostname h.
		last := func(list []resource.Address, h string) (resource.Address, bool) {
			for i := len(list) - 1; i >= 0; i-- {
				if Hostname(list[i].Hostname) == h {
					return list[i], true
				}
			}
			return resource.Address{}, false
		}
		held := func(list []resource.Address, h string) bool {
			return slices.ContainsFunc(list, func(a resource.Address) bool {
				return a.Status == resource.AddressAvailable && Hostname(a.Hostname) == h
			})
		}
		for _, addr := range a.Addresses {
			h := Hostname(addr.Hostname)
			if addr.Status == resource.AddressAvailable && h != "" && !held(b.Addresses, h) {
				add(h, "", api.HistoryAssigned, "")
			}
		}
		for _, addr := range b.Addresses {
			h := Hostname(addr.Hostname)
			if addr.Status != resource.AddressAvailable || h == "" {
				continue
			}
			switch cur, ok := last(a.Addresses, h); {
			case !ok:
				add(h, "", api.HistoryReleased, "no longer generated for the service")
			case cur.Status != resource.AddressAvailable:
				add(h, "", api.HistoryLost, cur.Reason)
			}
		}
	}
	if slices.Contains(owned.Fields, "vips") {
		holds := func(list []resource.VIP, ip string) bool {
			return slices.ContainsFunc(list, func(v resource.VIP) bool { return VIP(v.IP) == ip })
		}
		for _, v := range a.VIPs {
			if ip := VIP(v.IP); !holds(b.VIPs, ip) {
				add("", ip, api.HistoryAssigned, forValue(v.Hostname))
			}
		}
		for _, v := range b.VIPs {
			if ip := VIP(v.IP); !holds(a.VIPs, ip) {
				add("", ip, api.HistoryReleased, "no longer needed by the service")
			}
		}
	}
	return out
}

// forValue says which InternalVIP value a VIP is for, if any.
func forValue(host string) string {
	if host == "" {
		return ""
	}
	return "for the InternalVIP value " + Hostname(host)
}

// Deleted returns the event of a deleted service giving up a hostname
// (host set) or a VIP (ip set).
func Deleted(zone string, key resource.Key, host, ip string) api.HistoryEvent {
	return api.HistoryEvent{Zone: zone, Mesh: key.Mesh, Kind: key.Kind, Name: key.Name, Hostname: host, VIP: ip,
		Event: api.HistoryReleased, Reason: "the service was deleted"}
}
