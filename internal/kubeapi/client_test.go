package kubeapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// TestReadBody reads answers with a declared length, without one (a
// streamed list), longer than exactBody, and one cut short of its length.
func TestReadBody(t *testing.T) {
	long := bytes.Repeat([]byte("x"), exactBody+10)
	tests := []struct {
		name    string
		body    []byte
		handler func(w http.ResponseWriter, body []byte)
		wantErr bool
	}{
		{"declared length", []byte(`{"kind":"MeshService"}`), func(w http.ResponseWriter, b []byte) {
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			w.Write(b)
		}, false},
		{"empty", []byte{}, func(w http.ResponseWriter, b []byte) {
			w.Header().Set("Content-Length", "0")
		}, false},
		{"streamed", []byte(`{"items":[` + strings.Repeat(`{},`, 1000) + `{}]}`), func(w http.ResponseWriter, b []byte) {
			w.Write(b[:10])
			w.(http.Flusher).Flush()
			w.Write(b[10:])
		}, false},
		{"longer than exactBody", long, func(w http.ResponseWriter, b []byte) {
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			w.Write(b)
		}, false},
		{"cut short", []byte(`{"kind":`), func(w http.ResponseWriter, b []byte) {
			w.Header().Set("Content-Length", "100")
			w.Write(b)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { tc.handler(w, tc.body) }))
			defer srv.Close()
			resp, err := http.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, err := readBody(resp)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("read %d bytes of a body cut short, want an error", len(got))
				}
				return
			}
			if err != nil || !bytes.Equal(got, tc.body) {
				t.Fatalf("read %d bytes, %v; want the %d sent", len(got), err, len(tc.body))
			}
			if cap(got) != len(got) && resp.ContentLength >= 0 && resp.ContentLength <= exactBody {
				t.Errorf("a body of declared length %d read into %d bytes of capacity, want exactly its length", len(got), cap(got))
			}
		})
	}
}
