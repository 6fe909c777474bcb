package cache

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/resource"
)

// typicalService is a MeshService as the controllers leave it: named, with
// a VIP, and a name and address of its own.
func typicalService(i int) *resource.Object {
	name := fmt.Sprintf("orders-%d", i)
	o, err := resource.Decode(fmt.Appendf(nil, `type: MeshService
name: %s
mesh: default
labels:
  kuma.io/display-name: %[1]s
spec:
  selector:
    dataplaneTags:
      kuma.io/service: %[1]s
  ports:
  - name: http
    port: 80
    targetPort: 8080
    appProtocol: http
`, name))
	if err != nil {
		panic(err)
	}
	o.Version, o.Revision = 3, int64(1000+i)
	o.CreationTime = time.Unix(1_800_000_000, int64(i)).UTC()
	o.ModificationTime = o.CreationTime.Add(time.Second)
	o.Status = &resource.ServiceStatus{
		Addresses: []resource.Address{{Hostname: name + ".svc.mesh.local", Status: resource.AddressAvailable,
			Origin: resource.AddressOrigin{Kind: resource.OriginHostnameGenerator, Name: "local-universal-mesh-service"}}},
		VIPs: []resource.VIP{{IP: fmt.Sprintf("241.0.%d.%d", i/250, i%250+1), Type: resource.VIPKuma}},
	}
	return o
}

// The dictionary is what makes a frozen resource small: a typical
// MeshService must compress to a fraction of its JSON, and read back
// exactly.
func TestFreeze_CompressesAgainstDictionary(t *testing.T) {
	if _, err := dictionary(); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		o := typicalService(i * 997)
		f, err := freezeObject(o)
		if err != nil {
			t.Fatal(err)
		}
		// About 50 bytes; uncompressed it is about 330.
		if len(f.data) > 80 {
			t.Errorf("%s frozen into %d bytes, want at most 80", o.Name, len(f.data))
		}
		labels := o.Labels
		got, err := f.thaw(o.Key(), labels)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(o, got); diff != "" {
			t.Errorf("%s thawed (-frozen +thawed):\n%s", o.Name, diff)
		}
	}
}

// A resource far larger than the compressor's window reads back exactly.
func TestFreeze_LargeResource(t *testing.T) {
	o := typicalService(1)
	st := o.Status.(*resource.ServiceStatus)
	for i := range 4000 {
		st.Conditions = append(st.Conditions, resource.Condition{Type: fmt.Sprintf("Type%d", i), Status: resource.ConditionFalse,
			Reason: "Reason", Message: fmt.Sprintf("message %d of a long status: %x", i, i*7919)})
	}
	f, err := freezeObject(o)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.thaw(o.Key(), o.Labels)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(o, got); diff != "" {
		t.Errorf("thawed (-frozen +thawed):\n%s", diff)
	}
	if b, _ := json.Marshal(st); len(b) < 4<<16 {
		t.Errorf("the status is %d bytes: want one several windows long", len(b))
	}
}

// Damaged frozen bytes give an error, not a panic or a wrong resource.
func TestFreeze_DamagedDataIsAnError(t *testing.T) {
	o := typicalService(7)
	f, err := freezeObject(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, data := range [][]byte{nil, f.data[:len(f.data)/2], append([]byte("garbage"), f.data...)} {
		d := *f
		d.data = data
		if got, err := d.thaw(o.Key(), nil); err == nil {
			t.Errorf("thaw of %d damaged bytes gave %v and no error", len(data), got)
		}
	}
	d := *f
	d.specLen = 1 << 20
	if _, err := d.thaw(o.Key(), nil); err == nil {
		t.Error("thaw with a spec longer than the data gave no error")
	}
}

func BenchmarkFreeze(b *testing.B) {
	o := typicalService(12345)
	b.ReportAllocs()
	var size int
	for b.Loop() {
		f, err := freezeObject(o)
		if err != nil {
			b.Fatal(err)
		}
		size = len(f.data)
	}
	b.ReportMetric(float64(size), "frozen-B")
}

func BenchmarkThaw(b *testing.B) {
	o := typicalService(12345)
	f, err := freezeObject(o)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.thaw(o.Key(), nil); err != nil {
			b.Fatal(err)
		}
	}
}
