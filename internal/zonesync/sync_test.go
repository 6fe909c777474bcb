package zonesync

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	pb "github.com/meshnames/meshnames/api/zonesync/v1"
	"github.com/meshnames/meshnames/internal/hostnames"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/token"
)

// federation is a global with the default mesh and generators, and zones.
type federation struct {
	global *cp
	g      *Global
	addr   string
	pin    string
	zones  map[string]*cp
	runs   map[string]*zoneRunner
}

func newFederation(t *testing.T, zones ...string) *federation {
	t.Helper()
	f := &federation{global: newCP(t, "global"), zones: map[string]*cp{}, runs: map[string]*zoneRunner{}}
	f.global.put(&resource.Object{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}}, resource.ModeGlobal, "")
	if err := hostnames.EnsureDefaults(context.Background(), f.global.st, resource.ModeGlobal, "", f.global.log); err != nil {
		t.Fatal(err)
	}
	f.g, f.addr, f.pin = runGlobal(t, f.global)
	for _, z := range zones {
		f.zones[z] = newCP(t, z)
		f.start(z)
	}
	for _, z := range zones {
		f.zones[z].eventually("the default mesh", resource.Key{Kind: resource.Mesh, Name: "default"}, exists)
	}
	return f
}

func (f *federation) start(zone string) {
	t := f.zones[zone].t
	f.runs[zone] = runZone(t, f.zones[zone], zone, f.addr, writeToken(t, zoneToken(t, f.global, zone, f.pin)))
}

// stop stops zone's client and waits until the global saw it go.
func (f *federation) stop(zone string) {
	f.runs[zone].stop()
	f.global.waitLog(`msg="zone disconnected" zone=` + zone)
}

func (f *federation) insight(t *testing.T, zone string) (in struct {
	Online                       bool
	SentResources, SentSnapshots int64
	ReceivedResources, Refused   int64
}) {
	t.Helper()
	i, err := f.g.Insight(context.Background(), zone)
	if err != nil {
		t.Fatal(err)
	}
	in.Online, in.SentResources, in.SentSnapshots = i.Online, i.Sent.Resources, i.Sent.Snapshots
	in.ReceivedResources, in.Refused = i.Received.Resources, i.Refused
	return in
}

