package history_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/history"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlite"
)

var t0 = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

func at(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }

func ev(m int, name, event string) api.HistoryEvent {
	return api.HistoryEvent{Time: at(m), Zone: "east", Mesh: "default", Kind: resource.MeshService, Name: name, VIP: "241.0.0.7", Event: event}
}

func TestHoldings(t *testing.T) {
	hold := func(name string, from, until int, end string) api.HistoryHolding {
		h := api.HistoryHolding{Zone: "east", Mesh: "default", Kind: resource.MeshService, Name: name, VIP: "241.0.0.7", End: end}
		if from >= 0 {
			h.From = at(from)
		}
		if until >= 0 {
			h.Until = at(until)
		}
		return h
	}
	lostTo := func(h api.HistoryHolding) api.HistoryHolding { h.Reason = "collision"; return h }
	tests := []struct {
		name   string
		events []api.HistoryEvent
		want   []api.HistoryHolding
	}{
		{"None", nil, []api.HistoryHolding{}},
		{"HeldStill", []api.HistoryEvent{ev(1, "redis", api.HistoryAssigned)}, []api.HistoryHolding{hold("redis", 1, -1, "")}},
		{"OneAfterAnother", []api.HistoryEvent{
			ev(1, "redis", api.HistoryAssigned), ev(5, "redis", api.HistoryReleased), ev(8, "web", api.HistoryAssigned),
		}, []api.HistoryHolding{hold("redis", 1, 5, api.HistoryReleased), hold("web", 8, -1, "")}},
		{"ReassignedToTheSameService", []api.HistoryEvent{
			ev(1, "redis", api.HistoryAssigned), ev(2, "redis", api.HistoryReleased), ev(3, "redis", api.HistoryAssigned),
		}, []api.HistoryHolding{hold("redis", 1, 2, api.HistoryReleased), hold("redis", 3, -1, "")}},
		{"DuplicateAssignment", []api.HistoryEvent{ev(1, "redis", api.HistoryAssigned), ev(2, "redis", api.HistoryAssigned)},
			[]api.HistoryHolding{hold("redis", 1, -1, "")}},
		{"ReleaseBeforeTheHistoryKept", []api.HistoryEvent{ev(4, "old", api.HistoryReleased), ev(6, "redis", api.HistoryAssigned)},
			[]api.HistoryHolding{hold("old", -1, 4, api.HistoryReleased), hold("redis", 6, -1, "")}},
		{"Lost", []api.HistoryEvent{
			ev(1, "a", api.HistoryAssigned),
			func() api.HistoryEvent { e := ev(2, "a", api.HistoryLost); e.Reason = "collision"; return e }(),
			ev(2, "b", api.HistoryAssigned),
		}, []api.HistoryHolding{lostTo(hold("a", 1, 2, api.HistoryLost)), hold("b", 2, -1, "")}},
		{"ZonesAreApart", []api.HistoryEvent{
			ev(1, "redis", api.HistoryAssigned),
			func() api.HistoryEvent { e := ev(2, "redis", api.HistoryReleased); e.Zone = "west"; return e }(),
		}, []api.HistoryHolding{
			func() api.HistoryHolding { h := hold("redis", -1, 2, api.HistoryReleased); h.Zone = "west"; return h }(),
			hold("redis", 1, -1, ""),
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, history.Holdings(tc.events)); diff != "" {
				t.Errorf("Holdings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOp_RefusesIncompleteEvents(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(e *api.HistoryEvent)
		want string
	}{
		{"NeitherHostnameNorVIP", func(e *api.HistoryEvent) { e.VIP = "" }, "exactly one"},
		{"Both", func(e *api.HistoryEvent) { e.Hostname = "redis.mesh" }, "exactly one"},
		{"UnknownEvent", func(e *api.HistoryEvent) { e.Event = "moved" }, `"moved"`},
		{"NoName", func(e *api.HistoryEvent) { e.Name = "" }, "name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := ev(1, "redis", api.HistoryAssigned)
			tc.mut(&e)
			if _, err := history.Op(e); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Op = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestFind_WhoHeldThis writes events beside status writes through the
// store, as controllers do, and asks who held a VIP and a hostname.
func TestFind_WhoHeldThis(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	mesh := &resource.Object{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}}
	if _, err := store.Create(ctx, st, mesh); err != nil {
		t.Fatal(err)
	}
	write := func(e api.HistoryEvent, withFailingWrite bool) {
		t.Helper()
		op, err := history.Op(e, 0)
		if err != nil {
			t.Fatal(err)
		}
		first := store.Op{Type: store.OpPutLease, Lease: &store.Lease{Name: "status-write"}}
		if withFailingWrite {
			first = store.Op{Type: store.OpDelete, Key: resource.Key{Kind: resource.Mesh, Name: "no-such-mesh"}}
		}
		if _, err := st.Apply(ctx, first, op); err != nil {
			t.Fatal(err)
		}
	}
	write(ev(1, "redis", api.HistoryAssigned), false)
	write(ev(3, "ghost", api.HistoryAssigned), true) // its status write failed: no event
	write(ev(5, "redis", api.HistoryReleased), false)
	write(ev(9, "web", api.HistoryAssigned), false)
	host := api.HistoryEvent{Time: at(2), Mesh: "default", Kind: resource.MeshService, Name: "redis", Hostname: "Redis.SVC.mesh.local.", Event: api.HistoryAssigned}
	write(host, false)

	events, truncated, err := history.Find(ctx, st, history.Query{VIP: "241.0.0.7"})
	if err != nil || truncated {
		t.Fatalf("Find = %v, truncated %v", err, truncated)
	}
	var names []string
	for _, e := range events {
		names = append(names, e.Name+" "+e.Event)
	}
	if diff := cmp.Diff([]string{"redis assigned", "redis released", "web assigned"}, names); diff != "" {
		t.Errorf("events of 241.0.0.7 (-want +got):\n%s", diff)
	}
	hs := history.Holdings(events)
	if len(hs) != 2 || hs[0].Name != "redis" || !hs[0].From.Equal(at(1)) || !hs[0].Until.Equal(at(5)) || hs[1].Name != "web" || !hs[1].Until.IsZero() {
		t.Errorf("Holdings = %+v", hs)
	}
	// Hostnames are found whatever their case and trailing dot.
	events, _, err = history.Find(ctx, st, history.Query{Hostname: "redis.svc.MESH.local"})
	if err != nil || len(events) != 1 || events[0].Hostname != "redis.svc.mesh.local" {
		t.Errorf("Find(hostname) = %+v, %v", events, err)
	}
	// A limit keeps the newest events and says so.
	events, truncated, err = history.Find(ctx, st, history.Query{VIP: "241.0.0.7", Limit: 2})
	if err != nil || !truncated || len(events) != 2 || events[0].Event != api.HistoryReleased {
		t.Errorf("Find(limit 2) = %+v, truncated %v, %v; want the newest two", events, truncated, err)
	}
	if _, _, err := history.Find(ctx, st, history.Query{}); err == nil {
		t.Error("Find without a VIP or hostname succeeded")
	}
}

func TestDiff(t *testing.T) {
	k := resource.Key{Kind: resource.MeshService, Mesh: "m", Name: "web"}
	st := func(vips []resource.VIP, addrs ...resource.Address) resource.Status {
		return &resource.ServiceStatus{Addresses: addrs, VIPs: vips}
	}
	avail := func(h string) resource.Address {
		return resource.Address{Hostname: h, Status: resource.AddressAvailable}
	}
	taken := func(h string) resource.Address {
		return resource.Address{Hostname: h, Status: resource.AddressNotAvailable, Reason: "taken by x"}
	}
	vip := func(ip, host string) resource.VIP {
		return resource.VIP{IP: ip, Type: resource.VIPKuma, Hostname: host}
	}
	both := store.StatusPatch{Fields: []string{"addresses", "vips"}}
	type ev struct{ host, vip, event, reason string }
	for _, tc := range []struct {
		name          string
		before, after resource.Status
		owned         store.StatusPatch
		want          []ev
	}{
		{"FirstNaming", nil, st([]resource.VIP{vip("241.0.0.1", "")}, avail("web.mesh.local")), both,
			[]ev{{host: "web.mesh.local", event: "assigned"}, {vip: "241.0.0.1", event: "assigned"}}},
		{"Unchanged", st([]resource.VIP{vip("241.0.0.1", "")}, avail("a")), st([]resource.VIP{vip("241.0.0.1", "")}, avail("a")), both, nil},
		{"LostToAnother", st(nil, avail("a")), st(nil, taken("a")), both, []ev{{host: "a", event: "lost", reason: "taken by x"}}},
		{"GainedBack", st(nil, taken("a")), st(nil, avail("a")), both, []ev{{host: "a", event: "assigned"}}},
		{"NoLongerGenerated", st(nil, avail("a"), avail("b")), st(nil, avail("b")), both,
			[]ev{{host: "a", event: "released", reason: "no longer generated for the service"}}},
		{"InternalVIPRemoved", st([]resource.VIP{vip("242.0.0.1", ""), vip("242.0.0.2", "db.ext")}), st([]resource.VIP{vip("242.0.0.1", "")}), both,
			[]ev{{vip: "242.0.0.2", event: "released", reason: "no longer needed by the service"}}},
		{"InternalVIPAssigned", st(nil), st([]resource.VIP{vip("242.0.0.2", "DB.ext")}), both,
			[]ev{{vip: "242.0.0.2", event: "assigned", reason: "for the InternalVIP value db.ext"}}},
		// A write of the VIPs only says nothing of the addresses.
		{"OnlyOwnedParts", st(nil, avail("a")), st([]resource.VIP{vip("241.0.0.1", "")}), store.StatusPatch{Fields: []string{"vips"}},
			[]ev{{vip: "241.0.0.1", event: "assigned"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []ev
			for _, e := range history.Diff("east", k, tc.before, tc.after, tc.owned) {
				if e.Zone != "east" || e.Kind != k.Kind || e.Mesh != k.Mesh || e.Name != k.Name {
					t.Errorf("event %+v of the wrong service", e)
				}
				if _, err := history.Op(e); err != nil {
					t.Errorf("event %+v cannot be recorded: %v", e, err)
				}
				got = append(got, ev{e.Hostname, e.VIP, e.Event, e.Reason})
			}
			if d := cmp.Diff(tc.want, got, cmp.AllowUnexported(ev{})); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
		})
	}
}

// Ops writes the events of one write as one record; Find by a VIP or a
// hostname returns only the events of that value.
func TestOps_OneRecordPerWrite(t *testing.T) {
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	host := api.HistoryEvent{Zone: "east", Mesh: "default", Kind: resource.MeshService, Name: "redis", Hostname: "Redis.svc.mesh.local.", Event: api.HistoryAssigned}
	vip := api.HistoryEvent{Zone: "east", Mesh: "default", Kind: resource.MeshService, Name: "redis", VIP: "241.0.0.9", Event: api.HistoryAssigned}
	if _, ok, err := history.Ops(nil); ok || err != nil {
		t.Errorf("Ops of no events = %v, %v; want nothing", ok, err)
	}
	if _, _, err := history.Ops([]api.HistoryEvent{host, {Kind: resource.MeshService}}); err == nil {
		t.Error("Ops with an incomplete event: no error")
	}
	op, ok, err := history.Ops([]api.HistoryEvent{host, vip})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	rs, err := st.Apply(ctx, op)
	if err != nil || rs[0].Err != nil {
		t.Fatal(err, rs)
	}
	recs, err := st.Records(ctx, store.RecordQuery{Stream: history.Stream, Limit: 10})
	if err != nil || len(recs) != 1 {
		t.Fatalf("records %d, %v; want one for both events", len(recs), err)
	}
	// The terms Find asks by, and no other: a term is a key in the
	// store for every record.
	if diff := cmp.Diff([]string{"hostname=redis.svc.mesh.local", "vip=241.0.0.9"}, recs[0].Terms); diff != "" {
		t.Errorf("the record's terms (-want +got):\n%s", diff)
	}
	for _, q := range []struct {
		query history.Query
		want  string
	}{
		{history.Query{VIP: "241.0.0.9"}, "vip 241.0.0.9"},
		{history.Query{Hostname: "redis.svc.mesh.local"}, "hostname redis.svc.mesh.local"},
	} {
		got, _, err := history.Find(ctx, st, q.query)
		if err != nil || len(got) != 1 {
			t.Fatalf("Find %+v = %+v, %v; want one event", q.query, got, err)
		}
		what := "vip " + got[0].VIP
		if got[0].Hostname != "" {
			what = "hostname " + got[0].Hostname
		}
		if what != q.want || got[0].Seq != recs[0].Seq {
			t.Errorf("Find %+v = %+v, want the %s of record %d", q.query, got[0], q.want, recs[0].Seq)
		}
	}
}

// BenchmarkDiff_NewService is the diff of a first naming: a hostname and
// a VIP over no status (once per service at a first start).
func BenchmarkDiff_NewService(b *testing.B) {
	key := resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "redis"}
	after := &resource.ServiceStatus{
		Addresses: []resource.Address{{Hostname: "redis.svc.mesh.local", Status: resource.AddressAvailable}},
		VIPs:      []resource.VIP{{IP: "241.0.0.1", Type: resource.VIPKuma}},
	}
	owned := store.StatusPatch{Fields: []string{"addresses", "vips"}}
	b.ReportAllocs()
	for b.Loop() {
		if evs := history.Diff("", key, nil, after, owned); len(evs) != 2 {
			b.Fatalf("%d events, want 2", len(evs))
		}
	}
}

// BenchmarkOps_NewService is the record a controller writes for a first
// naming, from its diff: one record of two events (once per service at a
// first start, and for every service a zone receives).
func BenchmarkOps_NewService(b *testing.B) {
	key := resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "redis-5c8f2a7d9e1b3c4d"}
	after := &resource.ServiceStatus{
		Addresses: []resource.Address{{Hostname: "redis.svc.east.mesh.local", Status: resource.AddressAvailable}},
		VIPs:      []resource.VIP{{IP: "241.0.12.7", Type: resource.VIPKuma}},
	}
	owned := store.StatusPatch{Fields: []string{"addresses", "vips"}}
	b.ReportAllocs()
	var op store.Op
	for b.Loop() {
		var ok bool
		var err error
		if op, ok, err = history.Ops(history.Diff("west", key, nil, after, owned)); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
	b.ReportMetric(float64(len(op.Record.Data)), "data-bytes")
}

// Records written before events dropped their seq and zero time (the
// record carries both) read as they did: Find takes seq and time from the
// record either way.
func TestFind_ReadsEventsWithSeqAndTime(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	older := `[{"seq":0,"time":"0001-01-01T00:00:00Z","zone":"east","mesh":"default","kind":"MeshService","name":"redis","hostname":"redis.svc.mesh.local","event":"assigned"},` +
		`{"seq":0,"time":"0001-01-01T00:00:00Z","zone":"east","mesh":"default","kind":"MeshService","name":"redis","vip":"241.0.0.5","event":"assigned"}]`
	rs, err := st.Apply(ctx, store.Op{Type: store.OpAppendRecord, Record: &store.Record{Stream: history.Stream, Time: at(1),
		Terms: []string{history.TermVIP + "241.0.0.5", history.TermHostname + "redis.svc.mesh.local"}, Data: []byte(older)}})
	if err != nil || rs[0].Err != nil {
		t.Fatal(err, rs)
	}
	op, ok, err := history.Ops([]api.HistoryEvent{
		{Zone: "east", Mesh: "default", Kind: resource.MeshService, Name: "redis", VIP: "241.0.0.5", Event: api.HistoryReleased, Reason: "deleted"},
		{Zone: "east", Mesh: "default", Kind: resource.MeshService, Name: "redis", Hostname: "redis.svc.mesh.local", Event: api.HistoryReleased, Reason: "deleted"},
	})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if strings.Contains(string(op.Record.Data), `"seq"`) || strings.Contains(string(op.Record.Data), `"time"`) {
		t.Errorf("a new record's events hold seq or a zero time: %s", op.Record.Data)
	}
	op.Record.Time = at(2)
	if rs, err := st.Apply(ctx, op); err != nil || rs[0].Err != nil {
		t.Fatal(err, rs)
	}
	events, _, err := history.Find(ctx, st, history.Query{VIP: "241.0.0.5"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range events {
		got = append(got, e.Name+" "+e.VIP+" "+e.Event+" "+e.Time.UTC().Format("15:04"))
		if e.Seq == 0 {
			t.Errorf("event %+v has no seq", e)
		}
	}
	want := []string{"redis 241.0.0.5 assigned 10:01", "redis 241.0.0.5 released 10:02"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events of 241.0.0.5 (-want +got):\n%s", diff)
	}
}
