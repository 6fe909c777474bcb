package auth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store/sqlite"
	"github.com/meshnames/meshnames/internal/token"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var t0 = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

func TestLimiter(t *testing.T) {
	c := &clock{t: t0}
	l := NewLimiter(2, 3, c.Now)
	for i := range 3 {
		if ok, _ := l.Allow("a"); !ok {
			t.Fatalf("request %d within the burst refused", i)
		}
	}
	ok, wait := l.Allow("a")
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("request past the burst: %v, wait %s; want refused, 500ms", ok, wait)
	}
	if ok, _ := l.Allow("b"); !ok {
		t.Error("another key shares the bucket")
	}
	c.Advance(500 * time.Millisecond)
	if ok, _ := l.Allow("a"); !ok {
		t.Error("refused after the wait it was told")
	}
	c.Advance(time.Hour)
	for i := range 3 {
		if ok, _ := l.Allow("a"); !ok {
			t.Errorf("refill: request %d refused; the bucket refills to the burst, no more", i)
		}
	}
	if ok, _ := l.Allow("a"); ok {
		t.Error("the bucket refilled past its burst")
	}
	var none *Limiter = NewLimiter(0, 10, c.Now)
	if ok, _ := none.Allow("x"); !ok || none != nil {
		t.Error("a limiter of rate 0 limits")
	}
}

func TestLimiter_BoundedMemory(t *testing.T) {
	c := &clock{t: t0}
	l := NewLimiter(1, 1, c.Now)
	for i := range 3 * maxBuckets {
		l.Allow(strings.Repeat("k", 1+i%7) + string(rune(i)))
		if i%maxBuckets == 0 {
			c.Advance(time.Second)
		}
	}
	if n := len(l.buckets); n > maxBuckets {
		t.Errorf("%d buckets, bound %d", n, maxBuckets)
	}
}

