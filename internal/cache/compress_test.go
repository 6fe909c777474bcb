package cache

import (
	"encoding/binary"
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
		f, err := freezeObject(o, nil)
		if err != nil {
			t.Fatal(err)
		}
		// About 70 bytes with the header; uncompressed it is about 330.
		if len(f) > 100 {
			t.Errorf("%s frozen into %d bytes, want at most 100", o.Name, len(f))
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

// kubeService is a MeshService made from the Kubernetes Service
// orders-<i> of namespace team-<i%37>, as the controllers leave it.
func kubeService(i int) *resource.Object {
	name, ns := fmt.Sprintf("orders-%d", i), fmt.Sprintf("team-%d", i%37)
	tag := fmt.Sprintf("%s_%s_svc_80", name, ns)
	o := &resource.Object{Kind: resource.MeshService, Mesh: "default", Name: name + "." + ns, Version: 7, Revision: int64(1000 + i),
		Labels: map[string]string{resource.LabelDisplayName: name, resource.LabelServiceName: name, resource.LabelNamespace: ns,
			resource.LabelEnv: resource.EnvKubernetes, resource.LabelManagedBy: resource.ManagedByKubernetes},
		Spec: &resource.MeshServiceSpec{
			Selector:   resource.MeshServiceSelector{DataplaneLabels: &resource.LabelSelector{MatchLabels: map[string]string{"app": name, resource.LabelNamespace: ns}}},
			Ports:      []resource.Port{{Name: "http", Port: 80, TargetPort: &resource.IntOrString{Int: 8080}, AppProtocol: "http"}},
			Identities: []resource.Identity{{Type: resource.IdentityServiceTag, Value: tag}},
			Export:     &resource.Export{Mode: resource.ExportAll},
		},
		Status: &resource.ServiceStatus{
			Addresses: []resource.Address{
				{Hostname: name + "." + ns + ".svc.mesh.local", Status: resource.AddressAvailable,
					Origin: resource.AddressOrigin{Kind: resource.OriginHostnameGenerator, Name: "local-kube-mesh-service"}},
				{Hostname: tag + ".mesh", Status: resource.AddressAvailable, Origin: resource.AddressOrigin{Kind: resource.OriginServiceTag, Name: tag}},
			},
			VIPs: []resource.VIP{{IP: fmt.Sprintf("10.96.%d.%d", i/250, i%250+1), Type: resource.VIPKubernetes}},
		},
	}
	o.CreationTime = time.Unix(1_800_000_000, 0).UTC()
	o.ModificationTime = o.CreationTime
	return o
}

// So does a MeshService of Kubernetes mode, whose spec and status differ
// from universal mode's.
func TestFreeze_KubernetesServiceCompresses(t *testing.T) {
	for i := range 50 {
		o := kubeService(i * 997)
		f, err := freezeObject(o, nil)
		if err != nil {
			t.Fatal(err)
		}
		// About 125 bytes with the header; 240 against the samples of
		// universal mode alone.
		if len(f) > 140 {
			t.Errorf("%s frozen into %d bytes, want at most 140", o.Name, len(f))
		}
		got, err := f.thaw(o.Key(), o.Labels)
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
	f, err := freezeObject(o, nil)
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
	f, err := freezeObject(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []frozen{nil, f[:3], f[:len(f)/2], append(frozen("garbage"), f...), append(f[:12:12], "garbage"...)} {
		if got, err := d.thaw(o.Key(), nil); err == nil {
			t.Errorf("thaw of %d damaged bytes gave %v and no error", len(d), got)
		}
	}
	// A whole header, then damage; the spec's length is the last field.
	header := func(specLen int64) []byte {
		h := binary.AppendVarint(nil, 1)
		h = binary.AppendVarint(h, 2)
		h = binary.AppendVarint(h, 3)
		h = binary.AppendVarint(h, 4)
		return binary.AppendVarint(h, specLen)
	}
	if _, err := frozen(append(header(2), "garbage"...)).thaw(o.Key(), nil); err == nil {
		t.Error("thaw of a header and garbage gave no error")
	}
	for _, specLen := range []int64{1 << 20, -1} {
		if _, err := frozen(compress(header(specLen), []byte(`{}{}`))).thaw(o.Key(), nil); err == nil {
			t.Errorf("thaw with a spec length of %d gave no error", specLen)
		}
	}
	if got, err := frozen(compress(header(2), []byte(`{}{}`))).thaw(o.Key(), nil); err != nil || got.Version != 1 || got.Revision != 2 {
		t.Errorf("thaw of a sound header and data: %+v, %v", got, err)
	}
}

func BenchmarkFreeze(b *testing.B) {
	o := typicalService(12345)
	b.ReportAllocs()
	var size int
	for b.Loop() {
		f, err := freezeObject(o, nil)
		if err != nil {
			b.Fatal(err)
		}
		size = len(f)
	}
	b.ReportMetric(float64(size), "frozen-B")
}

func BenchmarkThaw(b *testing.B) {
	o := typicalService(12345)
	f, err := freezeObject(o, nil)
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

// Whatever the bytes, thaw gives a resource or an error, never a panic;
// what it gives freezes to bytes that thaw to the same resource.
func FuzzThaw(f *testing.F) {
	for i := range 3 {
		fr, err := freezeObject(typicalService(i*4999), nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(fr))
	}
	f.Add([]byte{})
	k := resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "web"}
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := frozen(data).thaw(k, nil)
		if err != nil {
			return
		}
		again, err := freezeObject(o, nil)
		if err != nil {
			t.Fatalf("thawed %+v but cannot freeze it: %v", o, err)
		}
		o2, err := again.thaw(k, nil)
		if err != nil {
			t.Fatalf("refrozen bytes do not thaw: %v", err)
		}
		if diff := cmp.Diff(o, o2); diff != "" {
			t.Errorf("thaw, freeze, thaw differs:\n%s", diff)
		}
	})
}
