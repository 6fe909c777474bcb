package history_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/history"
	"github.com/meshnames/meshnames/internal/resource"
)

// stored is an event as its record's data holds it: without seq (the
// record's own) and without a zero time (the store's clock stamps the
// record); Find takes both from the record.
type stored struct {
	Time     *time.Time    `json:"time,omitempty"`
	Zone     string        `json:"zone,omitempty"`
	Mesh     string        `json:"mesh"`
	Kind     resource.Kind `json:"kind"`
	Name     string        `json:"name"`
	Hostname string        `json:"hostname,omitempty"`
	VIP      string        `json:"vip,omitempty"`
	Event    string        `json:"event"`
	Reason   string        `json:"reason,omitempty"`
}

// storedPart is an event of a record of one service's events: without
// the service, which the record names once (storedService).
type storedPart struct {
	Time     *time.Time `json:"time,omitempty"`
	Hostname string     `json:"hostname,omitempty"`
	VIP      string     `json:"vip,omitempty"`
	Event    string     `json:"event"`
	Reason   string     `json:"reason,omitempty"`
}

type storedService struct {
	Zone   string        `json:"zone,omitempty"`
	Mesh   string        `json:"mesh"`
	Kind   resource.Kind `json:"kind"`
	Name   string        `json:"name"`
	Events []storedPart  `json:"events"`
}

// oneService is events, all of one service, as Ops stores them.
func oneService(events []api.HistoryEvent) storedService {
	s := storedService{Zone: events[0].Zone, Mesh: events[0].Mesh, Kind: events[0].Kind, Name: events[0].Name}
	for _, e := range events {
		n := normalized(e)
		s.Events = append(s.Events, storedPart{Time: n.Time, Hostname: n.Hostname, VIP: n.VIP, Event: n.Event, Reason: n.Reason})
	}
	return s
}

// decoded is what Find reads back of events as Ops stored them: seq
// zero (Find sets the record's), names normalized, strings as JSON
// carries them (invalid UTF-8 replaced).
func decoded(events []api.HistoryEvent) []api.HistoryEvent {
	out := make([]api.HistoryEvent, len(events))
	for i, e := range events {
		e.Seq = 0
		e.Hostname, e.VIP = history.Hostname(e.Hostname), history.VIP(e.VIP)
		b, err := json.Marshal(e)
		if err != nil {
			panic(err)
		}
		if err := json.Unmarshal(b, &out[i]); err != nil {
			panic(err)
		}
	}
	return out
}

// normalized is e as Op stores it.
func normalized(e api.HistoryEvent) stored {
	s := stored{Zone: e.Zone, Mesh: e.Mesh, Kind: e.Kind, Name: e.Name,
		Hostname: history.Hostname(e.Hostname), VIP: history.VIP(e.VIP), Event: e.Event, Reason: e.Reason}
	if !e.Time.IsZero() {
		s.Time = &e.Time
	}
	return s
}

// Op and Ops store exactly what json.Marshal writes for the events as
// records hold them.
func TestAppendEvent_IsWhatJSONMarshalWrites(t *testing.T) {
	at := time.Date(2026, 11, 29, 1, 2, 3, 456789, time.FixedZone("x", 3600))
	events := []api.HistoryEvent{
		{Seq: 7, Time: at, Zone: "east", Mesh: "default", Kind: resource.MeshService, Name: "redis", Hostname: "Redis.svc.mesh.local.", Event: api.HistoryAssigned},
		{Time: at.UTC(), Mesh: "default", Kind: resource.MeshService, Name: "redis", VIP: "241.0.0.1", Event: api.HistoryReleased, Reason: "deleted"},
		{Mesh: "m<&>", Kind: resource.MeshExternalService, Name: "a\"b\\c\u2028", VIP: "fd00::1", Event: api.HistoryLost, Reason: "\x01\xff é"},
	}
	for _, e := range events {
		op, err := history.Op(e)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(normalized(e))
		if !bytes.Equal(op.Record.Data, want) {
			t.Errorf("Op data\n%s\nwant\n%s", op.Record.Data, want)
		}
	}
	op, ok, err := history.Ops(append([]api.HistoryEvent(nil), events...))
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	all := make([]stored, len(events))
	for i, e := range events {
		all[i] = normalized(e)
	}
	if want, _ := json.Marshal(all); !bytes.Equal(op.Record.Data, want) {
		t.Errorf("Ops data\n%s\nwant\n%s", op.Record.Data, want)
	}
	// Events of one service name it once.
	redis := []api.HistoryEvent{events[0], events[0], events[0]}
	redis[1].Hostname, redis[1].Time, redis[1].Event = "", time.Time{}, api.HistoryAssigned
	redis[1].VIP = "241.0.0.1"
	redis[2].Reason = "renamed"
	want, _ := json.Marshal(oneService(redis))
	op, ok, err = history.Ops(append([]api.HistoryEvent(nil), redis...))
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if !bytes.Equal(op.Record.Data, want) {
		t.Errorf("Ops data of one service\n%s\nwant\n%s", op.Record.Data, want)
	}
	// Each form reads back as the events it was written from.
	for _, evs := range [][]api.HistoryEvent{events[:1], events, redis} {
		op, _, err := history.Ops(append([]api.HistoryEvent(nil), evs...))
		if err != nil {
			t.Fatal(err)
		}
		got, err := history.Decode(op.Record.Data)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(decoded(evs), got, cmpopts.EquateApproxTime(0)); diff != "" {
			t.Errorf("decode(%s) (-want +got):\n%s", op.Record.Data, diff)
		}
	}
}

