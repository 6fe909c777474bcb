package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serviceVIP returns the first VIP in the status of MeshService name, ""
// while it has none.
func serviceVIP(api, name string) (string, error) {
	resp, err := http.Get(api + "/meshes/default/meshservices/" + name)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", name, resp.Status)
	}
	var doc struct {
		Status struct {
			VIPs []struct {
				IP string `json:"ip"`
			} `json:"vips"`
		} `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return "", err
	}
	if len(doc.Status.VIPs) == 0 {
		return "", nil
	}
	return doc.Status.VIPs[0].IP, nil
}

// TestPebble_MigratesSQLiteDataDir runs a server on the SQLite engine,
// gives it services that get VIPs, stops it, and starts the pebble engine
// on the same directory: every service is there with the VIP it had, and
// new writes work. The SQLite engine then refuses the directory.
func TestPebble_MigratesSQLiteDataDir(t *testing.T) {
	t.Parallel() // no timing bound that other processes could break
	dir := t.TempDir()
	first := start(t, "sqlite", "--data-dir", dir, "--store-engine", "sqlite")
	first.waitReady(30 * time.Second)
	const n = 20
	for i := range n {
		name := fmt.Sprintf("svc-%d", i)
		if code, err := putService(t.Context(), first.api, name, 8000+i); err != nil || code != http.StatusCreated {
			t.Fatalf("PUT %s = %d, %v", name, code, err)
		}
	}
	vips := waitVIPs(t, first.api, n)
	if err := first.stop(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}

	second := start(t, "pebble", "--data-dir", dir, "--store-engine", "pebble")
	second.waitReady(30 * time.Second)
	if !strings.Contains(second.log.String(), "migrated the SQLite store to pebble") {
		t.Errorf("the pebble engine did not log the migration:\n%s", second.log.String())
	}
	for name, want := range vips {
		if got, err := serviceVIP(second.api, name); err != nil || got != want {
			t.Errorf("%s after the migration: VIP %q, %v; want %q", name, got, err, want)
		}
	}
	if code, err := putService(t.Context(), second.api, "after", 9000); err != nil || code != http.StatusCreated {
		t.Errorf("PUT after the migration = %d, %v", code, err)
	}
	if err := second.stop(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}

	third := start(t, "sqlite-again", "--data-dir", dir, "--store-engine", "sqlite")
	if err := third.wait(30 * time.Second); err == nil {
		t.Fatal("the SQLite engine started on a pebble data dir")
	}
	if !strings.Contains(third.log.String(), "set store.engine to pebble") {
		t.Errorf("the SQLite engine's refusal does not say what to do:\n%s", third.log.String())
	}
}
