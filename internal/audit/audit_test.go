package audit_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/audit"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlite"
)

func TestAppendAndFind(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	long := strings.Repeat("n", store.MaxRecordTermBytes) // too long for a term: kept, not findable by it
	for i, e := range []api.AuditEntry{
		{Time: t0, Subject: "alice", Role: "operator", Verb: api.VerbCreate, Kind: resource.MeshService, Mesh: "m1", Name: "redis", Result: api.ResultSuccess, Code: 201},
		{Time: t0.Add(time.Minute), Subject: "bob", Verb: api.VerbPut, Kind: resource.HostnameGenerator, Name: "g", Result: api.ResultRefused, Code: 403, Reason: "no"},
		{Time: t0.Add(2 * time.Minute), Subject: "alice", Verb: api.VerbDelete, Kind: resource.MeshService, Mesh: "m1", Name: "redis", Result: api.ResultSuccess},
		{Time: t0.Add(3 * time.Minute), Subject: "alice", Verb: api.VerbDelete, Kind: resource.MeshService, Mesh: "m1", Name: long, Result: api.ResultFailed},
		{Subject: "carol", Verb: api.VerbIssueToken, Name: "tok", Result: api.ResultSuccess}, // no time: the store's clock
	} {
		if err := audit.Append(ctx, st, e); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	find := func(q audit.Query) []string {
		t.Helper()
		es, err := audit.Find(ctx, st, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range es {
			if e.Seq == 0 || e.Time.IsZero() {
				t.Errorf("entry %+v without seq or time", e)
			}
			out = append(out, e.Subject+"/"+e.Verb)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		q    audit.Query
		want string
	}{
		{"All", audit.Query{}, "carol/issue-token alice/delete alice/delete bob/put alice/create"},
		{"ByName", audit.Query{Name: "redis"}, "alice/delete alice/create"},
		{"ByKindAndMesh", audit.Query{Kind: resource.MeshService, Mesh: "m1"}, "alice/delete alice/delete alice/create"},
		{"BySubject", audit.Query{Subject: "bob"}, "bob/put"},
		{"Since", audit.Query{Since: t0.Add(time.Minute), Until: t0.Add(3 * time.Minute)}, "alice/delete bob/put"},
		{"Limit", audit.Query{Limit: 2}, "carol/issue-token alice/delete"},
		{"TooLongToFind", audit.Query{Name: "nope"}, ""},
	} {
		if got := strings.Join(find(tc.q), " "); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	es, _ := audit.Find(ctx, st, audit.Query{Limit: 2})
	if older := find(audit.Query{Before: es[1].Seq}); strings.Join(older, " ") != "alice/delete bob/put alice/create" {
		t.Errorf("the page after %d: %v", es[1].Seq, older)
	}
}

// BenchmarkLog is the line every write through the API logs, with the
// text handler the server uses.
func BenchmarkLog(b *testing.B) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e := api.AuditEntry{Subject: "127.0.0.1:51234", Role: "admin", Source: "127.0.0.1", Verb: "create",
		Kind: resource.MeshService, Mesh: "default", Name: "svc-1", Result: api.ResultSuccess, Code: 201}
	b.ReportAllocs()
	for b.Loop() {
		audit.Log(log, e)
	}
}

func TestLog_LineAndLevel(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	audit.Log(log, api.AuditEntry{Verb: "create", Result: api.ResultSuccess, Code: 201})
	if buf.Len() != 0 {
		t.Fatalf("a success logged at info reached a warn handler: %q", buf.String())
	}
	audit.Log(log, api.AuditEntry{Subject: "alice", Verb: "delete", Kind: resource.MeshService, Mesh: "default",
		Name: "redis", Result: api.ResultRefused, Code: 403, Reason: "role viewer"})
	line := buf.String()
	for _, want := range []string{"level=WARN", "msg=audit", "subject=alice", "verb=delete", "kind=MeshService",
		"mesh=default", "name=redis", "result=" + api.ResultRefused, "code=403", `reason="role viewer"`} {
		if !strings.Contains(line, want) {
			t.Errorf("audit line %q lacks %q", line, want)
		}
	}
}