// waitAcked waits until zone has acknowledged everything the global's
// store holds now.
func (f *federation) waitAcked(t *testing.T, zone string) {
	t.Helper()
	_, rev, err := f.global.st.List(context.Background(), resource.Mesh)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		in, err := f.g.Insight(context.Background(), zone)
		if err != nil {
			t.Fatal(err)
		}
		if in.Sent.Acked >= rev {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s acknowledged revision %d, not %d, within 10s", zone, in.Sent.Acked, rev)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSync_ServiceReachesOtherZones walks the design record's example: a
// service of east reaches the global with its status and west without,
// renamed and relabelled, never back to east; export None, a disabled zone
// and a deletion take it away from west.
func TestSync_ServiceReachesOtherZones(t *testing.T) {
	f := newFederation(t, "east", "west")
	east, west, global := f.zones["east"], f.zones["west"], f.global

	gen := resource.Key{Kind: resource.HostnameGenerator, Name: HashedName(resource.HostnameGenerator, "", "synced-universal-mesh-service", "", "")}
	west.eventually("the global's generator, renamed", gen, func(o *resource.Object) bool {
		return o != nil && o.Labels[resource.LabelOrigin] == resource.OriginGlobal && o.Labels[resource.LabelDisplayName] == "synced-universal-mesh-service"
	})

	ms := east.put(meshService("default", "redis", 6379), resource.ModeZone, "east")
	ms.Status = &resource.ServiceStatus{VIPs: []resource.VIP{{IP: "241.0.0.1", Type: "Kuma"}}}
	if _, err := store.UpdateStatus(context.Background(), east.st, ms); err != nil {
		t.Fatal(err)
	}
	synced := msKey("default", HashedName(resource.MeshService, "default", "redis", "east", ""))
	got := global.eventually("east's service with east's status", synced, func(o *resource.Object) bool {
		return o != nil && o.Status != nil && len(o.Status.(*resource.ServiceStatus).VIPs) == 1
	})
	for k, want := range map[string]string{
		resource.LabelOrigin: resource.OriginZone, resource.LabelZone: "east", resource.LabelDisplayName: "redis", resource.LabelEnv: resource.EnvUniversal,
	} {
		if got.Labels[k] != want {
			t.Errorf("global: label %s = %q, want %q", k, got.Labels[k], want)
		}
	}
	if e := got.Spec.(*resource.MeshServiceSpec).Export; e == nil || e.Mode != resource.ExportAll {
		t.Errorf("global: spec.export = %+v, want the zone's default All", e)
	}
	got = west.eventually("east's service without status", synced, exists)
	if got.Status != nil || got.Labels[resource.LabelOrigin] != resource.OriginGlobal || got.Labels[resource.LabelZone] != "east" || got.Labels[resource.LabelDisplayName] != "redis" {
		t.Errorf("west holds %s", describe(got))
	}
	if _, err := east.st.Get(context.Background(), synced); err == nil {
		t.Errorf("east got its own service back as %s", synced.Name)
	}

	// Export None keeps it home: the global still holds it, west loses it.
	ms = east.put(meshService("default", "redis", 6379), resource.ModeZone, "east")
	ms.Spec.(*resource.MeshServiceSpec).Export = &resource.Export{Mode: resource.ExportNone}
	east.put(ms, resource.ModeZone, "east")
	west.eventually("the service after export None", synced, absent)
	global.eventually("the unexported service, marked None", synced, func(o *resource.Object) bool {
		return o != nil && o.Spec.(*resource.MeshServiceSpec).Export.Mode == resource.ExportNone
	})
	ms.Spec.(*resource.MeshServiceSpec).Export = &resource.Export{Mode: resource.ExportAll}
	east.put(ms, resource.ModeZone, "east")
	west.eventually("the service exported again", synced, exists)

	// A disabled zone's services leave the other zones.
	off := false
	global.put(&resource.Object{Kind: resource.Zone, Name: "east", Spec: &resource.ZoneSpec{Enabled: &off}}, resource.ModeGlobal, "")
	west.eventually("the service of a disabled zone", synced, absent)
	global.put(&resource.Object{Kind: resource.Zone, Name: "east", Spec: &resource.ZoneSpec{}}, resource.ModeGlobal, "")
	west.eventually("the service of the zone enabled again", synced, exists)

	east.delete(msKey("default", "redis"))
	global.eventually("the deleted service", synced, absent)
	west.eventually("the deleted service", synced, absent)
	if in := f.insight(t, "east"); !in.Online || in.Refused != 0 {
		t.Errorf("east's insight: %+v", in)
	}
}

// TestSync_ResumesWithoutFullState: a zone that reconnects gets only what
// changed while it was away.
func TestSync_ResumesWithoutFullState(t *testing.T) {
	f := newFederation(t, "east", "west")
	east, west := f.zones["east"], f.zones["west"]
	for _, n := range []string{"a", "b", "c", "d"} {
		east.put(meshService("default", n, 80), resource.ModeZone, "east")
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		west.eventually("east's services", msKey("default", HashedName(resource.MeshService, "default", n, "east", "")), exists)
	}
	f.waitAcked(t, "west")
	west.waitLogs(heldAll("global"), 1)
	f.global.waitLogs(heldAll("west"), 1)
	f.stop("west")
	east.put(meshService("default", "e", 80), resource.ModeZone, "east")
	east.delete(msKey("default", "a"))
	f.global.eventually("east's deletion", msKey("default", HashedName(resource.MeshService, "default", "a", "east", "")), absent)
	f.start("west")
	west.eventually("the service created meanwhile", msKey("default", HashedName(resource.MeshService, "default", "e", "east", "")), exists)
	west.eventually("the service deleted meanwhile", msKey("default", HashedName(resource.MeshService, "default", "a", "east", "")), absent)
	// Both ends compared their inventories on each stream, and agreed.
	west.waitLogs(heldAll("global"), 2)
	f.global.waitLogs(heldAll("west"), 2)
	in := f.insight(t, "west")
	if in.SentSnapshots != 0 {
		t.Errorf("west got %d full states, want none", in.SentSnapshots)
	}
	// What changed: e's creation, a's deletion; nothing of b, c, d, the mesh or the generators.
	if in.SentResources > 2 {
		t.Errorf("west got %d resources on resuming, want the 2 that changed", in.SentResources)
	}
}

// TestSync_ResumeSendsACreationAndItsDeletionAsOne: a service created and
// deleted in east while west was away reaches the global's shared window
// in two reads (east's stream follows the global's feed), so west, resuming
// from before both and more than a page behind (its first read is the
// store's, the next ones the window's), reads them in one page: its batch
// must carry only the deletion. A batch that held both (a receiver applies a batch's puts
// over its deletions) left west holding the service, which only a full
// state repaired (TestZonePartitions, long).
func TestSync_ResumeSendsACreationAndItsDeletionAsOne(t *testing.T) {
	f := newFederation(t, "east", "west")
	east, west := f.zones["east"], f.zones["west"]
	east.put(meshService("default", "a", 80), resource.ModeZone, "east")
	west.eventually("east's service", msKey("default", HashedName(resource.MeshService, "default", "a", "east", "")), exists)
	f.waitAcked(t, "west")
	west.waitLogs(heldAll("global"), 1)
	f.stop("west")

	for i := range pageSize {
		east.put(meshService("default", fmt.Sprintf("more-%d", i), 80), resource.ModeZone, "east")
	}
	brief := msKey("default", HashedName(resource.MeshService, "default", "brief", "east", ""))
	east.put(meshService("default", "brief", 80), resource.ModeZone, "east")
	f.global.eventually("east's new service", brief, exists)
	f.waitAcked(t, "east") // east's stream read the creation
	east.delete(msKey("default", "brief"))
	f.global.eventually("east's deletion", brief, absent)
	f.waitAcked(t, "east") // and, in a read of its own, the deletion

	f.start("west")
	west.waitLogs(heldAll("global"), 2) // resumed, and its inventory agrees
	if got, err := west.st.Get(context.Background(), brief); err == nil {
		t.Errorf("west holds %s, created and deleted while it was away", describe(got))
	}
	if in := f.insight(t, "west"); in.SentSnapshots != 0 {
		t.Errorf("west needed %d full states to agree with the global, want none", in.SentSnapshots)
	}
}

// heldAll is the log line of a receiver that holds what peer's inventory
// names.
func heldAll(peer string) string {
	return ` peer=` + peer + ` resources=` // only that line has both
}

// TestSync_InventoryRepairsWhatAZoneLost: a zone whose store lost a service
// it got from the global, and holds one the global no longer sends (as
// after a restore from an older backup), resumes from its position, finds
// that it does not hold what the global's inventory names, and gets a full
// state that repairs both.
func TestSync_InventoryRepairsWhatAZoneLost(t *testing.T) {
	f := newFederation(t, "east", "west")
	east, west := f.zones["east"], f.zones["west"]
	for _, n := range []string{"a", "b", "c"} {
		east.put(meshService("default", n, 80), resource.ModeZone, "east")
	}
	lost := msKey("default", HashedName(resource.MeshService, "default", "b", "east", ""))
	west.eventually("east's service", lost, exists)
	west.eventually("east's last service", msKey("default", HashedName(resource.MeshService, "default", "c", "east", "")), exists)
	f.waitAcked(t, "west")
	west.waitLogs(heldAll("global"), 1)
	f.stop("west")

	// Damage west's store behind the stream's back.
	if _, err := store.Delete(context.Background(), west.st, lost, 0); err != nil {
		t.Fatal(err)
	}
	ghost := meshService("default", HashedName(resource.MeshService, "default", "ghost", "east", ""), 80)
	ghost.Labels = map[string]string{resource.LabelOrigin: resource.OriginGlobal, resource.LabelZone: "east", resource.LabelDisplayName: "ghost"}
	if _, err := store.Create(context.Background(), west.st, ghost); err != nil {
		t.Fatal(err)
	}

	f.start("west")
	west.waitLog(`msg="what this side holds of the peer's differs from the peer's inventory; asking for a full state" peer=global`)
	west.eventually("the lost service, from the full state", lost, exists)
	west.eventually("the service the global does not send, deleted by the full state", ghost.Key(), absent)
	west.waitLogs(heldAll("global"), 2) // the next stream's check agrees
	if in := f.insight(t, "west"); in.SentSnapshots != 1 {
		t.Errorf("west got %d full states, want 1", in.SentSnapshots)
	}
}

// westHoldsEastsServices starts a federation of east and west in which
// west holds, and has acknowledged, east's services a and b; lost is b's
// key on west, for a test to take from west's store.
func westHoldsEastsServices(t *testing.T) (f *federation, east, west *cp, lost resource.Key) {
	t.Helper()
	f = newFederation(t, "east", "west")
	east, west = f.zones["east"], f.zones["west"]
	east.put(meshService("default", "a", 80), resource.ModeZone, "east")
	east.put(meshService("default", "b", 80), resource.ModeZone, "east")
	lost = msKey("default", HashedName(resource.MeshService, "default", "b", "east", ""))
	west.eventually("east's service", lost, exists)
	f.waitAcked(t, "west")
	return f, east, west, lost
}

// TestSync_InventoryAfterEveryBurst: a zone that loses a service it got
// from the global while its stream stays up (nothing reconnects) is
// repaired once the next change it gets settles: the sender takes an
// inventory after every burst of changes, not once per stream, but not
// sooner than inventoryEvery heartbeats after the last one.
func TestSync_InventoryAfterEveryBurst(t *testing.T) {
	f, east, west, lost := westHoldsEastsServices(t)
	west.waitLogs(heldAll("global"), 1)
	first := time.Now()

	// Damage west's store behind the live stream's back.
	if _, err := store.Delete(context.Background(), west.st, lost, 0); err != nil {
		t.Fatal(err)
	}
	west.eventually("the service deleted behind the stream", lost, absent)
	east.put(meshService("default", "c", 80), resource.ModeZone, "east")
	west.eventually("east's next service", msKey("default", HashedName(resource.MeshService, "default", "c", "east", "")), exists)
	west.waitLog(`msg="what this side holds of the peer's differs from the peer's inventory; asking for a full state" peer=global`)
	// The first inventory was logged before first (by the poll's 10 ms,
	// or more on a loaded machine: half the bound is left for that).
	if apart, least := time.Since(first), inventoryEvery*testHeartbeat/2; apart < least {
		t.Errorf("the second inventory came %s after the first, want at least %s", apart, least)
	}
	west.eventually("the lost service, from the full state", lost, exists)
	west.waitLogs(heldAll("global"), 2) // the check after the repair agrees
	in := f.insight(t, "west")
	if in.SentSnapshots != 1 {
		t.Errorf("west got %d full states, want 1", in.SentSnapshots)
	}
	if n := strings.Count(f.global.logs.String(), `msg="zone connected" zone=west`); n != 1 {
		t.Errorf("west connected %d times, want 1: the repair needs no new stream", n)
	}
}

// TestSync_InventoryUnderChurn: a global whose feed never stays quiet
// for a heartbeat (east changes a Dataplane every 20 ms, which goes to the
// global and to no other zone) still takes and sends west its inventory,
// and repairs what west lost.
func TestSync_InventoryUnderChurn(t *testing.T) {
	f, east, west, lost := westHoldsEastsServices(t)
	f.stop("west")
	if _, err := store.Delete(context.Background(), west.st, lost, 0); err != nil {
		t.Fatal(err)
	}

	ctx, stop := context.WithCancel(context.Background())
	churned := make(chan struct{})
	defer func() { stop(); <-churned }()
	go func() {
		defer close(churned)
		for i := 0; ctx.Err() == nil; i++ {
			dp := &resource.Object{Kind: resource.Dataplane, Mesh: "default", Name: "churn", Spec: &resource.DataplaneSpec{
				Networking: resource.DataplaneNetworking{Address: fmt.Sprintf("10.0.%d.%d", i/250%250, i%250+1),
					Inbound: []resource.Inbound{{Port: 80, Tags: map[string]string{resource.TagService: "churn"}}}}}}
			east.put(dp, resource.ModeZone, "east")
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	churning := resource.Key{Kind: resource.Dataplane, Mesh: "default", Name: HashedName(resource.Dataplane, "default", "churn", "east", "")}
	f.global.eventually("east's churning Dataplane", churning, exists)

	checks := strings.Count(west.logs.String(), heldAll("global"))
	f.start("west")
	west.eventually("the lost service, from the full state", lost, exists)
	west.waitLogs(heldAll("global"), checks+1) // the check after the repair agrees
	if in := f.insight(t, "west"); in.SentSnapshots != 1 {
		t.Errorf("west got %d full states, want 1", in.SentSnapshots)
	}
}

// TestSync_InventoryRepairsWhatTheGlobalLost: the other direction. The
// global lost a service of east's; when east reconnects, the global finds
// that east's inventory names one more and asks east for a full state.
func TestSync_InventoryRepairsWhatTheGlobalLost(t *testing.T) {
	f := newFederation(t, "east")
	east := f.zones["east"]
	east.put(meshService("default", "a", 80), resource.ModeZone, "east")
	east.put(meshService("default", "b", 80), resource.ModeZone, "east")
	lost := msKey("default", HashedName(resource.MeshService, "default", "b", "east", ""))
	f.global.eventually("east's service", lost, exists)
	f.global.waitLogs(heldAll("east"), 1)
	f.stop("east")
	if _, err := store.Delete(context.Background(), f.global.st, lost, 0); err != nil {
		t.Fatal(err)
	}
	f.start("east")
	f.global.waitLog(`msg="what this side holds of the peer's differs from the peer's inventory; asking for a full state" zone=east peer=east`)
	f.global.eventually("east's lost service, from east's full state", lost, exists)
	f.global.waitLogs(heldAll("east"), 2)
	in, err := f.g.Insight(context.Background(), "east")
	if err != nil {
		t.Fatal(err)
	}
	if in.Received.Snapshots != 1 {
		t.Errorf("the global received %d full states from east, want 1", in.Received.Snapshots)
	}
}

// TestSync_CompactedFeedSendsFullStateOnce: when the global's feed no
// longer holds the zone's revision, the zone gets the full state once and
// deletes what it no longer includes.
func TestSync_CompactedFeedSendsFullStateOnce(t *testing.T) {
	f := newFederation(t, "east", "west")
	east, west := f.zones["east"], f.zones["west"]
	east.put(meshService("default", "keep", 80), resource.ModeZone, "east")
	east.put(meshService("default", "drop", 80), resource.ModeZone, "east")
	dropped := msKey("default", HashedName(resource.MeshService, "default", "drop", "east", ""))
	west.eventually("east's service", dropped, exists)
	f.stop("west")
	east.delete(msKey("default", "drop"))
	f.global.eventually("east's deletion", dropped, absent)
	if _, err := f.global.st.(store.Compacter).Compact(context.Background(), -time.Hour); err != nil {
		t.Fatal(err)
	}
	f.start("west")
	west.eventually("the service deleted while the feed was compacted", dropped, absent)
	west.eventually("the service kept", msKey("default", HashedName(resource.MeshService, "default", "keep", "east", "")), exists)
	if in := f.insight(t, "west"); in.SentSnapshots != 1 {
		t.Errorf("west got %d full states, want 1", in.SentSnapshots)
	}
}

// TestSync_ZoneGeneratorsReachGlobalOnly: a generator created in a zone is
// visible on the global and goes to no other zone.
func TestSync_ZoneGeneratorsReachGlobalOnly(t *testing.T) {
	f := newFederation(t, "east", "west")
	east, west := f.zones["east"], f.zones["west"]
	hg := &resource.Object{Kind: resource.HostnameGenerator, Name: "mine", Spec: &resource.HostnameGeneratorSpec{
		Template: "{{ .DisplayName }}.east.internal", Selector: resource.HostnameSelector{MeshService: &resource.LabelSelector{}}}}
	east.put(hg, resource.ModeZone, "east")
	onGlobal := resource.Key{Kind: resource.HostnameGenerator, Name: HashedName(resource.HostnameGenerator, "", "mine", "east", "")}
	f.global.eventually("east's generator", onGlobal, func(o *resource.Object) bool {
		return o != nil && o.Labels[resource.LabelOrigin] == resource.OriginZone && o.Labels[resource.LabelZone] == "east"
	})
	// West has everything the global sent after that and not east's generator.
	marker := f.global.put(&resource.Object{Kind: resource.Mesh, Name: "marker", Spec: &resource.MeshSpec{}}, resource.ModeGlobal, "")
	west.eventually("a later mesh", marker.Key(), exists)
	for _, name := range []string{onGlobal.Name, HashedName(resource.HostnameGenerator, "", onGlobal.Name, "", "")} {
		if _, err := west.st.Get(context.Background(), resource.Key{Kind: resource.HostnameGenerator, Name: name}); err == nil {
			t.Errorf("west got east's generator as %s", name)
		}
	}
}

// rawZone is a zone client that sends what the test says, to check what the
// global refuses.
type rawZone struct {
	t       *testing.T
	stream  grpc.BidiStreamingClient[pb.Envelope, pb.Envelope]
	welcome *pb.Welcome
}

// dialRaw connects a raw zone; inventories is its Hello's flag (false: a
// zone of a version before inventories).
func dialRaw(t *testing.T, f *federation, zone, helloZone string, inventories bool) (*rawZone, error) {
	t.Helper()
	cfg, err := zoneTLS(f.pin, "", "")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+zoneToken(t, f.global, zone, f.pin))
	stream, err := pb.NewZoneSyncClient(conn).Sync(ctx)
	if err != nil {
		return nil, err
	}
	if err := stream.Send(&pb.Envelope{Body: &pb.Envelope_Hello{Hello: &pb.Hello{Zone: helloZone, Epoch: "raw", Inventories: inventories}}}); err != nil {
		return nil, err
	}
	env, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	if env.GetWelcome() == nil {
		t.Fatalf("got %v, want a welcome", env)
	}
	return &rawZone{t: t, stream: stream, welcome: env.GetWelcome()}, nil
}

func (r *rawZone) send(c []byte) {
	r.t.Helper()
	if err := r.stream.Send(&pb.Envelope{Body: &pb.Envelope_Changes{Changes: c}}); err != nil {
		r.t.Fatal(err)
	}
}

func encode(t *testing.T, c *pb.Changes) []byte {
	b, err := proto.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func wire(t *testing.T, o *resource.Object) *pb.Resource {
	r, err := encodeResource(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSync_RefusesBadInput: each kind of bad input is refused with a
// reason, counted, and the stream goes on; a good batch after them is
// applied, and nothing of a refused batch is.
func TestSync_RefusesBadInput(t *testing.T) {
	f := newFederation(t)
	f.global.put(&resource.Object{Kind: resource.Zone, Name: "east", Spec: &resource.ZoneSpec{}}, resource.ModeGlobal, "")
	z, err := dialRaw(t, f, "east", "east", true)
	if err != nil {
		t.Fatal(err)
	}
	good := meshService("default", "good", 80)
	good.Spec.Default()
	other := meshService("default", "other", 80)
	other.Labels = map[string]string{resource.LabelZone: "west"}
	bad := meshService("default", "bad", 80)
	bad.Spec.(*resource.MeshServiceSpec).Ports[0].Port = 70000
	for _, tc := range []struct {
		name   string
		batch  []byte
		reason string
		whole  bool // the whole batch is refused: the global asks for a full state
	}{
		{"malformed", []byte{0xff, 0xff, 0xff}, "malformed batch", true},
		{"oversized", make([]byte, MaxChangesBytes+1), "over the limit", true},
		{"unknown-kind", encode(t, &pb.Changes{Revision: 1, Put: []*pb.Resource{{Kind: "Secret", Name: "x"}}}), `unknown kind "Secret"`, false},
		{"kind-not-from-zones", encode(t, &pb.Changes{Revision: 1, Put: []*pb.Resource{wire(t, &resource.Object{Kind: resource.Mesh, Name: "m", Spec: &resource.MeshSpec{}})}}), "do not flow from zones", false},
		{"invalid", encode(t, &pb.Changes{Revision: 1, Put: []*pb.Resource{wire(t, bad)}}), "spec.ports[0].port", false},
		{"unknown-field", encode(t, &pb.Changes{Revision: 1, Put: []*pb.Resource{{Kind: "MeshService", Mesh: "default", Name: "x", Spec: []byte(`{"bogus":1}`)}}}), "bogus", false},
		{"other-zone", encode(t, &pb.Changes{Revision: 1, Put: []*pb.Resource{wire(t, other)}}), `claims zone "west"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.insight(t, "east").Refused
			z.send(tc.batch)
			for {
				env, err := z.stream.Recv()
				if err != nil {
					t.Fatalf("the stream ended: %v", err)
				}
				if r := env.GetRejection(); r != nil {
					if !strings.Contains(r.Reason, tc.reason) {
						t.Errorf("rejection %q, want it to say %q", r.Reason, tc.reason)
					}
					break
				}
			}
			if tc.whole {
				for {
					env, err := z.stream.Recv()
					if err != nil {
						t.Fatalf("the stream ended: %v", err)
					}
					if r := env.GetFullStateRequest(); r != nil {
						if !strings.Contains(r.Reason, "refused a whole batch") || !strings.Contains(r.Reason, tc.reason) {
							t.Errorf("full state request %q, want it to say the batch was refused and why", r.Reason)
						}
						break
					}
				}
			}
			if after := f.insight(t, "east").Refused; after != before+1 {
				t.Errorf("refused %d, want %d", after, before+1)
			}
		})
	}
	// A batch with a bad resource applies its good one; the stream still works.
	z.send(encode(t, &pb.Changes{Revision: 5, Put: []*pb.Resource{wire(t, good), wire(t, other)}}))
	f.global.eventually("the good service after the refusals", msKey("default", HashedName(resource.MeshService, "default", "good", "east", "")), exists)
	if _, err := f.global.st.Get(context.Background(), msKey("default", HashedName(resource.MeshService, "default", "other", "east", ""))); err == nil {
		t.Error("the other zone's service was applied")
	}
	for _, n := range []string{"other", "bad", "x"} {
		for _, zone := range []string{"east", "west"} {
			if _, err := f.global.st.Get(context.Background(), msKey("default", HashedName(resource.MeshService, "default", n, zone, ""))); err == nil {
				t.Errorf("refused service %s of %s was applied", n, zone)
			}
		}
	}
}

// TestSync_ZoneBeforeInventories: a zone whose Hello does not say it
// understands inventories (an older version) gets neither an Inventory
// nor a FullStateRequest, so that the global may be upgraded first; the
// Welcome says the global understands them.
func TestSync_ZoneBeforeInventories(t *testing.T) {
	f := newFederation(t)
	f.global.put(&resource.Object{Kind: resource.Zone, Name: "east", Spec: &resource.ZoneSpec{}}, resource.ModeGlobal, "")
	z, err := dialRaw(t, f, "east", "east", false)
	if err != nil {
		t.Fatal(err)
	}
	if !z.welcome.GetInventories() {
		t.Error("the global's Welcome does not say it understands inventories")
	}
	// Wanted: no message the zone does not know. The global would send an
	// inventory at a heartbeat once its feed was quiet for one (the test's
	// is 200 ms): after five heartbeats it had its chances. Then a refused
	// whole batch: the next message after its Rejection is the second
	// batch's Rejection, not a FullStateRequest.
	next := func() *pb.Envelope {
		env, err := z.stream.Recv()
		if err != nil {
			t.Fatalf("the stream ended: %v", err)
		}
		if env.GetInventory() != nil || env.GetFullStateRequest() != nil {
			t.Fatalf("a zone before inventories got %v", env)
		}
		if env.GetHeartbeat() != nil { // answered, or the global gives the zone up
			if err := z.stream.Send(&pb.Envelope{Body: &pb.Envelope_Heartbeat{Heartbeat: &pb.Heartbeat{}}}); err != nil {
				t.Fatal(err)
			}
		}
		return env
	}
	for beats := 0; beats < 5; {
		if next().GetHeartbeat() != nil {
			beats++
		}
	}
	for range 2 {
		z.send([]byte{0xff, 0xff, 0xff})
		for next().GetRejection() == nil {
		}
	}
}

// TestSync_RefusesWrongIdentity: a token for one zone used by another, a
// token whose signature does not verify, garbage, and a global whose
// certificate does not match the pin are refused with a clear reason.
func TestSync_RefusesWrongIdentity(t *testing.T) {
	f := newFederation(t)
	if _, err := dialRaw(t, f, "east", "west", true); err == nil || !strings.Contains(err.Error(), `the zone token is for zone "east", but this control plane says it is zone "west"`) {
		t.Errorf("east's token as west: %v", err)
	}
	f.global.waitLog("refused a zone's sync stream: the zone token is for another zone")

	good := zoneToken(t, f.global, "east", f.pin)
	expired, err := testKeys[f.global.st].Sign(token.Claims{Subject: "zone east", Role: token.RoleZone, Zone: "east", SyncPin: f.pin,
		IssuedAt: time.Now().Add(-2 * time.Hour), ExpiresAt: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, token, want string
	}{
		{"forged", good[:strings.LastIndexByte(good, '.')+1] + "AAAA", "token signature invalid"},
		{"expired", expired, "token expired"},
		{"garbage", "garbage", "the zone token is malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			east := newCP(t, "east-"+tc.name)
			runZone(t, east, "east", f.addr, writeToken(t, tc.token))
			east.waitLog(tc.want)
		})
	}

	t.Run("wrong-pin", func(t *testing.T) {
		east := newCP(t, "east-pin")
		runZone(t, east, "east", f.addr, writeToken(t, zoneToken(t, f.global, "east", "sha256:"+strings.Repeat("0", 64))))
		east.waitLog("does not match the pin in the zone token")
	})
	t.Run("wrong-zone-locally", func(t *testing.T) {
		west := newCP(t, "west-local")
		runZone(t, west, "west", f.addr, writeToken(t, zoneToken(t, f.global, "east", f.pin)))
		west.waitLog(`the zone token is for zone \"east\", but this control plane is zone \"west\"`)
	})
}

// TestSync_WhatFlowsWhere checks the table of docs/multizone.md for the
// kinds beside MeshService: a zone's Dataplanes and external services
// reach the global and no other zone; the global's external and
// multi-zone services reach every zone, renamed, without status.
func TestSync_WhatFlowsWhere(t *testing.T) {
	f := newFederation(t, "east", "west")
	east, west, global := f.zones["east"], f.zones["west"], f.global
	dp := &resource.Object{Kind: resource.Dataplane, Mesh: "default", Name: "web-1", Spec: &resource.DataplaneSpec{
		Networking: resource.DataplaneNetworking{Address: "10.0.0.1", Inbound: []resource.Inbound{{Port: 80, Tags: map[string]string{resource.TagService: "web"}}}}}}
	east.put(dp, resource.ModeZone, "east")
	mes := func(name string) *resource.Object {
		return &resource.Object{Kind: resource.MeshExternalService, Mesh: "default", Name: name, Spec: &resource.MeshExternalServiceSpec{
			Match: []resource.ExternalMatch{{Type: resource.MatchInternalVIP, Value: name + ".example.com", Port: 443}}}}
	}
	east.put(mes("east-api"), resource.ModeZone, "east")
	global.put(mes("shared-api"), resource.ModeGlobal, "")
	global.put(&resource.Object{Kind: resource.MeshMultiZoneService, Mesh: "default", Name: "redis", Spec: &resource.MeshMultiZoneServiceSpec{
		Selector: resource.MultiZoneSelector{MeshService: &resource.LabelSelector{MatchLabels: map[string]string{"app": "redis"}}},
		Ports:    []resource.Port{{Port: 6379}}}}, resource.ModeGlobal, "")

	for _, k := range []resource.Key{
		{Kind: resource.Dataplane, Mesh: "default", Name: HashedName(resource.Dataplane, "default", "web-1", "east", "")},
		{Kind: resource.MeshExternalService, Mesh: "default", Name: HashedName(resource.MeshExternalService, "default", "east-api", "east", "")},
	} {
		global.eventually("east's "+string(k.Kind), k, func(o *resource.Object) bool {
			return o != nil && o.Labels[resource.LabelZone] == "east" && o.Labels[resource.LabelOrigin] == resource.OriginZone
		})
	}
	for _, k := range []resource.Key{
		{Kind: resource.MeshExternalService, Mesh: "default", Name: HashedName(resource.MeshExternalService, "default", "shared-api", "", "")},
		{Kind: resource.MeshMultiZoneService, Mesh: "default", Name: HashedName(resource.MeshMultiZoneService, "default", "redis", "", "")},
	} {
		for _, z := range []*cp{east, west} {
			z.eventually("the global's "+string(k.Kind), k, func(o *resource.Object) bool {
				return o != nil && o.Labels[resource.LabelOrigin] == resource.OriginGlobal && o.Status == nil
			})
		}
	}
	// West has everything the global sent after that, and none of east's.
	marker := global.put(&resource.Object{Kind: resource.Mesh, Name: "marker", Spec: &resource.MeshSpec{}}, resource.ModeGlobal, "")
	west.eventually("a later mesh", marker.Key(), exists)
	for _, kind := range []resource.Kind{resource.Dataplane, resource.MeshExternalService} {
		objs, _, err := west.st.List(context.Background(), kind)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.Labels[resource.LabelZone] == "east" {
				t.Errorf("west got east's %s %s", kind, o.Name)
			}
		}
	}
}

// TestSync_KubernetesZoneNames: a Kubernetes zone names a Service's
// MeshService "<object>.<namespace>"; the global names it after the
// object and its namespace (seed 002: the hash of mesh, name, zone and
// namespace; the display name the object's), which is a DNS label, and a
// deletion of the zone's key finds it.
func TestSync_KubernetesZoneNames(t *testing.T) {
	f := newFederation(t, "east", "west")
	east, west, global := f.zones["east"], f.zones["west"], f.global
	ms := meshService("default", "web.shop", 80)
	ms.Labels = map[string]string{resource.LabelOrigin: resource.OriginZone, resource.LabelZone: "east", resource.LabelMesh: "default",
		resource.LabelDisplayName: "web", resource.LabelNamespace: "shop", resource.LabelEnv: resource.EnvKubernetes}
	ms.Spec.Default()
	if _, err := store.Create(context.Background(), east.st, ms); err != nil {
		t.Fatal(err)
	}
	synced := msKey("default", HashedName(resource.MeshService, "default", "web", "east", "shop"))
	got := global.eventually("east's service under the object's name", synced, exists)
	if got.Labels[resource.LabelDisplayName] != "web" || got.Labels[resource.LabelNamespace] != "shop" {
		t.Errorf("global holds %s", describe(got))
	}
	west.eventually("east's service", synced, exists)
	if in := f.insight(t, "east"); in.Refused != 0 {
		t.Errorf("the global refused %d of east's resources", in.Refused)
	}
	// East's inventory names the service as the global does.
	global.waitLogs(` zone=east peer=east resources=`, 1)
	if in, _ := f.g.Insight(context.Background(), "east"); in.Received.Snapshots != 0 {
		t.Errorf("east sent %d full states, want none", in.Received.Snapshots)
	}
	east.delete(msKey("default", "web.shop"))
	global.eventually("the deleted service", synced, absent)
	west.eventually("the deleted service", synced, absent)
}
