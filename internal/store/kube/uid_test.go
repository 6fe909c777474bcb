package kube

import (
	"strings"
	"testing"

	"github.com/meshnames/meshnames/internal/crd"
	"github.com/meshnames/meshnames/internal/resource"
)

func TestParseUID(t *testing.T) {
	for _, tc := range []struct {
		in, err string
	}{
		{in: "6f1c2a0e-9b7d-4c1e-8a2f-0123456789ab"},
		{in: "00000000-0000-0000-0000-000000000001"},
		{in: ""},
		{in: "6F1C2A0E-9B7D-4C1E-8A2F-0123456789AB", err: "lower case"},
		{in: "6f1c2a0e9b7d4c1e8a2f0123456789ab", err: "8-4-4-4-12"},
		{in: "6f1c2a0e-9b7d-4c1e-8a2f-0123456789a", err: "8-4-4-4-12"},
		{in: "6f1c2a0e-9b7d-4c1e-8a2f-0123456789ag", err: "lower case hex"},
		{in: "uid-1", err: "metadata.uid"},
		{in: "00000000-0000-0000-0000-000000000000", err: "nil UUID"},
	} {
		u, err := parseUID(tc.in)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("parseUID(%q): %v", tc.in, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "metadata.uid")):
			t.Errorf("parseUID(%q) = %v, want an error naming metadata.uid and saying %q", tc.in, err, tc.err)
		case tc.err == "" && u.String() != tc.in:
			t.Errorf("parseUID(%q).String() = %q", tc.in, u.String())
		}
	}
}

func FuzzParseUID(f *testing.F) {
	f.Add("6f1c2a0e-9b7d-4c1e-8a2f-0123456789ab")
	f.Add("")
	f.Add("00000000-0000-0000-0000-000000000000")
	f.Add("------------------------------------")
	f.Fuzz(func(t *testing.T, s string) {
		u, err := parseUID(s)
		if err == nil && u.String() != s {
			t.Fatalf("parseUID(%q) reads back as %q", s, u.String())
		}
	})
}

// A custom resource whose uid is not the API server's is not read: the
// error names the object and metadata.uid.
func TestDecode_RefusesABadUID(t *testing.T) {
	d := decoder{names: names{system: "meshnames-system"}, mode: resource.ModeZone, zone: "east"}
	ms, _ := crd.For(resource.MeshService)
	good := `{"metadata":{"name":"web","namespace":"shop","resourceVersion":"7","uid":"6f1c2a0e-9b7d-4c1e-8a2f-0123456789ab","labels":{"kuma.io/mesh":"default"}},"spec":{"ports":[{"port":80}]}}`
	got, err := d.decode(ms, []byte(good))
	if err != nil || got.uid.String() != "6f1c2a0e-9b7d-4c1e-8a2f-0123456789ab" {
		t.Fatalf("a good uid: %v, uid %q", err, got.uid)
	}
	bad := strings.Replace(good, "6f1c2a0e-9b7d-4c1e-8a2f-0123456789ab", "uid-1", 1)
	if _, err := d.decode(ms, []byte(bad)); err == nil || !strings.Contains(err.Error(), "metadata.uid") || !strings.Contains(err.Error(), "web") {
		t.Errorf("a bad uid: %v, want an error naming the object and metadata.uid", err)
	}
}
