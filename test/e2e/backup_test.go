package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestBackup_RestoreOnSecondServer runs a server on each embedded engine,
// gives it services that get VIPs, takes `meshnames backup` while a writer
// goes on, extracts the tar into a new directory as an operator would
// (tar -xf) and starts a second server there: every service acknowledged
// before the backup is there with its VIP, the first server's admin token
// works, and the first server's audit log records the backup.
func TestBackup_RestoreOnSecondServer(t *testing.T) {
	t.Parallel() // no timing bound that other processes could break
	for _, engine := range []string{"sqlite", "pebble"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			testBackupRestore(t, engine)
		})
	}
}

func testBackupRestore(t *testing.T, engine string) {
	ctx := t.Context()
	dir := t.TempDir()
	first := start(t, engine, "--data-dir", dir, "--store-engine", engine)
	first.waitReady(30 * time.Second)
	const n = 10
	for i := range n {
		name := fmt.Sprintf("svc-%d", i)
		if code, err := putService(ctx, first.api, name, 8000+i); err != nil || code != http.StatusCreated {
			t.Fatalf("PUT %s = %d, %v", name, code, err)
		}
	}
	vips := waitVIPs(t, first.api, n)

	// A writer goes on during the backup.
	var (
		mu    sync.Mutex
		acked []string
		stop  = make(chan struct{})
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := fmt.Sprintf("live-%d", i)
			if code, err := putService(ctx, first.api, name, 9000); err != nil || code != http.StatusCreated {
				t.Errorf("PUT %s = %d, %v", name, code, err)
				return
			}
			mu.Lock()
			acked = append(acked, name)
			mu.Unlock()
		}
	}()
	for {
		mu.Lock()
		k := len(acked)
		mu.Unlock()
		if k >= 5 {
			break
		}
		select {
		case <-done:
			t.Fatal("the writer stopped")
		case <-time.After(10 * time.Millisecond):
		}
	}
	mu.Lock()
	before := append([]string(nil), acked...)
	mu.Unlock()

	file := filepath.Join(t.TempDir(), "backup.tar")
	token := filepath.Join(dir, "admin.token")
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, stderr, err := run(t, cctx, nil, "backup", "-o", file, "--server", first.api, "--token-file", token)
	close(stop)
	<-done
	if err != nil {
		t.Fatalf("meshnames backup: %v\n%s%s", err, out, stderr)
	}
	t.Logf("%d services acknowledged before the backup; %s", len(before), strings.TrimSpace(out))
	want := regexp.MustCompile(`^Wrote ` + regexp.QuoteMeta(file) + `: \d+ bytes, ` + engine + ` store at revision \d+\.\n$`)
	if !want.MatchString(out) {
		t.Errorf("meshnames backup printed %q, want %s", out, want)
	}

	restored := t.TempDir()
	if b, err := exec.Command("tar", "-xf", file, "-C", restored).CombinedOutput(); err != nil {
		t.Fatalf("tar -xf: %v\n%s", err, b)
	}
	second := start(t, engine+"-restored", "--data-dir", restored, "--store-engine", engine)
	second.waitReady(30 * time.Second)
	for name, vip := range vips {
		if got, err := serviceVIP(second.api, name); err != nil || got != vip {
			t.Errorf("%s on the restored server: VIP %q, %v; want %q", name, got, err, vip)
		}
	}
	for _, name := range before {
		if code, _, err := getServicePort(second.api, name); err != nil || code != http.StatusOK {
			t.Errorf("%s, acknowledged before the backup, on the restored server: %d, %v", name, code, err)
		}
	}
	if _, err := os.Stat(filepath.Join(restored, "admin.token")); !os.IsNotExist(err) {
		t.Errorf("the restored data dir has an admin.token (%v): the backup holds none and the keys exist", err)
	}
	tok, err := os.ReadFile(token)
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := getAs(t, second.api+"/tokens", strings.TrimSpace(string(tok))); code != http.StatusOK {
		t.Errorf("the first server's admin token on the restored server: GET /tokens = %d", code)
	}
	code, body := getAs(t, first.api+"/audit?subject=admin", strings.TrimSpace(string(tok)))
	var page struct {
		Items []struct{ Verb, Result, Reason string }
	}
	if err := json.Unmarshal(body, &page); code != http.StatusOK || err != nil {
		t.Fatalf("GET /audit = %d, %v: %s", code, err, body)
	}
	found := false
	for _, e := range page.Items {
		found = found || (e.Verb == "backup" && e.Result == "success" && strings.HasPrefix(e.Reason, engine+" store at revision "))
	}
	if !found {
		t.Errorf("the audit log has no successful backup entry: %s", body)
	}
}

// waitVIPs waits until services svc-0..svc-(n-1) have a VIP and returns
// them.
func waitVIPs(t *testing.T, api string, n int) map[string]string {
	t.Helper()
	vips := map[string]string{}
	deadline := time.Now().Add(30 * time.Second)
	for len(vips) < n && time.Now().Before(deadline) {
		for i := range n {
			name := fmt.Sprintf("svc-%d", i)
			if vip, err := serviceVIP(api, name); err == nil && vip != "" {
				vips[name] = vip
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(vips) < n {
		t.Fatalf("%d of %d services got a VIP", len(vips), n)
	}
	return vips
}

// getAs GETs url with the bearer token tok.
func getAs(t *testing.T, url, tok string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}
