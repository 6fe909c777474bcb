package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const diffBase = `type: MeshService
name: redis
mesh: default
labels:
  team: storage
spec:
  ports:
  - port: 6379
`

const diffNext = `type: MeshService
name: redis
mesh: default
labels:
  team: storage
spec:
  ports:
  - port: 6380
---
type: MeshService
name: cache
mesh: default
spec:
  ports:
  - port: 11211
---
type: HostnameGenerator
name: by-team
spec:
  selector:
    meshService:
      matchLabels:
        team: storage
  template: "{{ .Name }}.storage.mesh.local"
---
type: MeshExternalService
name: redis-cloud
mesh: default
spec:
  match:
  - type: InternalVIP
    value: redis.svc.mesh.local
    port: 6379
    protocol: tcp
`

// TestDiff_ShowsNamesAndVIPs runs meshnames diff and apply --dry-run
// against a real server whose controllers have named what it holds: the
// spec diff of a changed service, and the hostnames and VIPs services would
// gain or be refused, including a service the file does not change (redis,
// named anew by a new generator) - and then checks that nothing was
// written and that apply does what diff said.
func TestDiff_ShowsNamesAndVIPs(t *testing.T) {
	p := start(t, "server", "--data-dir", t.TempDir())
	p.waitReady(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	base, next := filepath.Join(dir, "base.yaml"), filepath.Join(dir, "next.yaml")
	if err := os.WriteFile(base, []byte(diffBase), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(next, []byte(diffNext), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := run(t, ctx, nil, "apply", "-f", base, "--server", p.api); err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	waitVIP(t, p.api, "redis")

	out, stderr, err := run(t, ctx, nil, "diff", "-f", next, "--server", p.api)
	if code := exitStatus(err); code != 1 {
		t.Fatalf("diff exit status %d (%v), want 1 (changes)\n%s%s", code, err, out, stderr)
	}
	want := `--- MeshService default/redis (stored)
+++ MeshService default/redis (` + next + `)
 type: MeshService
 mesh: default
 name: redis
 labels:
   kuma.io/display-name: redis
   kuma.io/mesh: default
   kuma.io/origin: zone
   kuma.io/zone: default
   team: storage
 spec:
   ports:
-  - port: 6379
+  - port: 6380
     appProtocol: tcp
--- MeshService default/cache (stored)
+++ MeshService default/cache (` + next + `)
+type: MeshService
+mesh: default
+name: cache
+labels:
+  kuma.io/display-name: cache
+  kuma.io/mesh: default
+  kuma.io/origin: zone
+  kuma.io/zone: default
+spec:
+  ports:
+  - port: 11211
+    appProtocol: tcp
--- HostnameGenerator by-team (stored)
+++ HostnameGenerator by-team (` + next + `)
+type: HostnameGenerator
+name: by-team
+labels:
+  kuma.io/display-name: by-team
+  kuma.io/origin: zone
+  kuma.io/zone: default
+spec:
+  selector:
+    meshService:
+      matchLabels:
+        team: storage
+  template: '{{ .Name }}.storage.mesh.local'
--- MeshExternalService default/redis-cloud (stored)
+++ MeshExternalService default/redis-cloud (` + next + `)
+type: MeshExternalService
+mesh: default
+name: redis-cloud
+labels:
+  kuma.io/display-name: redis-cloud
+  kuma.io/mesh: default
+  kuma.io/origin: zone
+  kuma.io/zone: default
+spec:
+  match:
+  - type: InternalVIP
+    value: redis.svc.mesh.local
+    port: 6379
+    protocol: tcp
+  destination:
+    type: Passthrough
MeshExternalService default/redis-cloud is refused hostname redis.svc.mesh.local: hostname "redis.svc.mesh.local" is already taken by MeshService default/redis (from generator local-universal-mesh-service), which has precedence
MeshExternalService default/redis-cloud gains hostname redis-cloud.extsvc.mesh.local
MeshExternalService default/redis-cloud gains VIP 242.0.0.1
MeshExternalService default/redis-cloud gains VIP 242.0.0.2 (redis.svc.mesh.local)
MeshService default/cache gains hostname cache.svc.mesh.local
MeshService default/cache gains VIP 241.0.0.2
MeshService default/redis gains hostname redis.storage.mesh.local
`
	if out != want {
		t.Errorf("diff printed:\n%s\nwant:\n%s", out, want)
	}

	dry, stderr, err := run(t, ctx, nil, "apply", "--dry-run", "-f", next, "--server", p.api)
	if err != nil {
		t.Fatalf("apply --dry-run: %v\n%s", err, stderr)
	}
	if !strings.HasPrefix(dry, "MeshService default/redis updated (dry run)\nMeshService default/cache created (dry run)\n") ||
		!strings.Contains(dry, "MeshService default/redis gains hostname redis.storage.mesh.local\n") {
		t.Errorf("apply --dry-run printed:\n%s", dry)
	}
	// Nothing was written: the same diff again.
	if again, _, _ := run(t, ctx, nil, "diff", "-f", next, "--server", p.api); again != out {
		t.Errorf("a second diff differs: something was written\n%s", again)
	}

	// Apply, and diff again: nothing would change, exit status 0.
	if _, stderr, err := run(t, ctx, nil, "apply", "-f", next, "--server", p.api); err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	waitVIP(t, p.api, "cache")
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, _, err := run(t, ctx, nil, "diff", "-f", next, "--server", p.api)
		if exitStatus(err) == 0 && out == "No hostname or VIP would change.\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after apply, diff still shows (exit %d):\n%s", exitStatus(err), out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// exitStatus is the exit status of a command run returned err for.
func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}
