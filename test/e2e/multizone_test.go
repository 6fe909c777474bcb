package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/dnsserver"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/pebble"
	"github.com/meshnames/meshnames/internal/store/postgres"
	"github.com/meshnames/meshnames/internal/store/postgres/pgtest"
	"github.com/meshnames/meshnames/internal/token"
	"github.com/meshnames/meshnames/internal/zonesync"
)

// global is a global control plane on PostgreSQL: the test reads its sync
// certificate and signs zone tokens with its keys from the same database.
type global struct {
	*proc
	url, syncAddr string
}

func startGlobal(t *testing.T, name, url, syncAddr string) *global {
	t.Helper()
	if syncAddr == "" {
		syncAddr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	}
	p := start(t, name, "--mode", "global", "--store", url, "--sync-addr", syncAddr, "--sync-heartbeat", "300ms")
	p.waitReady(60 * time.Second)
	return &global{proc: p, url: url, syncAddr: syncAddr}
}

// zoneToken signs a token for zone, valid from issued for validFor, with
// the global's keys and the pin of its sync certificate, as meshnames
// token zone does.
func (g *global) zoneToken(t *testing.T, zone string, issued time.Time, validFor time.Duration, pin string) string {
	t.Helper()
	ctx := context.Background()
	st, err := postgres.Open(ctx, g.url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	keys, err := token.LoadKeys(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if pin == "" {
		tlsm, err := zonesync.LoadGlobalTLS(ctx, st, "", "")
		if err != nil {
			t.Fatal(err)
		}
		pin = tlsm.Pin
	}
	raw, err := keys.Sign(token.Claims{Subject: "zone " + zone, Role: token.RoleZone, Zone: zone, SyncPin: pin,
		IssuedAt: issued, ExpiresAt: issued.Add(validFor)})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), zone+".token")
	if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startZone runs a zone of g reaching it at syncAddr (the global's, or a
// proxy's) with its data in dataDir.
// cliToken issues a zone token with meshnames token zone on the global.
func (g *global) cliToken(t *testing.T, zone string) string {
	t.Helper()
	out, errOut, err := run(t, context.Background(), nil, "token", "zone", "--zone", zone, "--server", g.api)
	if err != nil {
		t.Fatalf("token zone --zone %s: %v\n%s", zone, err, errOut)
	}
	path := filepath.Join(t.TempDir(), zone+".token")
	if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func startZone(t *testing.T, name, zone, syncAddr, tokenFile, dataDir string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"--mode", "zone", "--zone", zone, "--data-dir", dataDir,
		"--global-address", "grpcs://" + syncAddr, "--zone-token-file", tokenFile, "--sync-heartbeat", "300ms"}, extra...)
	p := start(t, name, args...)
	p.waitReady(60 * time.Second)
	return p
}

func put(t *testing.T, api, path, body string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, api+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Logf("PUT %s: %d %s", path, resp.StatusCode, b)
	}
	return resp.StatusCode
}