func TestAuthorize(t *testing.T) {
	id := func(r token.Role, meshes ...string) Identity {
		return Identity{Subject: "s", Role: r, Meshes: meshes, TokenID: "t"}
	}
	read := Action{Class: Read, Method: "GET", Kind: resource.MeshService, Mesh: "m1"}
	write := func(k resource.Kind, mesh string) Action {
		return Action{Class: Write, Method: "PUT", Kind: k, Mesh: mesh}
	}
	tests := []struct {
		name string
		id   Identity
		a    Action
		want string // "" allowed, else a part of the reason
	}{
		{"PublicForAnyone", Identity{}, Action{Class: Public}, ""},
		{"ZoneRefusedEverywhere", id(token.RoleZone), read, "zone token"},
		{"NoRole", Identity{}, read, "unknown role"},
		{"ReadOnlyReads", id(token.RoleReadOnly), read, ""},
		{"ReadOnlyNeverWrites", id(token.RoleReadOnly), write(resource.MeshService, "m1"), "role read-only may not write MeshService"},
		{"ServiceOwnerWritesServices", id(token.RoleServiceOwner), write(resource.MeshService, "m1"), ""},
		{"ServiceOwnerWritesDataplanes", id(token.RoleServiceOwner), write(resource.Dataplane, "m1"), ""},
		{"ServiceOwnerNeverGenerators", id(token.RoleServiceOwner), write(resource.HostnameGenerator, ""), "admin and operator may"},
		{"ServiceOwnerNeverMeshes", id(token.RoleServiceOwner), write(resource.Mesh, "m1"), "may not write Mesh"},
		{"ServiceOwnerNeverMultiZone", id(token.RoleServiceOwner), write(resource.MeshMultiZoneService, "m1"), "may not write"},
		{"ServiceOwnerInItsMesh", id(token.RoleServiceOwner, "m1"), write(resource.MeshExternalService, "m1"), ""},
		{"ServiceOwnerOutsideItsMeshes", id(token.RoleServiceOwner, "m1", "m2"), write(resource.MeshService, "m3"), `limited to meshes m1, m2; mesh "m3"`},
		{"LimitedReadOutsideItsMeshes", id(token.RoleReadOnly, "m1"), Action{Class: Read, Method: "GET", Mesh: "m2"}, "limited"},
		{"LimitedReadAcrossMeshes", id(token.RoleReadOnly, "m1"), Action{Class: Read, Method: "GET", Kind: resource.MeshService, AllMeshes: true}, "mesh by mesh"},
		{"UnlimitedReadAcrossMeshes", id(token.RoleReadOnly), Action{Class: Read, Method: "GET", Kind: resource.MeshService, AllMeshes: true}, ""},
		{"LimitedReadOfGlobalPaths", id(token.RoleReadOnly, "m1"), Action{Class: Read, Method: "GET", Kind: resource.HostnameGenerator}, ""},
		{"OperatorWritesGenerators", id(token.RoleOperator), write(resource.HostnameGenerator, ""), ""},
		{"LimitedOperatorNoGenerators", id(token.RoleOperator, "m1"), write(resource.HostnameGenerator, ""), "apply to every mesh"},
		{"LimitedOperatorNoZones", id(token.RoleOperator, "m1"), write(resource.Zone, ""), "apply to every mesh"},
		{"LimitedOperatorItsMesh", id(token.RoleOperator, "m1"), write(resource.Mesh, "m1"), ""},
		{"LimitedOperatorOtherMesh", id(token.RoleOperator, "m1"), write(resource.Mesh, "m2"), "limited"},
		{"OnlyAdminTokens", id(token.RoleOperator), Action{Class: Tokens, Method: "POST"}, "only admin may manage tokens"},
		{"AdminTokens", id(token.RoleAdmin), Action{Class: Tokens, Method: "POST"}, ""},
		{"ReadOnlyAudit", id(token.RoleReadOnly), Action{Class: Audit, Method: "GET"}, ""},
		{"ServiceOwnerNoAudit", id(token.RoleServiceOwner), Action{Class: Audit, Method: "GET"}, "may not read the audit log"},
		{"LimitedNoAudit", id(token.RoleOperator, "m1"), Action{Class: Audit, Method: "GET"}, "spans every mesh"},
		{"ServiceOwnerHistory", id(token.RoleServiceOwner, "m1"), Action{Class: History, Method: "GET"}, ""},
		{"OtherGET", id(token.RoleReadOnly), Action{Class: Other, Method: "GET"}, ""},
		{"OtherPOSTOperator", id(token.RoleOperator), Action{Class: Other, Method: "POST"}, "only admin may POST"},
		{"OtherPOSTAdmin", id(token.RoleAdmin), Action{Class: Other, Method: "POST"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Authorize(tc.id, tc.a)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Authorize = %v, want allowed", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Authorize = %v, want a denial containing %q", err, tc.want)
			}
		})
	}
}

