package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/meshnames/meshnames/internal/store"
)

// TestFromError_StoreFailures: each way a store write can fail gets its
// own status, and a full disk is told apart from an unreachable store.
func TestFromError_StoreFailures(t *testing.T) {
	full := fmt.Errorf("apply: %w: %w: write pebble/000004.log: no space left on device", store.ErrUnavailable, store.ErrDiskFull)
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		retryAfter string
		detail     string
	}{
		{name: "disk-full", err: full, status: http.StatusInsufficientStorage, retryAfter: "5", detail: "the disk of the control plane's store is full"},
		{name: "unavailable", err: fmt.Errorf("apply: %w: connection refused", store.ErrUnavailable), status: http.StatusServiceUnavailable, retryAfter: "1", detail: "cannot reach its store"},
		{name: "closed", err: store.ErrClosed, status: http.StatusServiceUnavailable, retryAfter: "1", detail: "cannot reach its store"},
		{name: "too-large", err: store.ErrTooLarge, status: http.StatusRequestEntityTooLarge, detail: "too large"},
		{name: "client-gone", err: fmt.Errorf("apply: %w", context.Canceled), status: StatusClientClosedRequest, detail: "the client went away"},
		{name: "other", err: errors.New("boom"), status: http.StatusInternalServerError, detail: "see the control plane's log"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := fromError(tc.err)
			if e.Status != tc.status || !strings.Contains(e.Detail, tc.detail) {
				t.Errorf("fromError(%v) = %d %q, want %d saying %q", tc.err, e.Status, e.Detail, tc.status, tc.detail)
			}
			rec := httptest.NewRecorder()
			writeError(rec, e)
			if rec.Code != tc.status || rec.Header().Get("Retry-After") != tc.retryAfter {
				t.Errorf("written: %d, Retry-After %q; want %d, %q", rec.Code, rec.Header().Get("Retry-After"), tc.status, tc.retryAfter)
			}
		})
	}
}
