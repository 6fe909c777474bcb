package apiserver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/store"
)

func TestLeader(t *testing.T) {
	expires := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		leader func(context.Context) (api.LeaderStatus, error)
		method string
		code   int
		body   string
	}{
		{name: "lease", method: http.MethodGet, code: 200,
			leader: func(context.Context) (api.LeaderStatus, error) {
				return api.LeaderStatus{Election: "lease", Holder: "h/1", Term: 4, ExpiresAt: expires, Self: "h/2"}, nil
			},
			body: `{"election":"lease","holder":"h/1","term":4,"expiresAt":"2026-01-02T03:04:05Z","self":"h/2","leading":false}` + "\n"},
		{name: "local", method: http.MethodGet, code: 200,
			leader: func(context.Context) (api.LeaderStatus, error) {
				return api.LeaderStatus{Election: "local", Holder: "h/1", Self: "h/1", Leading: true}, nil
			},
			body: `{"election":"local","holder":"h/1","self":"h/1","leading":true}` + "\n"},
		{name: "store-unavailable", method: http.MethodGet, code: 503,
			leader: func(context.Context) (api.LeaderStatus, error) {
				return api.LeaderStatus{}, fmt.Errorf("leases: %w", store.ErrUnavailable)
			}},
		{name: "no-election", method: http.MethodGet, code: 404},
		{name: "read-only", method: http.MethodPut, code: 405,
			leader: func(context.Context) (api.LeaderStatus, error) { return api.LeaderStatus{}, nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := New(Options{Leader: tt.leader, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			rec := httptest.NewRecorder()
			api.Handler().ServeHTTP(rec, httptest.NewRequest(tt.method, "/_leader", nil))
			if rec.Code != tt.code {
				t.Fatalf("%s /_leader = %d, want %d: %s", tt.method, rec.Code, tt.code, rec.Body)
			}
			if tt.body != "" && rec.Body.String() != tt.body {
				t.Errorf("body = %s, want %s", rec.Body, tt.body)
			}
		})
	}
}