// FuzzOp holds the history record's encoding to json.Marshal's of the
// stored form.
func FuzzOp(f *testing.F) {
	f.Add("east", "default", "redis", "redis.svc.mesh.local", "", int64(0))
	f.Add("", "m<>", "a\u2028", "", "\xff\"", int64(1_800_000_000_123_456_789))
	f.Fuzz(func(t *testing.T, zone, mesh, name, host, reason string, nanos int64) {
		e := api.HistoryEvent{Time: time.Unix(0, nanos), Zone: zone, Mesh: mesh, Kind: resource.MeshService, Name: name,
			Hostname: host, Event: api.HistoryAssigned, Reason: reason}
		if host == "" {
			e.VIP = "241.0.0.9"
		}
		op, err := history.Op(e)
		if err != nil {
			return // refused (no name): nothing encoded
		}
		want, err := json.Marshal(normalized(e))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(op.Record.Data, want) {
			t.Fatalf("Op data\n%s\nwant\n%s", op.Record.Data, want)
		}
		// The same service losing it, in one record: named once.
		lost := e
		lost.Time, lost.Event = time.Time{}, api.HistoryLost
		both := []api.HistoryEvent{e, lost}
		ops, _, err := history.Ops(append([]api.HistoryEvent(nil), both...))
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := json.Marshal(oneService(both)); !bytes.Equal(ops.Record.Data, want) {
			t.Fatalf("Ops data\n%s\nwant\n%s", ops.Record.Data, want)
		}
		for _, rec := range []struct {
			data []byte
			want []api.HistoryEvent
		}{{op.Record.Data, both[:1]}, {ops.Record.Data, both}} {
			got, err := history.Decode(rec.data)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(decoded(rec.want), got, cmpopts.EquateApproxTime(0)); diff != "" {
				t.Fatalf("decode(%s) (-want +got):\n%s", rec.data, diff)
			}
		}
	})
}

// FuzzDecode reads records' data of every form, and whatever else a
// store may hold: no input panics, and what it reads, Ops writes again
// and decode reads back the same.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"zone":"east","mesh":"default","kind":"MeshService","name":"redis","vip":"241.0.0.5","event":"assigned"}`))
	f.Add([]byte(`{"mesh":"default","kind":"MeshService","name":"redis","events":[{"hostname":"redis.svc.mesh.local","event":"assigned"},{"time":"2026-11-29T01:02:03Z","vip":"241.0.0.5","event":"lost"}]}`))
	f.Add([]byte(`[{"seq":0,"time":"0001-01-01T00:00:00Z","mesh":"m","kind":"MeshService","name":"a","vip":"241.0.0.5","event":"assigned"},{"mesh":"m","kind":"MeshService","name":"b","hostname":"b.mesh","event":"released","reason":"deleted"}]`))
	f.Add([]byte(`{"events":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		events, err := history.Decode(data)
		if err != nil || len(events) == 0 {
			return
		}
		for i := range events {
			events[i].Seq = 0
		}
		op, ok, err := history.Ops(append([]api.HistoryEvent(nil), events...))
		if err != nil || !ok {
			return // not events Ops takes (an unknown event, no name)
		}
		again, err := history.Decode(op.Record.Data)
		if err != nil {
			t.Fatalf("decode(%s) of what Ops wrote: %v", op.Record.Data, err)
		}
		if diff := cmp.Diff(decoded(events), again, cmpopts.EquateApproxTime(0)); diff != "" {
			t.Fatalf("decode(%s) (-want +got):\n%s", op.Record.Data, diff)
		}
	})
}
