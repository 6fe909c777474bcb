package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/store/postgres/pgtest"
	"github.com/meshnames/meshnames/internal/xds"
)

// TestXDS_HA: two instances on one PostgreSQL database give a proxy the
// same resources with the same versions, leader or follower; after the
// leader is killed, a proxy that reconnects to the survivor with what it
// holds gets nothing it already has, and then what changes.
func TestXDS_HA(t *testing.T) {
	url := pgtest.URL(t)
	ps := []*proc{start(t, "p0", append([]string{"--store", url}, haFlags...)...), start(t, "p1", append([]string{"--store", url}, haFlags...)...)}
	for _, p := range ps {
		p.waitReady(60 * time.Second)
	}
	leader, _ := waitLeader(t, 30*time.Second, ps...)
	follower := ps[0]
	if follower == leader {
		follower = ps[1]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	doc := `type: Dataplane
mesh: default
name: client
networking:
  address: 127.0.0.1
`
	for i := range 5 {
		doc += fmt.Sprintf(`---
type: Dataplane
mesh: default
name: web-%d
networking:
  address: 10.0.0.%d
  inbound:
  - port: 8080
    tags:
      kuma.io/service: web-%d
      kuma.io/protocol: http
`, i, i+1, i%2)
	}
	if _, stderr, err := run(t, ctx, []byte(doc), "apply", "-f", "-", "--server", follower.api); err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	waitVIP(t, leader.api, "web-0")
	waitVIP(t, leader.api, "web-1")

	// Both instances give the same versions (content hashes).
	var onLeader, onFollower map[string]map[string]string
	eventually(t, "the same config on leader and follower", 30*time.Second, func() bool {
		onLeader, _ = deltaState(t, leader.xds, "default.client", nil, 300*time.Millisecond)
		onFollower, _ = deltaState(t, follower.xds, "default.client", nil, 300*time.Millisecond)
		return len(onLeader[xds.ListenerURL]) == 2 && cmp.Equal(onLeader, onFollower)
	})
	if d := cmp.Diff(onLeader, onFollower); d != "" {
		t.Fatalf("leader and follower differ (-leader +follower):\n%s", d)
	}

	// The leader dies; the proxy reconnects to the survivor with what it
	// holds: identical versions, so nothing is sent again.
	leader.kill()
	again, n := deltaState(t, follower.xds, "default.client", onLeader, time.Second)
	if n != 0 || !cmp.Equal(again, onLeader) {
		t.Errorf("reconnect to the survivor with current versions got %d resources; state (-before +after):\n%s", n, cmp.Diff(onLeader, again))
	}
	// A change after the failover reaches it, from the new leader's naming.
	if code, err := putService(ctx, follower.api, "after", 80); err != nil || code >= 300 {
		t.Fatalf("PUT after = %d, %v", code, err)
	}
	waitVIP(t, follower.api, "after")
	eventually(t, "the new service reaches the proxy", 30*time.Second, func() bool {
		st, _ := deltaState(t, follower.xds, "default.client", onLeader, 300*time.Millisecond)
		_, ok := st[xds.ListenerURL]["outbound:after_msvc_80"]
		return ok
	})
}
