package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"
)

func serviceVIPs(api, name string) ([]string, error) {
	resp, err := http.Get(api + "/meshes/default/meshservices/" + name)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d", name, resp.StatusCode)
	}
	var doc struct {
		Status struct {
			VIPs []struct {
				IP string `json:"ip"`
			} `json:"vips"`
		} `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return nil, err
	}
	var out []string
	for _, v := range doc.Status.VIPs {
		out = append(out, v.IP)
	}
	return out, nil
}

func waitVIP(t *testing.T, api, name string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if ips, err := serviceVIPs(api, name); err == nil && len(ips) == 1 {
			return ips[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s has no VIP", name)
	return ""
}

// TestVIPs_QuarantineSurvivesKill9 creates services, deletes one, kills the
// server with SIGKILL, restarts it and creates another: the new service must
// not get the deleted service's VIP, which is still in quarantine. A small
// pool makes the freed address the only one left, so that without a
// persisted quarantine it would be handed out at once.
func TestVIPs_QuarantineSurvivesKill9(t *testing.T) {
	dir := t.TempDir()
	cfg := "vips:\n  quarantine: 10m\n  meshService:\n    cidr: 10.10.0.0/30\n"
	cfgFile := dir + "/config.yaml"
	if err := writeFile(cfgFile, cfg); err != nil {
		t.Fatal(err)
	}
	data := dir + "/data"
	first := start(t, "first", "--data-dir", data, "--config", cfgFile)
	first.waitReady(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, name := range []string{"a", "b"} {
		if code, err := putService(ctx, first.api, name, 80); err != nil || code != http.StatusCreated {
			t.Fatalf("PUT %s = %d, %v", name, code, err)
		}
	}
	vipA := waitVIP(t, first.api, "a")
	waitVIP(t, first.api, "b")
	if _, stderr, err := run(t, ctx, nil, "delete", "meshservice", "a", "--server", first.api); err != nil {
		t.Fatalf("delete: %v\n%s", err, stderr)
	}
	time.Sleep(300 * time.Millisecond) // let the controller see the deletion
	first.kill()

	second := start(t, "second", "--data-dir", data, "--config", cfgFile)
	second.waitReady(30 * time.Second)
	if code, err := putService(ctx, second.api, "c", 80); err != nil || code != http.StatusCreated {
		t.Fatalf("PUT c = %d, %v", code, err)
	}
	// c must wait: the only free address of the pool is a's, in quarantine.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		ips, err := serviceVIPs(second.api, "c")
		if err != nil {
			t.Fatal(err)
		}
		for _, ip := range ips {
			if ip == vipA {
				t.Fatalf("c got %s, the VIP of the deleted service a, inside its quarantine", ip)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, err := http.Get(second.api + "/meshes/default/meshservices/c")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Status struct {
			Conditions []struct{ Type, Status, Reason, Message string } `json:"conditions"`
		} `json:"status"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&doc)
	if len(doc.Status.Conditions) != 1 || doc.Status.Conditions[0].Reason != "PoolExhausted" {
		t.Errorf("c's conditions = %+v, want PoolExhausted", doc.Status.Conditions)
	} else {
		t.Logf("c waits: %s", doc.Status.Conditions[0].Message)
	}
}