func TestGuard_Check(t *testing.T) {
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	keys, err := token.LoadKeys(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: t0}
	sign := func(role token.Role, exp time.Duration) string {
		raw, err := keys.Sign(token.Claims{ID: "id-" + string(role), Subject: "alice", Role: role, IssuedAt: t0, ExpiresAt: t0.Add(exp)})
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	operator, expired := sign(token.RoleOperator, time.Hour), sign(token.RoleReadOnly, time.Second)
	read := Action{Class: Read, Method: "GET"}
	write := Action{Class: Write, Method: "PUT", Kind: resource.HostnameGenerator}
	req := func(remote, authz string) *http.Request {
		r := httptest.NewRequest("GET", "/meshes", nil)
		r.RemoteAddr = remote
		if authz != "" {
			r.Header.Set("Authorization", authz)
		}
		return r
	}
	c.Advance(time.Minute) // the read-only token has expired
	tests := []struct {
		name          string
		loopbackAdmin bool
		r             *http.Request
		a             Action
		status        int
		reason        string
		subject       string
	}{
		{"LoopbackAdmin", true, req("127.0.0.1:4000", ""), write, 0, "", LoopbackSubject},
		{"LoopbackAdminIPv6", true, req("[::1]:4000", ""), write, 0, "", LoopbackSubject},
		{"LoopbackAdminOff", false, req("127.0.0.1:4000", ""), read, 401, "missing", ""},
		{"NotFromLoopback", true, req("10.0.0.7:4000", ""), read, 401, "missing", ""},
		{"Token", false, req("10.0.0.7:4000", "Bearer "+operator), write, 0, "", "alice"},
		{"TokenSchemeCaseInsensitive", false, req("10.0.0.7:4000", "bearer "+operator), write, 0, "", "alice"},
		{"TokenOnLoopbackIsTheToken", true, req("127.0.0.1:4000", "Bearer "+expired), read, 401, "expired", ""},
		{"BasicAuth", false, req("10.0.0.7:4000", "Basic YWxpY2U6c2VjcmV0"), read, 401, "malformed_header", ""},
		{"EmptyBearer", false, req("10.0.0.7:4000", "Bearer "), read, 401, "malformed_header", ""},
		{"Garbage", false, req("10.0.0.7:4000", "Bearer garbage"), read, 401, "malformed", ""},
		{"Zone", false, req("10.0.0.7:4000", "Bearer "+func() string {
			raw, _ := keys.Sign(token.Claims{Subject: "zone/east", Role: token.RoleZone, Zone: "east", IssuedAt: t0, ExpiresAt: t0.Add(time.Hour)})
			return raw
		}()), read, 403, "forbidden", "zone/east"},
		{"Public", false, req("10.0.0.7:4000", ""), Action{Class: Public}, 0, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			g := NewGuard(Options{Keys: keys, LoopbackAdmin: tc.loopbackAdmin, Now: c.Now, Registerer: reg})
			id, ref := g.Check(tc.r, tc.a)
			switch {
			case tc.status == 0 && ref != nil:
				t.Fatalf("Check refused: %+v", ref)
			case tc.status != 0 && (ref == nil || ref.Status != tc.status || ref.Reason != tc.reason):
				t.Fatalf("Check = %+v, want %d %s", ref, tc.status, tc.reason)
			}
			if id.Subject != tc.subject {
				t.Errorf("identity %+v, want subject %q", id, tc.subject)
			}
			if ref != nil && strings.Contains(ref.Detail, operator) {
				t.Errorf("refusal %q repeats the token", ref.Detail)
			}
			if tc.status == 401 {
				if n := testutil.ToFloat64(g.failed.WithLabelValues(tc.reason)); n != 1 {
					t.Errorf("failures{reason=%s} = %v, want 1", tc.reason, n)
				}
			}
		})
	}
}

func TestGuard_RateLimits(t *testing.T) {
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	keys, err := token.LoadKeys(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: t0}
	raw, err := keys.Sign(token.Claims{ID: "busy", Subject: "ci", Role: token.RoleReadOnly, IssuedAt: t0, ExpiresAt: t0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	g := NewGuard(Options{Keys: keys, Rate: 5, Burst: 5, FailureRate: 1, FailureBurst: 2, Now: c.Now})
	get := func(remote, authz string) *Refusal {
		r := httptest.NewRequest("GET", "/meshes", nil)
		r.RemoteAddr = remote
		r.Header.Set("Authorization", authz)
		_, ref := g.Check(r, Action{Class: Read, Method: "GET"})
		return ref
	}
	for i := range 5 {
		if ref := get("10.0.0.1:1", "Bearer "+raw); ref != nil {
			t.Fatalf("request %d: %+v", i, ref)
		}
	}
	ref := get("10.0.0.2:1", "Bearer "+raw) // another source, the same token
	if ref == nil || ref.Status != 429 || ref.RetryAfter != 200*time.Millisecond || RetryAfterHeader(ref.RetryAfter) != "1" {
		t.Fatalf("request past the token's burst: %+v; want 429 retry after 200ms", ref)
	}
	c.Advance(200 * time.Millisecond)
	if ref := get("10.0.0.1:1", "Bearer "+raw); ref != nil {
		t.Errorf("after the wait: %+v", ref)
	}
	// Failed authentications: 401 up to the source's burst, then 429.
	for i, want := range []int{401, 401, 429} {
		if ref := get("10.0.0.9:1", "Bearer bad"); ref == nil || ref.Status != want {
			t.Errorf("failure %d: %+v, want %d", i, ref, want)
		}
	}
	if ref := get("10.0.0.8:1", "Bearer bad"); ref == nil || ref.Status != 401 {
		t.Errorf("failure from another source: %+v, want 401", ref)
	}
}
