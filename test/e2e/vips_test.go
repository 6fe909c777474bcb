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

// TestVIPs_QuarantineSurvivesKill9 creates services, deletes one, waits
// until the controller has quarantined its VIP (the pool's quarantined
// gauge, set once the quarantine is written), kills the server with
// SIGKILL, restarts it and creates another: the new service must not get
// the deleted service's VIP, which is still in quarantine. A small pool
// makes the freed address the only one left, so that without a persisted
// quarantine it would be handed out at once.
func TestVIPs_QuarantineSurvivesKill9(t *testing.T) {
	t.Parallel() // no timing bound that other processes could break
	dir := t.TempDir()
	const pool = "10.10.0.0/30"
	cfg := "vips:\n  quarantine: 10m\n  meshService:\n    cidr: " + pool + "\n"
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
	quarantined := `meshnames_vips_pool_addresses{pool="` + pool + `",state="quarantined"}`
	eventually(t, "the controller quarantines a's VIP", 15*time.Second, func() bool {
		v, err := metric(first.api, quarantined)
		return err == nil && v == 1
	})
	first.kill()

	second := start(t, "second", "--data-dir", data, "--config", cfgFile)
	second.waitReady(30 * time.Second)
	if code, err := putService(ctx, second.api, "c", 80); err != nil || code != http.StatusCreated {
		t.Fatalf("PUT c = %d, %v", code, err)
	}
	// c must wait: the only free address of the pool is a's, in
	// quarantine. The controller says so in c's status, in the same write
	// that would have given it a VIP.
	var doc struct {
		Status struct {
			VIPs       []struct{ IP string }                            `json:"vips"`
			Conditions []struct{ Type, Status, Reason, Message string } `json:"conditions"`
		} `json:"status"`
	}
	eventually(t, "c's status says the pool is exhausted", 15*time.Second, func() bool {
		resp, err := http.Get(second.api + "/meshes/default/meshservices/c")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		doc.Status.VIPs, doc.Status.Conditions = nil, nil
		if json.NewDecoder(resp.Body).Decode(&doc) != nil {
			return false
		}
		return len(doc.Status.VIPs) > 0 || len(doc.Status.Conditions) > 0
	})
	for _, v := range doc.Status.VIPs {
		if v.IP == vipA {
			t.Fatalf("c got %s, the VIP of the deleted service a, inside its quarantine", v.IP)
		}
	}
	if len(doc.Status.VIPs) != 0 || len(doc.Status.Conditions) != 1 || doc.Status.Conditions[0].Reason != "PoolExhausted" {
		t.Errorf("c's status = %+v, want no VIP and PoolExhausted", doc.Status)
	} else {
		t.Logf("c waits: %s", doc.Status.Conditions[0].Message)
	}
}
