package history_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/history"
	"github.com/meshnames/meshnames/internal/resource"
)

// normalized is e as Op stores it.
func normalized(e api.HistoryEvent) api.HistoryEvent {
	e.Seq = 0
	e.Hostname, e.VIP = history.Hostname(e.Hostname), history.VIP(e.VIP)
	return e
}

// Op and Ops store exactly what json.Marshal writes for the events.
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
	all := make([]api.HistoryEvent, len(events))
	for i, e := range events {
		all[i] = normalized(e)
	}
	if want, _ := json.Marshal(all); !bytes.Equal(op.Record.Data, want) {
		t.Errorf("Ops data\n%s\nwant\n%s", op.Record.Data, want)
	}
}

// FuzzOp holds the history record's encoding to json.Marshal's.
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
	})
}
