package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/zonesync"
)

// startEmbeddedGlobal runs a global control plane on its embedded store,
// its sync server on a free port.
func startEmbeddedGlobal(t *testing.T, name string) *global {
	t.Helper()
	syncAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p := start(t, name, "--mode", "global", "--sync-addr", syncAddr, "--sync-heartbeat", "300ms")
	p.waitReady(60 * time.Second)
	return &global{proc: p, syncAddr: syncAddr}
}

// startZones runs an embedded global and a zone of each name, and waits
// until every zone has received the default mesh from it.
func startZones(t *testing.T, names ...string) (*global, []*proc) {
	t.Helper()
	g := startEmbeddedGlobal(t, "global")
	var zones []*proc
	for _, z := range names {
		zones = append(zones, startZone(t, z, z, g.syncAddr, g.cliToken(t, z), t.TempDir()))
	}
	for _, z := range zones {
		waitDefaultMesh(t, z)
	}
	return g, zones
}

// waitDefaultMesh waits until zone z has received the default mesh from
// its global.
func waitDefaultMesh(t *testing.T, z *proc) {
	t.Helper()
	waitFor(t, 20*time.Second, z.name+" has the default mesh from global", func() bool {
		resp, err := http.Get(z.api + "/meshes/default")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// redisIn is a MeshService labelled app: redis with a main port 6379/tcp
// and a metrics port 9121 of the protocol given.
func redisIn(metrics string) string {
	return fmt.Sprintf(`{"type":"MeshService","name":"redis","mesh":"default","labels":{"app":"redis"},"spec":{"ports":[
		{"name":"main","port":6379,"appProtocol":"tcp"},{"name":"metrics","port":9121,"appProtocol":%q}]}}`, metrics)
}

// TestMultiZoneServices_AcrossZones: a MeshMultiZoneService written on the
// global groups the MeshServices of east and west, and north, which has
// none of them, computes its status from the copies it received: the
// services by display name and zone, the zones, the common port, the port
// the two zones disagree on left out with its condition, and its own VIP
// from 243/8 answered for its hostname. A service deleted in east leaves
// north's status.
func TestMultiZoneServices_AcrossZones(t *testing.T) {
	g := startEmbeddedGlobal(t, "global")
	zones := map[string]*proc{}
	for _, z := range []string{"east", "west", "north"} {
		zones[z] = startZone(t, z, z, g.syncAddr, g.cliToken(t, z), t.TempDir())
	}
	east, west, north := zones["east"], zones["west"], zones["north"]
	for _, z := range zones {
		waitDefaultMesh(t, z)
	}

	// The same service in two zones, whose metrics ports disagree on the
	// protocol; and the MeshMultiZoneService, on the global only.
	if code := put(t, east.api, msPath("redis"), redisIn("http")); code != http.StatusCreated {
		t.Fatalf("PUT redis in east = %d", code)
	}
	if code := put(t, west.api, msPath("redis"), redisIn("tcp")); code != http.StatusCreated {
		t.Fatalf("PUT redis in west = %d", code)
	}
	if code := put(t, g.api, "/meshes/default/meshmultizoneservices/redis", `{"type":"MeshMultiZoneService","name":"redis","mesh":"default",
		"spec":{"selector":{"meshService":{"matchLabels":{"app":"redis"}}}}}`); code != http.StatusCreated {
		t.Fatalf("PUT the MeshMultiZoneService on the global = %d", code)
	}

	// In north, everything has a global's name: the MeshMultiZoneService
	// and the two services, named after their zones. Statuses show the
	// display names; the condition names the resources.
	mzs := zonesync.HashedName(resource.MeshMultiZoneService, "default", "redis", "", "")
	eastRedis := zonesync.HashedName(resource.MeshService, "default", "redis", "east", "")
	westRedis := zonesync.HashedName(resource.MeshService, "default", "redis", "west", "")
	st := waitMultiZone(t, north.api, mzs,
		"service redis ns= zone=east mesh=default",
		"service redis ns= zone=west mesh=default",
		"zone east",
		"zone west",
		"port 6379/tcp main",
		"condition MeshServicesMatched True MatchesFound: 2 MeshServices of mesh default match",
		"condition PortsConsistent False PortsDiffer: ports not on every matched MeshService are left out: "+
			"9121/http is not on "+westRedis+" (zone west, which has 9121/tcp); "+
			"9121/tcp is not on "+eastRedis+" (zone east, which has 9121/http)",
	)

	// north's own VIP from the MeshMultiZoneService pool, answered by
	// north's DNS for the default hostname of the display name.
	deadline := time.Now().Add(15 * time.Second)
	for len(st.VIPs) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		st, _ = getMultiZone(north.api, mzs)
	}
	if len(st.VIPs) != 1 || !strings.HasPrefix(st.VIPs[0].IP, "243.") {
		t.Fatalf("north's VIPs of the MeshMultiZoneService = %+v, want one from 243.0.0.0/8", st.VIPs)
	}
	waitFor(t, 15*time.Second, "north answers redis.mzsvc.mesh.local with its VIP "+st.VIPs[0].IP, func() bool {
		return answerA(query(t, north.dns, "redis.mzsvc.mesh.local", dns.TypeA)) == st.VIPs[0].IP
	})

	// The global computes no status: its MeshMultiZoneService lists nothing.
	if gst, err := getMultiZone(g.api, "redis"); err != nil || len(gst.MeshServices) != 0 || len(gst.VIPs) != 0 {
		t.Errorf("the global's MeshMultiZoneService status = %+v (%v), want none", gst, err)
	}

	// east's service goes: north's status keeps west's alone, whose ports
	// are all common.
	if code := del(t, east.api, msPath("redis")); code != http.StatusOK {
		t.Fatalf("DELETE redis in east = %d", code)
	}
	waitMultiZone(t, north.api, mzs,
		"service redis ns= zone=west mesh=default",
		"zone west",
		"port 6379/tcp main",
		"port 9121/tcp metrics",
		"condition MeshServicesMatched True MatchesFound: 1 MeshService of mesh default matches",
	)
	if ip := answerA(query(t, north.dns, "redis.mzsvc.mesh.local", dns.TypeA)); ip != st.VIPs[0].IP {
		t.Errorf("after the change north answers redis.mzsvc.mesh.local with %q, want its VIP %s unchanged", ip, st.VIPs[0].IP)
	}
}
