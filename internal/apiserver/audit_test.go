package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/history"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/token"
)

// This file tests the audit log (an entry for every write and refusal,
// committed with the write) and the history of names and VIPs.

func TestAudit_EveryWriteAndRefusal(t *testing.T) {
	e := newSecureEnv(t, secureOptions{})
	admin, ro := e.tokens[token.RoleAdmin], e.tokens[token.RoleReadOnly]
	steps := []struct {
		raw, method, path, body string
		code                    int
	}{
		{admin, "PUT", "/meshes/m1/meshservices/redis", serviceDoc, 201},
		{admin, "PUT", "/meshes/m1/meshservices/redis", strings.Replace(serviceDoc, "6379\n    appProtocol", "6380\n    appProtocol", 1), 200},
		{admin, "PUT", "/meshes/m1/meshservices/redis", strings.Replace(serviceDoc, "6379\n    appProtocol", "6380\n    appProtocol", 1), 200},
		{admin, "PUT", "/meshes/m1/meshservices/bad", "type: MeshService\nname: bad\nspec:\n  ports:\n  - port: 0\n", 400},
		{ro, "DELETE", "/meshes/m1/meshservices/redis", "", 403},
		{"not-a-token", "DELETE", "/meshes/m1/meshservices/redis", "", 401},
		{admin, "DELETE", "/meshes/m1/meshservices/redis", "", 200},
		{admin, "DELETE", "/meshes/m1/meshservices/redis", "", 404},
		{admin, "GET", "/meshes/m1/meshservices", "", 200}, // reads are not audited
	}
	for i, s := range steps {
		if r := e.as(s.raw, s.method, s.path, s.body); r.code != s.code {
			t.Fatalf("step %d: %s %s = %d %s, want %d", i, s.method, s.path, r.code, r.body, s.code)
		}
	}
	got := e.auditEntries("?kind=MeshService")
	type row struct{ subject, role, verb, name, result string }
	var rows []row
	for _, a := range got {
		rows = append(rows, row{a.Subject, a.Role, a.Verb, a.Name, a.Result})
		if a.Source != "127.0.0.1" || a.Time.IsZero() || a.Mesh != "m1" || a.Kind != resource.MeshService {
			t.Errorf("entry %+v lacks source, time, mesh or kind", a)
		}
		if a.Result == api.ResultFailed || a.Result == api.ResultRefused {
			if a.Reason == "" || a.Code < 400 {
				t.Errorf("entry %+v: a refusal or failure without its reason and code", a)
			}
		}
	}
	want := []row{ // newest first
		{"user-admin", "admin", "delete", "redis", "failed"},
		{"user-admin", "admin", "delete", "redis", "success"},
		{"", "", "delete", "redis", "refused"},
		{"user-read-only", "read-only", "delete", "redis", "refused"},
		{"user-admin", "admin", "put", "bad", "failed"},
		{"user-admin", "admin", "update", "redis", "unchanged"},
		{"user-admin", "admin", "update", "redis", "success"},
		{"user-admin", "admin", "create", "redis", "success"},
	}
	if !slices.Equal(want, rows) {
		t.Errorf("audit entries:\n got %v\nwant %v", rows, want)
	}
	// Filters.
	if got := e.auditEntries("?subject=user-read-only"); len(got) != 1 || got[0].Result != "refused" {
		t.Errorf("?subject= %+v", got)
	}
	if got := e.auditEntries("?name=bad&kind=meshservices"); len(got) != 1 || got[0].Code != 400 || !strings.Contains(got[0].Reason, "spec.ports[0].port") {
		t.Errorf("?name=bad %+v", got)
	}
	if got := e.auditEntries("?since=" + time.Now().Add(time.Hour).Format(time.RFC3339)); len(got) != 0 {
		t.Errorf("?since=future %+v", got)
	}
	if got := e.auditEntries("?since=1h&mesh=m1"); len(got) != len(want) {
		t.Errorf("?since=1h: %d entries, want %d", len(got), len(want))
	}
	// Paging: next names the following page.
	r := e.as(admin, "GET", "/audit?kind=MeshService&limit=3", "")
	var page api.AuditPage
	_ = json.Unmarshal(r.body, &page)
	if len(page.Items) != 3 || page.Next == "" {
		t.Fatalf("page 1: %d items, next %q", len(page.Items), page.Next)
	}
	r = e.as(admin, "GET", page.Next, "")
	var page2 api.AuditPage
	_ = json.Unmarshal(r.body, &page2)
	if len(page2.Items) != 3 || page2.Items[0].Seq >= page.Items[2].Seq {
		t.Errorf("page 2 does not follow page 1: %+v", page2.Items)
	}
	for _, q := range []string{"?kind=Nope", "?since=yesterday", "?limit=0", "?before=x"} {
		if r := e.as(admin, "GET", "/audit"+q, ""); r.code != 400 {
			t.Errorf("GET /audit%s = %d, want 400", q, r.code)
		}
	}
	if r := e.as(e.tokens[token.RoleServiceOwner], "GET", "/audit", ""); r.code != 403 {
		t.Errorf("service owner reading the audit log = %d, want 403", r.code)
	}
}

