package auth

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/store/sqlite"
	"github.com/meshnames/meshnames/internal/token"
)

// FuzzCheck feeds the guard arbitrary Authorization headers. It must never
// panic; what it accepts must be the one valid token it was given (nothing
// else verifies), and every refusal is 401 or 429 with a reason that does
// not repeat the header.
func FuzzCheck(f *testing.F) {
	st, err := sqlite.Open(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	defer st.Close()
	keys, err := token.LoadKeys(context.Background(), st)
	if err != nil {
		f.Fatal(err)
	}
	valid, err := keys.Sign(token.Claims{ID: "fuzz", Subject: "fuzzer", Role: token.RoleReadOnly, IssuedAt: t0, ExpiresAt: t0.Add(time.Hour)})
	if err != nil {
		f.Fatal(err)
	}
	g := NewGuard(Options{Keys: keys, Now: func() time.Time { return t0 }, FailureRate: 1e9, FailureBurst: 1e9})
	for _, s := range []string{"Bearer " + valid, "bearer " + valid, "Bearer", "Basic abc", "", "Bearer  " + valid + " ", "Bearer a.b.c", "Token " + valid} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		r := httptest.NewRequest("GET", "/meshes", nil)
		r.RemoteAddr = "10.0.0.1:1234"
		r.Header["Authorization"] = []string{header}
		id, ref := g.Check(r, Action{Class: Read, Method: "GET"})
		if ref == nil {
			scheme, raw, _ := strings.Cut(header, " ")
			if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(raw) != valid || id.TokenID != "fuzz" {
				t.Fatalf("accepted %q as %+v", header, id)
			}
			return
		}
		if (ref.Status != 401 && ref.Status != 429) || ref.Reason == "" || ref.Detail == "" {
			t.Fatalf("refusal %+v", ref)
		}
		if len(header) > 16 && strings.Contains(ref.Detail, header) {
			t.Fatalf("the refusal repeats the header: %q", ref.Detail)
		}
	})
}
