package backend

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// TestPatchStatus_Whole pins when PatchStatus reports that it stored next
// as it is, which lets the change feed share the writer's status instead
// of decoding it: only over no status, and only when nothing of next was
// left out.
func TestPatchStatus_Whole(t *testing.T) {
	names := &store.StatusPatch{Fields: []string{"addresses"}, Conditions: []string{"HostnamesAvailable"}}
	for _, tc := range []struct {
		name      string
		cur, next string
		patch     *store.StatusPatch
		want      string
		whole     bool
	}{
		{"over none, all named", "", `{"addresses":[{"hostname":"a"}],"conditions":[{"type":"HostnamesAvailable","status":"True"}]}`, names,
			`{"addresses":[{"hostname":"a"}],"conditions":[{"type":"HostnamesAvailable","status":"True"}]}`, true},
		{"over none, a field not named", "", `{"addresses":[{"hostname":"a"}],"vips":[{"ip":"241.0.0.1"}]}`, names,
			`{"addresses":[{"hostname":"a"}]}`, false},
		{"over none, a condition not named", "", `{"conditions":[{"type":"HostnamesAvailable","status":"True"},{"type":"Other","status":"True"}]}`, names,
			`{"conditions":[{"type":"HostnamesAvailable","status":"True"}]}`, false},
		{"over none, conditions without a named type", "", `{"addresses":[{"hostname":"a"}],"conditions":[]}`, names,
			`{"addresses":[{"hostname":"a"}]}`, false},
		{"over none, conditions and no condition type named", "", `{"addresses":[{"hostname":"a"}],"conditions":[{"type":"X","status":"True"}]}`, &store.StatusPatch{Fields: []string{"addresses"}},
			`{"addresses":[{"hostname":"a"}]}`, false},
		{"over a status", `{"vips":[{"ip":"241.0.0.1"}]}`, `{"addresses":[{"hostname":"a"}]}`, names,
			`{"addresses":[{"hostname":"a"}],"vips":[{"ip":"241.0.0.1"}]}`, false},
		{"nothing over none", "", "", names, "", false},
		{"an empty status over none", "", `{}`, names, `{}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, whole, err := PatchStatus(tc.cur, tc.next, tc.patch)
			if err != nil {
				t.Fatal(err)
			}
			if !sameJSON(t, got, tc.want) {
				t.Errorf("patched %s, want %s", got, tc.want)
			}
			if whole != tc.whole {
				t.Errorf("whole = %v, want %v", whole, tc.whole)
			}
			if whole && !sameJSON(t, got, tc.next) {
				t.Errorf("whole, but %s is not %s", got, tc.next)
			}
		})
	}
}

func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	if a == "" || b == "" {
		return a == b
	}
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

// A status patch over none that leaves nothing out gives the change feed
// the writer's own status, equal to what decoding the stored row gives;
// any other patch, the decoded one.
func TestRecentEvent_SharesAWholePatchStatus(t *testing.T) {
	key := resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "redis"}
	base := &resource.Object{Kind: key.Kind, Mesh: key.Mesh, Name: key.Name, Revision: 7, Version: 1, Spec: &resource.MeshServiceSpec{}}
	cur := &Row{Key: key, Version: 1, Revision: 7, Spec: `{}`}
	for _, tc := range []struct {
		name   string
		status *resource.ServiceStatus
		patch  *store.StatusPatch
		shared bool
	}{
		{"whole", &resource.ServiceStatus{Addresses: []resource.Address{{Hostname: "redis.svc.mesh.local", Status: "Available", Origin: resource.AddressOrigin{Kind: "HostnameGenerator", Name: "local"}}}},
			&store.StatusPatch{Fields: []string{"addresses"}}, true},
		{"a part left out", &resource.ServiceStatus{Addresses: []resource.Address{{Hostname: "redis.svc.mesh.local"}}, VIPs: []resource.VIP{{IP: "241.0.0.1"}}},
			&store.StatusPatch{Fields: []string{"addresses"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := store.Op{Type: store.OpPatchStatus, Object: &resource.Object{Kind: key.Kind, Mesh: key.Mesh, Name: key.Name, Status: tc.status},
				Patch: tc.patch, DiscardObject: true, Base: base}
			next, err := Next(op, &Prepare([]store.Op{op})[0], cur, 100)
			if err != nil {
				t.Fatal(err)
			}
			next.Revision = 8
			ev, err := (&Recent{}).Event(op, &next, cur)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Obj == nil {
				t.Fatal("no object in the event")
			}
			if shared := ev.Obj.Status == resource.Status(tc.status); shared != tc.shared {
				t.Errorf("status shared = %v, want %v", shared, tc.shared)
			}
			decoded, err := next.Object()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ev.Obj.Status, decoded.Status) {
				t.Errorf("event status %+v, stored %+v", ev.Obj.Status, decoded.Status)
			}
		})
	}
}

// A handed create gives the change feed the writer's labels, spec and
// status (in an object of its own, stamped with the stored metadata,
// the writer's object untouched); any other create, a deep copy.
func TestRecentEvent_HandedCreateShares(t *testing.T) {
	for _, handed := range []bool{true, false} {
		t.Run(fmt.Sprintf("handed=%v", handed), func(t *testing.T) {
			obj := &resource.Object{Kind: resource.MeshService, Mesh: "default", Name: "redis", Labels: map[string]string{"team": "a"},
				Spec:   &resource.MeshServiceSpec{Ports: []resource.Port{{Port: 6379, AppProtocol: "tcp"}}},
				Status: &resource.ServiceStatus{VIPs: []resource.VIP{{IP: "241.0.0.1", Type: "Kuma"}}}}
			op := store.Op{Type: store.OpCreate, Object: obj, Handed: handed, DiscardObject: true}
			next, err := Next(op, &Prepare([]store.Op{op})[0], nil, 100)
			if err != nil {
				t.Fatal(err)
			}
			next.Revision = 8
			ev, err := (&Recent{}).Event(op, &next, nil)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Obj == nil || ev.Obj == obj {
				t.Fatalf("event object %p, the writer's %p: want an object of the event's own", ev.Obj, obj)
			}
			if ev.Obj.Revision != 8 || ev.Obj.Version != next.Version || obj.Revision != 0 {
				t.Errorf("event revision %d version %d, writer's object revision %d: want the stored metadata on the event's object only",
					ev.Obj.Revision, ev.Obj.Version, obj.Revision)
			}
			shared := ev.Obj.Spec == resource.Spec(obj.Spec) && ev.Obj.Status == resource.Status(obj.Status)
			if shared != handed {
				t.Errorf("spec and status shared = %v, want %v", shared, handed)
			}
			decoded, err := next.Object()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ev.Obj.Labels, decoded.Labels) || !reflect.DeepEqual(ev.Obj.Spec, decoded.Spec) || !reflect.DeepEqual(ev.Obj.Status, decoded.Status) {
				t.Errorf("event %+v, stored %+v", ev.Obj, decoded)
			}
		})
	}
}

// FuzzPatchStatus_NamesAll checks the shortcut of a patch over no status
// against the general merge: whenever namesAll takes next as it is, the
// merge keeps all of next too (nothing dropped, the same JSON).
func FuzzPatchStatus_NamesAll(f *testing.F) {
	for _, s := range []string{
		`{"addresses":[{"hostname":"a"}],"conditions":[{"type":"HostnamesAvailable","status":"True"}]}`,
		`{"addresses":[{"hostname":"a"}],"vips":[{"ip":"241.0.0.1"}]}`,
		`{"conditions":[{"type":"HostnamesAvailable"},{"type":"Other"}]}`,
		`{"addresses":[],"conditions":[]}`,
		` { "addresses" : null , "conditions" : [ { "Type" : "VIPsAllocated" } ] } `,
		`{"addresses":1,"addresses":2}`,
		`{"addr\u0065sses":true}`,
		`{}`, `[]`, `"x"`, `{"addresses":{"a":[1,"}"]}}`,
	} {
		f.Add(s, "addresses,vips", "HostnamesAvailable,VIPsAllocated")
		f.Add(s, "conditions", "")
	}
	f.Fuzz(func(t *testing.T, next, fields, conditions string) {
		p := &store.StatusPatch{Fields: splitNonEmpty(fields), Conditions: splitNonEmpty(conditions)}
		if next == "" || !namesAll(next, p) {
			return
		}
		merged, dropped, err := patchStatus("", next, p)
		if err != nil {
			t.Fatalf("namesAll took %s, the merge failed: %v", next, err)
		}
		if dropped || !sameJSON(t, merged, next) {
			t.Fatalf("namesAll took %s whole; the merge gives %s (dropped %v)", next, merged, dropped)
		}
		got, whole, err := PatchStatus("", next, p)
		if err != nil || !whole || got != next {
			t.Fatalf("PatchStatus(%q) = %q, %v, %v; want it as it is, whole", next, got, whole, err)
		}
	})
}

func splitNonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