func del(t *testing.T, api, path string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, api+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitFor polls cond until it holds, failing after timeout with what.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lookup returns the A answer of name from a zone's DNS, or "" for
// NXDOMAIN.
func lookup(t *testing.T, z *proc, name string) string {
	t.Helper()
	r := query(t, z.dns, name, dns.TypeA)
	return answerA(r)
}

func waitAnswer(t *testing.T, z *proc, name string) string {
	t.Helper()
	var ip string
	waitFor(t, 20*time.Second, z.name+" answers "+name, func() bool { ip = lookup(t, z, name); return ip != "" })
	return ip
}

func waitNoAnswer(t *testing.T, z *proc, name string) {
	t.Helper()
	waitFor(t, 20*time.Second, z.name+" stops answering "+name, func() bool { return lookup(t, z, name) == "" })
}

func insight(t *testing.T, g *proc, zone string) api.ZoneInsight {
	t.Helper()
	resp, err := http.Get(g.api + "/zones/" + zone + "/_insight")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var in api.ZoneInsight
	if resp.StatusCode != http.StatusOK {
		return in
	}
	if err := json.NewDecoder(resp.Body).Decode(&in); err != nil {
		t.Fatal(err)
	}
	return in
}

func service(name string, port int, export string) string {
	spec := fmt.Sprintf(`"ports":[{"port":%d}]`, port)
	if export != "" {
		spec += fmt.Sprintf(`,"export":{"mode":%q}`, export)
	}
	return fmt.Sprintf(`{"type":"MeshService","name":%q,"mesh":"default","spec":{%s}}`, name, spec)
}

func msPath(name string) string { return "/meshes/default/meshservices/" + name }

// TestMultizone runs a global on PostgreSQL and three zones as real
// processes: west reaches the global through a TCP proxy the test cuts.
func TestMultizone(t *testing.T) {
	url := pgtest.URL(t)
	g := startGlobal(t, "global", url, "")
	proxy := pgtest.StartProxy(t, "tcp://"+g.syncAddr)
	proxyAddr := strings.TrimPrefix(proxy.URL, "tcp://")
	dirs := map[string]string{"east": t.TempDir(), "west": t.TempDir(), "north": t.TempDir()}
	tokens := map[string]string{}
	for z := range dirs {
		tokens[z] = g.cliToken(t, z)
	}
	// north starts with services its store holds without status, as after
	// a restore or an upgrade: it names them before it connects, and the
	// global receives each once, named. They are not exported, so that
	// the other zones' pools are the test's own.
	const seeded = 1000
	seedUnnamed(t, dirs["north"], "north", seeded)
	east := startZone(t, "east", "east", g.syncAddr, tokens["east"], dirs["east"])
	west := startZone(t, "west", "west", proxyAddr, tokens["west"], dirs["west"])
	north := startZone(t, "north", "north", g.syncAddr, tokens["north"], dirs["north"])
	// south's pool has two addresses, so that quarantine shows.
	south := startZone(t, "south", "south", g.syncAddr, g.cliToken(t, "south"), t.TempDir(), "--vip-cidr-mesh-service", "10.20.0.0/30")
	for _, z := range []*proc{east, west, north, south} {
		waitDefaultMesh(t, z)
	}
	for i := range seeded {
		path := msPath(zonesync.HashedName(resource.MeshService, "default", seededName(i), "north", ""))
		var etag, body string
		waitFor(t, 30*time.Second, "the global has north's "+seededName(i), func() bool {
			resp, err := http.Get(g.api + path)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			etag, body = resp.Header.Get("ETag"), string(b)
			return resp.StatusCode == http.StatusOK && err == nil
		})
		if etag != `"1"` || !strings.Contains(body, `"addresses"`) || !strings.Contains(body, `"vips"`) {
			t.Errorf("the global's copy of north's %s: ETag %s, %s; want version 1 with addresses and VIPs (sent once, named)",
				seededName(i), etag, body)
		}
	}
	// The global holds north's statuses, north's VIPs in them, and answers
	// none of their names: an address a zone allocated means something
	// only in that zone. Its _dns listing says so for each name.
	seed0 := seededName(0) + ".svc.mesh.local."
	if r := query(t, g.dns, seed0, dns.TypeA); answerA(r) != "" || r.Rcode != dns.RcodeNameError {
		t.Errorf("the global answers %s: rcode %s, A %q; want NXDOMAIN", seed0, dns.RcodeToString[r.Rcode], answerA(r))
	}
	if l := listing(t, g.api); len(l.Names) != 0 || !slices.ContainsFunc(l.NotAnswered, func(n api.DNSNotAnswer) bool {
		return n.Name == seed0 && n.Reason == dnsserver.GlobalAnswersNoNames
	}) {
		t.Errorf("the global's _dns listing: %d names, and %s not listed as not answered with the global's reason", len(l.Names), seed0)
	}
	// Besides them, north sends what west sends: the zone's default
	// HostnameGenerators.
	if in, base := insight(t, g.proc, "north"), insight(t, g.proc, "west"); in.Received.Resources != seeded+base.Received.Resources {
		t.Errorf("the global received %d resources from north, want %d: each seeded service once, and what west sent (%d)",
			in.Received.Resources, seeded+base.Received.Resources, base.Received.Resources)
	}

	// A service of east is named and answered in the other zones.
	if code := put(t, east.api, msPath("redis"), service("redis", 6379, "")); code != http.StatusCreated {
		t.Fatalf("PUT redis in east = %d", code)
	}
	waitAnswer(t, west, "redis.svc.east.mesh.local")
	waitAnswer(t, north, "redis.svc.east.mesh.local")
	if ip := lookup(t, east, "redis.svc.east.mesh.local"); ip != "" {
		t.Errorf("east answers its own service under the synced name: %s", ip)
	}
	waitAnswer(t, east, "redis.svc.mesh.local")

	// Synced resources are read-only to the receiving zone's users.
	synced := zonesync.HashedName(resource.MeshService, "default", "redis", "east", "")
	if code := put(t, west.api, msPath(synced), service(synced, 1, "")); code != http.StatusConflict {
		t.Errorf("PUT of a synced service in west = %d, want 409", code)
	}
	if code := del(t, west.api, msPath(synced)); code != http.StatusConflict {
		t.Errorf("DELETE of a synced service in west = %d, want 409", code)
	}

	// Export None stays home, and the receiving zone's VIP goes into
	// quarantine: south's pool has two addresses, so that it shows.
	waitAnswer(t, south, "redis.svc.east.mesh.local")
	redisSouth := waitVIP(t, south.api, zonesync.HashedName(resource.MeshService, "default", "redis", "east", ""))
	// A zone stores a service it receives together with the names its
	// controllers decide for it: one write, so version 1.
	if resp, err := http.Get(south.api + msPath(zonesync.HashedName(resource.MeshService, "default", "redis", "east", ""))); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
		if etag := resp.Header.Get("ETag"); etag != `"1"` {
			t.Errorf("south's copy of redis has ETag %s, want \"1\": created with its status in one write", etag)
		}
	}
	if code := put(t, south.api, msPath("filler"), service("filler", 80, "")); code != http.StatusCreated {
		t.Fatalf("PUT filler in south = %d", code)
	}
	waitVIP(t, south.api, "filler")
	if code := put(t, east.api, msPath("redis"), service("redis", 6379, "None")); code != http.StatusOK {
		t.Fatalf("PUT redis export None = %d", code)
	}
	waitNoAnswer(t, south, "redis.svc.east.mesh.local")
	waitNoAnswer(t, north, "redis.svc.east.mesh.local")
	if code := put(t, south.api, msPath("late"), service("late", 80, "")); code != http.StatusCreated {
		t.Fatalf("PUT late in south = %d", code)
	}
	waitFor(t, 20*time.Second, "late waits for an address (PoolExhausted)", func() bool {
		resp, err := http.Get(south.api + msPath("late"))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var doc struct {
			Status struct {
				VIPs       []struct{ IP string }     `json:"vips"`
				Conditions []struct{ Reason string } `json:"conditions"`
			} `json:"status"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&doc)
		for _, v := range doc.Status.VIPs {
			if v.IP == redisSouth {
				t.Fatalf("late got %s, the VIP redis had in south, inside its quarantine", v.IP)
			}
		}
		return len(doc.Status.Conditions) > 0 && doc.Status.Conditions[0].Reason == "PoolExhausted"
	})
	// The global keeps the unexported service, marked None.
	resp, err := http.Get(g.api + msPath(zonesync.HashedName(resource.MeshService, "default", "redis", "east", "")))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"mode":"None"`) {
		t.Errorf("the global's copy of the unexported redis: %d %s", resp.StatusCode, b)
	}

	if code := put(t, east.api, msPath("redis"), service("redis", 6379, "All")); code != http.StatusOK {
		t.Fatalf("PUT redis export All = %d", code)
	}
	waitAnswer(t, north, "redis.svc.east.mesh.local")

	// A zone's own generator beats a synced one for the same name: west
	// names its local service like east's redis, created later.
	put(t, west.api, "/hostnamegenerators/west-first", `{"type":"HostnameGenerator","name":"west-first","spec":{
		"selector":{"meshService":{"matchLabels":{"kuma.io/origin":"zone","team":"cache"}}},
		"template":"redis.svc.east.mesh.local"}}`)
	waitAnswer(t, north, "redis.svc.east.mesh.local")
	if code := put(t, west.api, msPath("impostor"), `{"type":"MeshService","name":"impostor","mesh":"default","labels":{"team":"cache"},"spec":{"ports":[{"port":1}]}}`); code != http.StatusCreated {
		t.Fatalf("PUT impostor = %d", code)
	}
	impostor := waitVIP(t, west.api, "impostor")
	waitFor(t, 20*time.Second, "west answers redis.svc.east.mesh.local with its own service's VIP", func() bool {
		return lookup(t, west, "redis.svc.east.mesh.local") == impostor
	})

	// Deletion propagates.
	if code := put(t, east.api, msPath("gone"), service("gone", 80, "")); code != http.StatusCreated {
		t.Fatalf("PUT gone = %d", code)
	}
	waitAnswer(t, north, "gone.svc.east.mesh.local")
	del(t, east.api, msPath("gone"))
	waitNoAnswer(t, north, "gone.svc.east.mesh.local")

	// What a zone accepts, the global and the other zones accept: a
	// Dataplane named with the longest DNS subdomain of four labels, whose
	// display name is too long for a label (shortened alike everywhere),
	// and a MeshService named with the longest label. (South, whose pool
	// is full by now, is left out.)
	longest(t, g.proc, east, west, north)

	// A partition of west's stream: it goes offline, changes wait, and
	// healing resumes the stream without a full state.
	before := insight(t, g.proc, "west")
	proxy.Cut()
	waitFor(t, 20*time.Second, "west offline on the global", func() bool { return !insight(t, g.proc, "west").Online })
	put(t, east.api, msPath("during"), service("during", 80, ""))
	waitAnswer(t, north, "during.svc.east.mesh.local")
	if ip := lookup(t, west, "redis.svc.east.mesh.local"); ip == "" {
		t.Error("west stopped answering what it knew while cut off")
	}
	proxy.Restore()
	waitAnswer(t, west, "during.svc.east.mesh.local")
	after := insight(t, g.proc, "west")
	if after.Streams <= before.Streams || after.Sent.Snapshots != 0 {
		t.Errorf("west after the partition: %d streams (before %d), %d full states; want a new stream and none", after.Streams, before.Streams, after.Sent.Snapshots)
	}
	if after.Sent.Resources > 5 {
		t.Errorf("west got %d resources on resuming, want only what changed", after.Sent.Resources)
	}

	// kill -9 of the global loses nothing: a change made while it is down
	// arrives after it restarts, and no zone needs a full state.
	g.kill()
	put(t, east.api, msPath("while-down"), service("while-down", 80, ""))
	g = startGlobal(t, "global-2", url, g.syncAddr)
	waitAnswer(t, north, "while-down.svc.east.mesh.local")
	waitAnswer(t, west, "while-down.svc.east.mesh.local")
	for _, z := range []string{"east", "west", "north"} {
		if in := insight(t, g.proc, z); in.Sent.Snapshots != 0 || in.Received.Snapshots != 0 {
			t.Errorf("%s after the global's restart: %d/%d full states, want none", z, in.Sent.Snapshots, in.Received.Snapshots)
		}
	}

	// kill -9 of a zone loses nothing: what it created and acknowledged
	// reaches the others, and it answers what it had received at once.
	put(t, north.api, msPath("northern"), service("northern", 80, ""))
	waitAnswer(t, east, "northern.svc.north.mesh.local")
	north.kill()
	north = startZone(t, "north-2", "north", g.syncAddr, tokens["north"], dirs["north"])
	if ip := lookup(t, north, "during.svc.east.mesh.local"); ip == "" {
		t.Error("north lost a name it had received across its restart")
	}
	put(t, north.api, msPath("after-restart"), service("after-restart", 80, ""))
	waitAnswer(t, west, "after-restart.svc.north.mesh.local")

	// A zone whose store lost a service it had received, behind its
	// stream's back, gets it back: the stream resumes from the zone's
	// position, the global's inventory names one more service than the
	// zone holds, and the zone asks for a full state.
	north.kill()
	damage, err := pebble.Open(dirs["north"])
	if err != nil {
		t.Fatal(err)
	}
	lost := resource.Key{Kind: resource.MeshService, Mesh: "default", Name: zonesync.HashedName(resource.MeshService, "default", "during", "east", "")}
	if _, err := store.Delete(context.Background(), damage, lost, 0); err != nil {
		t.Fatal(err)
	}
	if err := damage.Close(); err != nil {
		t.Fatal(err)
	}
	north = startZone(t, "north-3", "north", g.syncAddr, tokens["north"], dirs["north"])
	waitAnswer(t, north, "during.svc.east.mesh.local")
	if in := insight(t, g.proc, "north"); in.Sent.Snapshots != 1 {
		t.Errorf("north after its store lost a service: %d full states, want 1", in.Sent.Snapshots)
	}
	north.waitLog(t, " peer=global resources=", 30*time.Second) // the next inventory agrees

	out, errOut, err := run(t, context.Background(), nil, "get", "zones", "--server", g.api)
	if err != nil || !strings.Contains(out, "online") {
		t.Errorf("get zones: %v\n%s%s", err, out, errOut)
	}
	t.Logf("meshnames get zones:\n%s", out)
}

// longest writes in zone a Dataplane with a 250-character name and an
// exported MeshService with a 63-character name, and waits until the
// global holds both under their synced names, with the shortened display
// name on the Dataplane, and the others answer the service's synced name.
func longest(t *testing.T, g, zone *proc, others ...*proc) {
	t.Helper()
	dpName := strings.Repeat("a", 61) + "." + strings.Repeat("b", 62) + "." + strings.Repeat("c", 62) + "." + strings.Repeat("d", 62)
	svcName := "l" + strings.Repeat("o", 61) + "g"
	dp := fmt.Sprintf(`{"type":"Dataplane","name":%q,"mesh":"default","spec":{"networking":{"address":"10.9.0.1","inbound":[{"port":8080,"tags":{"kuma.io/service":"long"}}]}}}`, dpName)
	if code := put(t, zone.api, "/meshes/default/dataplanes/"+dpName, dp); code != http.StatusCreated {
		t.Fatalf("PUT the 250-character Dataplane in %s = %d", zone.name, code)
	}
	if code := put(t, zone.api, msPath(svcName), service(svcName, 7000, "")); code != http.StatusCreated {
		t.Fatalf("PUT the 63-character MeshService in %s = %d", zone.name, code)
	}
	zoneName := zone.name // each zone's process is named after its zone
	dpPath := "/meshes/default/dataplanes/" + zonesync.HashedName(resource.Dataplane, "default", dpName, zoneName, "")
	var got resource.Object
	waitFor(t, 30*time.Second, "the global has "+zoneName+"'s 250-character Dataplane", func() bool {
		return getObject(g.api+dpPath, &got) == nil
	})
	if d := got.Labels[resource.LabelDisplayName]; d != resource.DisplayName(dpName) || len(d) > 63 {
		t.Errorf("the global's copy of the Dataplane has display name %q, want %q", d, resource.DisplayName(dpName))
	}
	synced := zonesync.HashedName(resource.MeshService, "default", svcName, zoneName, "")
	waitFor(t, 30*time.Second, "the global has "+zoneName+"'s 63-character MeshService", func() bool {
		return getObject(g.api+msPath(synced), &got) == nil
	})
	if d := got.Labels[resource.LabelDisplayName]; d != svcName {
		t.Errorf("the global's copy of the MeshService has display name %q, want %q", d, svcName)
	}
	// The global computes no hostnames: its inspection shows the names
	// the zone gives the service, and none it would render itself
	// (<name>-<hash>.svc.mesh.local, which no zone gives it).
	var report api.HostnamesReport
	waitFor(t, 30*time.Second, "the global's inspection shows the name "+zoneName+" gives "+svcName, func() bool {
		resp, err := http.Get(g.api + msPath(synced) + "/_hostnames")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&report) == nil &&
			slices.ContainsFunc(report.Items, func(it api.HostnameOutcome) bool { return it.Hostname == svcName+".svc.mesh.local" })
	})
	for _, it := range report.Items {
		if it.Zone != zoneName || strings.Contains(it.Hostname, synced) {
			t.Errorf("the global's inspection of %s shows %+v: want only names %s gives it", synced, it, zoneName)
		}
	}
	out, errOut, err := run(t, context.Background(), nil, "inspect", "hostnames", "meshservice", synced, "--server", g.api)
	if err != nil || !strings.HasPrefix(out, "ZONE") || !strings.Contains(out, svcName+".svc.mesh.local") || strings.Contains(out, synced+".") {
		t.Errorf("inspect hostnames on the global: %v\n%s%s", err, out, errOut)
	}
	for _, o := range others {
		waitAnswer(t, o, svcName+".svc."+zoneName+".mesh.local")
	}
}

// getObject reads the resource at url into obj.
func getObject(url string, obj *resource.Object) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(obj)
}

