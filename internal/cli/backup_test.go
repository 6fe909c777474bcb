package cli

import (
	"archive/tar"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/meshnames/meshnames/internal/config"
	"github.com/meshnames/meshnames/internal/server/servertest"
)

// TestBackupCommand takes a backup of a real server into a file and to
// standard output, and checks both are the tar of a data directory.
func TestBackupCommand(t *testing.T) {
	url := servertest.Start(t, config.Default(), servertest.Options{NoControllers: true})
	file := filepath.Join(t.TempDir(), "backup.tar")
	out, _, err := runWith(url, nil, "backup", "-o", file)
	if err != nil {
		t.Fatalf("backup -o FILE: %v", err)
	}
	st, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`^Wrote ` + regexp.QuoteMeta(file) + `: (\d+) bytes, pebble store at revision [1-9]\d*\.\n$`)
	if m := want.FindStringSubmatch(out); m == nil || m[1] != strconv.FormatInt(st.Size(), 10) {
		t.Errorf("backup printed %q; want %s with the file's size %d", out, want, st.Size())
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %o, want 600: it holds the keys that sign tokens", file, st.Mode().Perm())
	}
	if _, err := os.Stat(file + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("%s.tmp is left: %v", file, err)
	}
	b, _ := os.ReadFile(file)
	names := tarNames(t, b)
	if !slices.Contains(names, "pebble/") || slices.ContainsFunc(names, func(n string) bool { return !strings.HasPrefix(n, "pebble/") }) {
		t.Errorf("the backup holds %v, want pebble/ and what is in it", names)
	}

	stdout, stderr, err := runWith(url, nil, "backup", "-o", "-")
	if err != nil {
		t.Fatalf("backup -o -: %v", err)
	}
	if !strings.HasPrefix(stderr, "Wrote the backup to standard output: ") {
		t.Errorf("backup -o - stderr %q", stderr)
	}
	tarNames(t, []byte(stdout))

	if _, _, err := runWith(url, nil, "backup", "-o", filepath.Join(t.TempDir(), "no", "such", "dir", "b.tar")); err == nil || !strings.HasPrefix(err.Error(), "--output: ") {
		t.Errorf("backup into a missing directory = %v, want an error naming --output", err)
	}
	if _, _, err := runWith(url, nil, "backup", "-o", t.TempDir()); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("backup -o DIR = %v, want an error saying it is a directory", err)
	}
}

// TestBackupCommand_FailureLeavesNoFile checks that a stream cut short
// (no trailers) or refused leaves neither FILE nor FILE.tmp, and an
// existing FILE untouched.
func TestBackupCommand_FailureLeavesNoFile(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(501)
			_, _ = io.WriteString(w, `{"status":501,"title":"Not implemented","detail":"back up its database with pg_dump"}`)
			return
		}
		w.Header().Set("Content-Type", "application/x-tar")
		_, _ = w.Write(make([]byte, 1024)) // a partial stream, without trailers
	}))
	defer srv.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "backup.tar")
	if err := os.WriteFile(file, []byte("the last good backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := runWith(srv.URL, map[string]string{TokenEnv: "x"}, "backup", "-o", file)
	if err == nil || !strings.Contains(err.Error(), "without its trailers: it is incomplete") {
		t.Errorf("backup of a stream cut short = %v", err)
	}
	_, _, err = runWith(srv.URL, nil, "backup", "-o", file)
	if err == nil || !strings.Contains(err.Error(), "pg_dump") {
		t.Errorf("backup refused with 501 = %v, want the server's advice", err)
	}
	entries, _ := os.ReadDir(dir)
	if b, _ := os.ReadFile(file); len(entries) != 1 || string(b) != "the last good backup" {
		t.Errorf("after failed backups the directory holds %v and %s holds %q", entries, file, b)
	}
}

func tarNames(t *testing.T, b []byte) []string {
	t.Helper()
	var names []string
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatalf("not a tar: %v", err)
		}
		names = append(names, h.Name)
	}
}
