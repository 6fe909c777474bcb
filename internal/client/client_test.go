package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

func TestClient_SendsTokenAndWaitsOutRateLimits(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"status":401,"title":"Unauthorized","detail":"no token"}`))
			return
		}
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"status":429,"title":"Too many requests"}`))
			return
		}
		_, _ = w.Write([]byte(`{"product":"meshnames","version":"v"}`))
	}))
	defer srv.Close()

	c, err := New(srv.URL, WithToken("tok"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	info, err := c.Info(context.Background())
	if err != nil || info.Version != "v" {
		t.Fatalf("Info = %+v, %v", info, err)
	}
	if waited := time.Since(start); waited < time.Second || calls.Load() != 2 {
		t.Errorf("answered after %s and %d calls; want a retry after the 1s Retry-After", waited, calls.Load())
	}

	calls.Store(0)
	noRetry, _ := New(srv.URL, WithToken("tok"), WithoutRetry())
	if _, err := noRetry.Info(context.Background()); err == nil || calls.Load() != 1 {
		t.Errorf("WithoutRetry: %v after %d calls; want the 429 at once", err, calls.Load())
	}
	anonymous, _ := New(srv.URL)
	if _, err := anonymous.Info(context.Background()); !IsUnauthorized(err) {
		t.Errorf("without a token: %v, want a 401", err)
	}
	if _, err := New(srv.URL, WithCA([]byte("not pem"))); err == nil {
		t.Error("New with a CA that holds no certificate succeeded")
	}
}