// TestAudit_CommittedWithTheWrite checks that the entry of a successful
// write is in the store as soon as the write is, in the same transaction.
func TestAudit_CommittedWithTheWrite(t *testing.T) {
	e := newSecureEnv(t, secureOptions{})
	// Writes racing on one name: each success has exactly one entry.
	const n = 8
	done := make(chan int, n)
	for i := range n {
		go func() {
			body := strings.Replace(serviceDoc, "port: 6379\n", fmt.Sprintf("port: %d\n", 7000+i), 1)
			done <- e.as(e.tokens[token.RoleAdmin], "PUT", "/meshes/m1/meshservices/redis", body).code
		}()
	}
	writes := 0
	for range n {
		if c := <-done; c == 200 || c == 201 {
			writes++
		}
	}
	successes := 0
	for _, a := range e.auditEntries("?name=redis") {
		if a.Result == api.ResultSuccess {
			successes++
		}
	}
	obj, err := e.st.Get(context.Background(), resource.Key{Kind: resource.MeshService, Mesh: "m1", Name: "redis"})
	if err != nil {
		t.Fatal(err)
	}
	if successes != int(obj.Version) || writes != n {
		t.Errorf("%d writes answered, stored version %d, %d success entries; want one entry per version", writes, obj.Version, successes)
	}
}

func TestHistoryAPI(t *testing.T) {
	e := newSecureEnv(t, secureOptions{})
	ctx := context.Background()
	for i, ev := range []api.HistoryEvent{
		{Mesh: "m1", Kind: resource.MeshService, Name: "redis", VIP: "241.0.0.7", Event: api.HistoryAssigned},
		{Mesh: "m1", Kind: resource.MeshService, Name: "redis", VIP: "241.0.0.7", Event: api.HistoryReleased, Reason: "deleted"},
		{Mesh: "default", Kind: resource.MeshService, Name: "web", VIP: "241.0.0.7", Event: api.HistoryAssigned},
	} {
		ev.Time = time.Date(2026, 11, 25, 10, i, 0, 0, time.UTC)
		op, err := history.Op(ev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.st.Apply(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	get := func(raw, q string) (api.HistoryReport, reply) {
		r := e.as(raw, "GET", "/history"+q, "")
		var rep api.HistoryReport
		_ = json.Unmarshal(r.body, &rep)
		return rep, r
	}
	rep, r := get(e.tokens[token.RoleReadOnly], "?vip=241.0.0.7")
	if r.code != 200 || len(rep.Events) != 3 || len(rep.Holders) != 2 || rep.Holders[0].Name != "redis" || rep.Holders[0].End != "released" ||
		rep.Holders[1].Name != "web" || !rep.Holders[1].Until.IsZero() {
		t.Errorf("GET /history?vip= = %d %s", r.code, r.body)
	}
	rep, _ = get(e.sign(token.Claims{Subject: "o", Role: token.RoleServiceOwner, Meshes: []string{"m1"}}), "?vip=241.0.0.7")
	if len(rep.Events) != 2 || len(rep.Holders) != 1 || rep.Holders[0].Mesh != "m1" {
		t.Errorf("a token limited to m1 sees %+v", rep)
	}
	for _, q := range []string{"", "?vip=1.2.3.4&hostname=a.b", "?vip=1.2.3.4&limit=x"} {
		if _, r := get(e.tokens[token.RoleAdmin], q); r.code != 400 {
			t.Errorf("GET /history%s = %d, want 400", q, r.code)
		}
	}
}

// TestKumaAdapter_SameAnswers checks that requests through the Kuma
