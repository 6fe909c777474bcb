package kube

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/meshnames/meshnames/internal/resource"
)

// The map of refs keeps the strings of the resource's key, not those
// decoded from the API server: sharedRef returns an equal ref whose
// strings lie in the key's name (or are the system namespace's).
func TestSharedRef(t *testing.T) {
	s := &Store{dec: decoder{names: names{system: "meshnames-system"}}}
	for _, tc := range []struct {
		ref   crRef
		key   string
		share bool
	}{
		{crRef{kind: resource.MeshService, namespace: "shop", name: "web"}, "web.shop", true},
		{crRef{kind: resource.MeshService, namespace: "meshnames-system", name: "web"}, "web", true},
		{crRef{kind: resource.Mesh, name: "default"}, "default", true},
		{crRef{kind: resource.MeshService, namespace: "shop", name: "web"}, "web.other", false},
		{crRef{kind: resource.MeshService, namespace: "shop", name: "web"}, "webXshop", false},
	} {
		ref := crRef{kind: tc.ref.kind, namespace: strings.Clone(tc.ref.namespace), name: strings.Clone(tc.ref.name)}
		key := resource.Key{Kind: tc.ref.kind, Name: strings.Clone(tc.key)}
		got := s.sharedRef(ref, key)
		if got != tc.ref {
			t.Errorf("sharedRef(%v, %q) = %v, want it unchanged", tc.ref, tc.key, got)
		}
		in := func(sub, of string) bool {
			p, b := uintptr(unsafe.Pointer(unsafe.StringData(sub))), uintptr(unsafe.Pointer(unsafe.StringData(of)))
			return p >= b && p+uintptr(len(sub)) <= b+uintptr(len(of))
		}
		nsShared := got.namespace == "" || in(got.namespace, key.Name) || in(got.namespace, s.dec.system)
		if shared := in(got.name, key.Name) && nsShared; shared != tc.share {
			t.Errorf("sharedRef(%v, %q): strings of the key %v, want %v", tc.ref, tc.key, shared, tc.share)
		}
	}
}
