package apiserver

import (
	"archive/tar"
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/token"
)

// TestBackupAPI checks GET /_backup: admin gets a tar of the store with
// its engine and revision in trailers; every other role is refused; both
// are audited.
func TestBackupAPI(t *testing.T) {
	e := newSecureEnv(t, secureOptions{})
	rev := e.revision()
	r := e.as(e.tokens[token.RoleAdmin], "GET", "/_backup", "")
	if r.code != 200 || r.header.Get("Content-Type") != "application/x-tar" {
		t.Fatalf("GET /_backup as admin = %d %s %.200s", r.code, r.header.Get("Content-Type"), r.body)
	}
	if got := r.trailer.Get(api.BackupEngineTrailer); got != "sqlite" {
		t.Errorf("engine trailer = %q, want sqlite", got)
	}
	if got := r.trailer.Get(api.BackupRevisionTrailer); got != strconv.FormatInt(rev, 10) {
		t.Errorf("revision trailer = %q, want %d", got, rev)
	}
	var names []string
	tr := tar.NewReader(bytes.NewReader(r.body))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the backup is not a tar stream: %v", err)
		}
		names = append(names, h.Name)
	}
	if !slices.Equal(names, []string{"meshnames.db"}) {
		t.Errorf("the backup holds %v, want meshnames.db alone", names)
	}

	for _, role := range []token.Role{token.RoleOperator, token.RoleServiceOwner, token.RoleReadOnly} {
		r := e.as(e.tokens[role], "GET", "/_backup", "")
		if r.code != 403 || !strings.Contains(r.error().Detail, "admin") {
			t.Errorf("GET /_backup as %s = %d %s, want 403 saying only admin may", role, r.code, r.body)
		}
	}
	if r := e.as(e.tokens[token.RoleAdmin], "POST", "/_backup", ""); r.code != 405 {
		t.Errorf("POST /_backup = %d %s, want 405", r.code, r.body)
	}

	var audited []string
	for _, a := range e.auditEntries("?limit=20") {
		if a.Verb == api.VerbBackup {
			audited = append(audited, a.Role+"/"+a.Result)
			if a.Role == "admin" && a.Result == api.ResultSuccess && !strings.Contains(a.Reason, "sqlite store at revision "+strconv.FormatInt(rev, 10)) {
				t.Errorf("the backup's audit entry says %q", a.Reason)
			}
		}
	}
	for _, want := range []string{"admin/success", "operator/refused", "read-only/refused", "service-owner/refused", "admin/failed"} {
		if !slices.Contains(audited, want) {
			t.Errorf("audit has no backup entry %s: %v", want, audited)
		}
	}
}

// TestBackupAPI_StoreWithoutBackup checks the 501 of a store that is not
// a store.Backuper: the server's advice, or a generic one.
func TestBackupAPI_StoreWithoutBackup(t *testing.T) {
	st := struct{ store.Store }{storeWithDefaultMesh(t)} // hides Backup
	for _, tc := range []struct{ noBackup, want string }{
		{"", "back up PostgreSQL with pg_dump, and the Kubernetes store with an etcd snapshot"},
		{"use pg_dump", "use pg_dump"},
	} {
		srv := New(Options{Store: st, NoBackup: tc.noBackup, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/_backup", nil))
		if rec.Code != 501 || !strings.Contains(rec.Body.String(), tc.want) || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("GET /_backup = %d %s %s, want 501 saying %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body, tc.want)
		}
	}
}
