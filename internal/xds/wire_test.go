package xds

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
)

// TestWire_SameAsProtoMarshal checks that the hand-encoded responses
// decode to the messages proto would have encoded, for the cases a proto3
// encoder leaves fields out: empty strings, an Any without value, empty
// lists and an empty removed name.
func TestWire_SameAsProtoMarshal(t *testing.T) {
	cluster := mustAny(&clusterv3.Cluster{Name: "redis_msvc_6379"})
	empty := &anypb.Any{TypeUrl: ClusterURL}
	tests := []struct {
		name string
		o    *out
	}{
		{"nothing", &out{typ: ClusterType, nonce: "1"}},
		{"resources", &out{typ: ClusterType, version: "v1", nonce: "2", resources: []sent{
			{name: "redis_msvc_6379", version: "abc", any: cluster},
			{name: "empty", version: "", any: empty},
			{name: "", version: "x", any: &anypb.Any{}},
		}}},
		{"removed", &out{typ: ListenerType, version: "v2", nonce: "30", removed: []string{"a", "", "outbound:b_msvc_80"}}},
		{"both", &out{typ: EndpointType, nonce: "4", resources: []sent{{name: "a", version: "1", any: cluster}}, removed: []string{"b"}}},
		{"shared", func() *out {
			w := &wildcardSet{resources: []sent{{name: "a", version: "1", any: cluster}, {name: "b", version: "2", any: empty}}}
			w.version = responseVersion(w.resources, nil)
			return &out{typ: ClusterType, nonce: "5", shared: w, resources: w.resources, version: w.version}
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.o
			rs := make([]*discovery.Resource, len(o.resources))
			anys := make([]*anypb.Any, len(o.resources))
			for i, e := range o.resources {
				rs[i] = &discovery.Resource{Name: e.name, Version: e.version, Resource: e.any}
				anys[i] = e.any
			}
			wantDelta := &discovery.DeltaDiscoveryResponse{SystemVersionInfo: o.version, Resources: rs, RemovedResources: o.removed, TypeUrl: o.typ.URL(), Nonce: o.nonce}
			decode(t, encode(o, true), wantDelta, &discovery.DeltaDiscoveryResponse{})

			wantSotw := &discovery.DiscoveryResponse{VersionInfo: o.version, Resources: anys, TypeUrl: o.typ.URL(), Nonce: o.nonce}
			decode(t, encode(o, false), wantSotw, &discovery.DiscoveryResponse{})
		})
	}
}

// decode decodes what the codec writes of got into into and compares it
// with want, and the sizes of both encodings.
func decode(t *testing.T, got *encoded, want, into proto.Message) {
	t.Helper()
	data, err := newCodec().Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	b := data.Materialize()
	if err := proto.Unmarshal(b, into); err != nil {
		t.Fatal(err)
	}
	if len(into.ProtoReflect().GetUnknown()) != 0 {
		t.Errorf("decoded with unknown fields: %x", into.ProtoReflect().GetUnknown())
	}
	if d := cmp.Diff(want, into, protocmp.Transform()); d != "" {
		t.Errorf("decoded response differs (-proto +wire):\n%s", d)
	}
	if w := proto.Size(want); w != len(b) {
		t.Errorf("encoded %d bytes, proto encodes %d", len(b), w)
	}
}