func seededName(i int) string { return fmt.Sprintf("seeded-%d", i) }

// seedUnnamed stores mesh default (as the global's sync would have) and n
// MeshServices of zone without status in the embedded store in dir, as
// a restore or an upgrade leaves them.
func seedUnnamed(t *testing.T, dir, zone string, n int) {
	t.Helper()
	st, err := pebble.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ops := []store.Op{{Type: store.OpCreate, Object: &resource.Object{Kind: resource.Mesh, Name: "default",
		Labels: map[string]string{resource.LabelOrigin: resource.OriginGlobal}, Spec: &resource.MeshSpec{}}}}
	adm := admission.New(admission.Options{Mode: resource.ModeZone, Zone: zone})
	for i := range n {
		obj := &resource.Object{Kind: resource.MeshService, Mesh: "default", Name: seededName(i), Spec: &resource.MeshServiceSpec{
			Ports:  []resource.Port{{Port: 80, AppProtocol: "http"}},
			Export: &resource.Export{Mode: resource.ExportNone},
		}}
		if errs := adm.Admit(obj, admission.Writer{Source: admission.User}); len(errs) > 0 {
			t.Fatal(errs)
		}
		ops = append(ops, store.Op{Type: store.OpCreate, Object: obj})
	}
	rs, err := st.Apply(context.Background(), ops...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
}
