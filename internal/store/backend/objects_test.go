package backend

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/meshnames/meshnames/internal/resource"
)

// serviceRows are n rows of MeshServices s0..s<n-1>, each with a label
// naming its index; the rows at bad have a spec that is not JSON.
func serviceRows(n int, bad ...int) []*Row {
	rows := make([]*Row, n)
	for i := range rows {
		spec := `{"ports":[{"port":80}]}`
		for _, b := range bad {
			if b == i {
				spec = `{"ports":[` // cut short
			}
		}
		rows[i] = &Row{
			Key:     resource.Key{Kind: resource.MeshService, Mesh: "default", Name: fmt.Sprintf("s%d", i)},
			Version: 1, Revision: int64(i + 1),
			Labels: fmt.Sprintf(`{"i":"%d"}`, i), Spec: spec,
		}
	}
	return rows
}

func TestDecodeRows(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n       int
		bad     []int
		wantErr string // names the row whose error is returned
	}{
		{"none", 0, nil, ""},
		{"fewer than a chunk", 3, nil, ""},
		{"many chunks, in order", 5*objectsChunk + 7, nil, ""},
		{"the first failure in order wins", 5*objectsChunk + 7, []int{4*objectsChunk + 1, objectsChunk + 3, 3 * objectsChunk}, fmt.Sprintf("s%d", objectsChunk+3)},
		{"a failure in the last chunk", 2*objectsChunk + 1, []int{2 * objectsChunk}, fmt.Sprintf("s%d", 2*objectsChunk)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := decodeRows(context.Background(), serviceRows(tc.n, tc.bad...))
			checkDecoded(t, objs, err, tc.n, tc.wantErr)
		})
	}
}

// checkDecoded checks that objs are the objects of serviceRows(n), in
// order, or that err is the error of the row named wantErr.
func checkDecoded(t *testing.T, objs []*resource.Object, err error, n int, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr+":") && !strings.Contains(err.Error(), wantErr+" ") {
			t.Fatalf("error %v, want the one of %s", err, wantErr)
		}
		if objs != nil {
			t.Fatalf("%d objects with an error", len(objs))
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != n {
		t.Fatalf("%d objects, want %d", len(objs), n)
	}
	for i, o := range objs {
		if o.Name != fmt.Sprintf("s%d", i) || o.Labels["i"] != fmt.Sprint(i) || o.Revision != int64(i+1) {
			t.Fatalf("object %d is %s (label %q, revision %d)", i, o.Name, o.Labels["i"], o.Revision)
		}
		if sp, ok := o.Spec.(*resource.MeshServiceSpec); !ok || len(sp.Ports) != 1 || sp.Ports[0].Port != 80 {
			t.Fatalf("object %d: spec %#v", i, o.Spec)
		}
	}
}

func TestDecodeRows_Cancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := decodeRows(ctx, serviceRows(3*objectsChunk)); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

// A ListDecoder decodes as rows come, a batch at a time, and gives every
// object in order, or the first error.
func TestListDecoder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n       int
		bad     []int
		wantErr string
	}{
		{"none", 0, nil, ""},
		{"across batches", 2*listBatch + 5, nil, ""},
		{"an error in the second batch", 2*listBatch + 5, []int{listBatch + 9}, fmt.Sprintf("s%d", listBatch+9)},
		{"an error in the last, partial batch", 2*listBatch + 5, []int{2*listBatch + 4}, fmt.Sprintf("s%d", 2*listBatch+4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewListDecoder(context.Background())
			var err error
			for _, r := range serviceRows(tc.n, tc.bad...) {
				if err = d.Add(r); err != nil {
					break
				}
			}
			var objs []*resource.Object
			if err == nil {
				objs, err = d.Objects()
			}
			checkDecoded(t, objs, err, tc.n, tc.wantErr)
		})
	}
}
