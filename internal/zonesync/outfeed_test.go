package zonesync

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/meshnames/meshnames/api/zonesync/v1"
	"github.com/meshnames/meshnames/internal/resource"
)

// encodeChanges must encode what proto.Marshal of the same pb.Changes
// decodes to.
func TestEncodeChanges(t *testing.T) {
	r1 := &pb.Resource{Kind: "MeshService", Mesh: "default", Name: "a", Labels: map[string]string{"x": "y"}, Spec: []byte(`{"ports":[]}`)}
	r2 := &pb.Resource{Kind: "Mesh", Name: "default"}
	var puts [][]byte
	for _, r := range []*pb.Resource{r1, r2} {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		puts = append(puts, b)
	}
	dels := []resource.Key{{Kind: resource.MeshService, Mesh: "default", Name: "b"}, {Kind: resource.Mesh, Name: "m"}}
	for _, tc := range []struct {
		rev            int64
		snapshot, last bool
		puts           [][]byte
		dels           []resource.Key
	}{
		{rev: 0},
		{rev: 42},
		{rev: 7, snapshot: true, last: true, puts: puts},
		{rev: 1 << 40, puts: puts, dels: dels},
		{rev: 3, snapshot: true, dels: dels},
	} {
		got, err := DecodeChanges(encodeChanges(tc.rev, tc.snapshot, tc.last, tc.puts, tc.dels))
		if err != nil {
			t.Fatal(err)
		}
		want := &pb.Changes{Revision: tc.rev, Snapshot: tc.snapshot, Last: tc.last}
		if tc.puts != nil {
			want.Put = []*pb.Resource{r1, r2}
		}
		for _, k := range tc.dels {
			want.Delete = append(want.Delete, wireKey(k))
		}
		if !proto.Equal(got, want) {
			t.Errorf("encodeChanges(%d, %v, %v): got %v, want %v", tc.rev, tc.snapshot, tc.last, got, want)
		}
	}
}
