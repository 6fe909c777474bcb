package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func putService(ctx context.Context, api, name string, port int) (int, error) {
	body := fmt.Sprintf(`{"type":"MeshService","name":%q,"mesh":"default","spec":{"ports":[{"port":%d,"appProtocol":"http"}]}}`, name, port)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, api+"/meshes/default/meshservices/"+name, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func getServicePort(api, name string) (int, int, error) {
	resp, err := http.Get(api + "/meshes/default/meshservices/" + name)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, 0, nil
	}
	var doc struct {
		Spec struct {
			Ports []struct {
				Port int `json:"port"`
			} `json:"ports"`
		} `json:"spec"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || len(doc.Spec.Ports) != 1 {
		return resp.StatusCode, 0, fmt.Errorf("decode %s: %v", name, err)
	}
	return resp.StatusCode, doc.Spec.Ports[0].Port, nil
}

// TestSQLite_AcknowledgedWritesSurviveKill9 kills the server with SIGKILL
// while writers are creating and updating services, restarts it on the same
// data directory and checks that every write the API acknowledged is there:
// created services exist, and each updated service holds at least the last
// acknowledged value (a write in flight at the kill may have landed too).
func TestSQLite_AcknowledgedWritesSurviveKill9(t *testing.T) {
	t.Parallel() // no timing bound that other processes could break
	testKill9(t, "--store-engine", "sqlite")
}

// TestPebble_AcknowledgedWritesSurviveKill9 is the same with the pebble
// engine, the default.
func TestPebble_AcknowledgedWritesSurviveKill9(t *testing.T) {
	t.Parallel() // no timing bound that other processes could break
	testKill9(t, "--store-engine", "pebble")
}

// testKill9 is the kill -9 test, with args naming the engine.
func testKill9(t *testing.T, args ...string) {
	dir := t.TempDir()
	args = append([]string{"--data-dir", dir}, args...)
	first := start(t, "first", args...)
	first.waitReady(30 * time.Second)

	const writers = 8
	var mu sync.Mutex
	created := map[string]bool{} // acknowledged creations
	lastPort := map[string]int{} // per updated service, last acknowledged port
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var acks int
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			updated := fmt.Sprintf("counter-%d", w)
			for i := 1; ctx.Err() == nil; i++ {
				name := fmt.Sprintf("svc-%d-%d", w, i)
				if code, err := putService(ctx, first.api, name, 8000+i%1000); err == nil && code == http.StatusCreated {
					mu.Lock()
					created[name] = true
					acks++
					mu.Unlock()
				}
				port := 1 + i%65000
				if code, err := putService(ctx, first.api, updated, port); err == nil && (code == http.StatusOK || code == http.StatusCreated) {
					mu.Lock()
					lastPort[updated] = port
					acks++
					mu.Unlock()
				}
			}
		}()
	}
	// Kill once plenty of writes have been acknowledged.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := acks
		mu.Unlock()
		if n >= 600 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	first.kill()
	cancel()
	wg.Wait()
	if len(created) < 100 {
		t.Fatalf("only %d creations acknowledged before the kill; the test did not exercise much", len(created))
	}

	second := start(t, "second", args...)
	second.waitReady(30 * time.Second)
	for name := range created {
		code, _, err := getServicePort(second.api, name)
		if err != nil || code != http.StatusOK {
			t.Errorf("acknowledged creation of %s lost after kill -9: GET = %d, %v", name, code, err)
		}
	}
	for name, want := range lastPort {
		code, got, err := getServicePort(second.api, name)
		if err != nil || code != http.StatusOK {
			t.Errorf("acknowledged update of %s lost after kill -9: GET = %d, %v", name, code, err)
			continue
		}
		// Ports cycle upwards per writer, so an older value is smaller
		// unless it wrapped; the writers stop long before 65000 writes.
		if got < want {
			t.Errorf("%s has port %d after restart, but port %d was acknowledged", name, got, want)
		}
	}
	t.Logf("verified %d acknowledged creations and %d updated services after kill -9", len(created), len(lastPort))
}

// TestEmbedded_DataDirIsExclusive checks that a second process on the same
// data directory is refused with a clear message, and that the directory is
// usable again after a clean SIGTERM shutdown.
func TestEmbedded_DataDirIsExclusive(t *testing.T) {
	t.Parallel() // no timing bound that other processes could break
	dir := t.TempDir()
	first := start(t, "first", "--data-dir", dir)
	first.waitReady(30 * time.Second)

	second := start(t, "second", "--data-dir", dir)
	if err := second.wait(30 * time.Second); err == nil {
		t.Fatalf("second process on the same data dir exited 0")
	}
	if !strings.Contains(second.log.String(), "in use by another meshnames process") {
		t.Errorf("second process's error does not say the data dir is in use:\n%s", second.log.String())
	}

	if err := first.stop(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM: exit %v, want 0", err)
	}
	if !strings.Contains(first.log.String(), "stopped") {
		t.Errorf("first process did not log a clean stop:\n%s", first.log.String())
	}
	third := start(t, "third", "--data-dir", dir)
	third.waitReady(30 * time.Second)
}

// TestServe_RejectsBadConfig checks that configuration errors name the
// field and stop the process before it binds anything.
func TestServe_RejectsBadConfig(t *testing.T) {
	t.Parallel() // no timing bound that other processes could break
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, stderr, err := run(t, ctx, nil, "serve", "--api-addr", "nonsense", "--mode", "hybrid", "--data-dir", t.TempDir())
	if err == nil {
		t.Fatalf("serve with a bad config exited 0")
	}
	for _, want := range []string{"api.addr", "mode", `"hybrid"`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not mention %s:\n%s", want, stderr)
		}
	}
}

// TestCLI_UnreachableServer checks the message a client command prints
// when nothing listens at the server address.
func TestCLI_UnreachableServer(t *testing.T) {
	t.Parallel() // no timing bound that other processes could break
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	_, stderr, err := run(t, ctx, nil, "get", "meshes", "--server", addr)
	if err == nil {
		t.Fatalf("get against a dead server exited 0")
	}
	if !strings.Contains(stderr, "cannot reach the meshnames server at "+addr) || !strings.Contains(stderr, "MESHNAMES_SERVER") {
		t.Errorf("unhelpful message:\n%s", stderr)
	}
}
