package kube

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/history"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// kubeService is the JSON of the i-th MeshService made from a Service, as
// the store encodes it once named.
func kubeService(i int) []byte {
	name, ns := fmt.Sprintf("orders-%d", i), fmt.Sprintf("team-%d", i%37)
	r := strings.NewReplacer("backend", name, `"default"`, `"`+ns+`"`, ".default", "."+ns, "_default_", "_"+ns+"_", "-default-", "-"+ns+"-",
		`"mesh":"`+ns+`"`, `"mesh":"default"`, "10.96.0.1", fmt.Sprintf("10.96.%d.%d", i/250, i%250+1))
	return []byte(r.Replace(dictSample))
}

// The dictionary is what makes the store's copy small: a typical
// MeshService compresses to a fraction of its JSON and reads back exactly.
func TestCompress_TypicalService(t *testing.T) {
	for i := range 50 {
		plain := kubeService(i * 997)
		data := compressObject(plain)
		if len(data) > 200 {
			t.Errorf("%d bytes of JSON compressed into %d, want at most 200", len(plain), len(data))
		}
		got, err := (&entry{data: data}).json()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, plain) {
			t.Errorf("read back %s, want %s", got, plain)
		}
	}
}

// Damaged bytes give an error, not a panic or a wrong object.
func TestCompress_DamagedIsAnError(t *testing.T) {
	data := compressObject(kubeService(1))
	for _, bad := range [][]byte{data[:len(data)/2], append([]byte{0xff, 0xff, 0xff, 0xff, 0x7f}, data...)} {
		if _, err := (&entry{data: bad}).object(); err == nil {
			t.Errorf("decoding %x: no error", bad)
		}
	}
}

// The history of a named Service (its hostnames, then its VIP) is kept
// in a fraction of its size once its block is sealed, and read back as
// written.
func TestRecords_KeptSmall(t *testing.T) {
	s := &Store{}
	status := func(i int) *resource.ServiceStatus {
		name, ns := fmt.Sprintf("orders-%d", i), fmt.Sprintf("team-%d", i%37)
		tag := name + "_" + ns + "_svc_80"
		return &resource.ServiceStatus{Addresses: []resource.Address{
			{Hostname: name + "." + ns + ".svc.mesh.local", Status: resource.AddressAvailable},
			{Hostname: tag + ".mesh", Status: resource.AddressAvailable},
			{Hostname: strings.ReplaceAll(tag, "_", "-") + ".mesh", Status: resource.AddressAvailable},
			{Hostname: name + "." + ns + ".svc.80.mesh", Status: resource.AddressAvailable}},
			VIPs: []resource.VIP{{IP: fmt.Sprintf("10.96.%d.%d", i/250, i%250+1), Type: resource.VIPKubernetes}}}
	}
	var written []store.Record
	at := time.Unix(1_800_000_000, 0).UTC()
	const services = 2000
	for i := range services {
		k := resource.Key{Kind: resource.MeshService, Mesh: "default", Name: fmt.Sprintf("orders-%d.team-%d", i*997, i*997%37)}
		for _, field := range []string{"addresses", "vips"} {
			op, ok, err := history.Ops(history.Diff("east", k, nil, status(i*997), store.StatusPatch{Fields: []string{field}}))
			if err != nil || !ok {
				t.Fatalf("history: %v, %v", ok, err)
			}
			rec := *op.Record
			rec.Time = at.Add(time.Duration(len(written)) * time.Millisecond)
			if err := s.records.append(rec, at); err != nil {
				t.Fatal(err)
			}
			rec.Seq = int64(len(written) + 1)
			written = append(written, rec)
		}
	}
	sealed, size := 0, 0
	for _, b := range s.records.streams[history.Stream].blocks {
		if b.sealed {
			sealed, size = sealed+b.n, size+cap(b.body)
		}
	}
	t.Logf("%d records sealed in %d bytes, %.1f each", sealed, size, float64(size)/float64(sealed))
	if sealed < services || size/sealed > 60 {
		t.Errorf("%d records sealed in %d bytes, want at least %d in at most 60 bytes each", sealed, size, services)
	}
	got, err := s.Records(t.Context(), store.RecordQuery{Stream: history.Stream, Limit: store.MaxRecordLimit})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(written, got); diff != "" {
		t.Errorf("records (-written +read):\n%s", diff)
	}
	vip := "vip=" + status(5 * 997).VIPs[0].IP
	got, err = s.Records(t.Context(), store.RecordQuery{Stream: history.Stream, Terms: []string{vip}})
	if err != nil || len(got) != 1 || got[0].Seq != 12 {
		t.Errorf("the records of %s: %+v, %v; want the 12th", vip, got, err)
	}
}
