package zonesync

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/meshnames/meshnames/api/zonesync/v1"
)

// agreeWithProto fails t unless unmarshalChanges and proto.Unmarshal both
// refuse b or both decode it to the same Changes (proto.Unmarshal's
// unknown fields, which unmarshalChanges skips, left out).
func agreeWithProto(t *testing.T, b []byte) {
	t.Helper()
	var want, got pb.Changes
	werr := proto.Unmarshal(b, &want)
	gerr := unmarshalChanges(b, &got)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("proto.Unmarshal: %v; unmarshalChanges: %v (input %x)", werr, gerr, b)
	}
	if werr != nil {
		return
	}
	want.ProtoReflect().SetUnknown(nil)
	for _, r := range want.Put {
		r.ProtoReflect().SetUnknown(nil)
	}
	for _, k := range want.Delete {
		k.ProtoReflect().SetUnknown(nil)
	}
	if !proto.Equal(&want, &got) {
		t.Fatalf("decoded %v, proto.Unmarshal %v (input %x)", &got, &want, b)
	}
}

// field appends a length-delimited field.
func field(b []byte, num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

func varintField(b []byte, num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func TestUnmarshalChanges_AgreesWithProto(t *testing.T) {
	full, err := proto.Marshal(&pb.Changes{Revision: 42, Snapshot: true, Last: true,
		Put: []*pb.Resource{
			{Kind: "MeshService", Mesh: "default", Name: "redis-0042", Labels: map[string]string{"kuma.io/zone": "east", "team": ""},
				Spec: []byte(`{"ports":[]}`), Status: []byte(`{}`)},
			{Kind: "Mesh", Name: "default"},
		},
		Delete: []*pb.Key{{Kind: "MeshService", Mesh: "default", Name: "web"}, {}},
	})
	if err != nil {
		t.Fatal(err)
	}
	label := func(entry []byte) []byte { return field(field(nil, 3, []byte("x")), 4, entry) }
	bad := []byte{0xff, 0xfe}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"every field", full},
		{"negative revision", varintField(nil, 1, uint64(1<<64-5))},
		{"flags as any non-zero varint", varintField(varintField(nil, 2, 7), 3, 1<<40)},
		{"a later revision wins", varintField(varintField(nil, 1, 5), 1, 9)},
		{"a known field with another wire type is skipped", field(protowire.AppendFixed64(protowire.AppendTag(nil, 1, protowire.Fixed64Type), 3), 2, []byte("x"))},
		{"resource fields with other wire types", field(nil, 4, varintField(varintField(nil, 1, 1), 5, 1))},
		{"unknown fields", varintField(field(nil, 99, []byte("zz")), 1000, 3)},
		{"a group", append(protowire.AppendTag(varintField(protowire.AppendTag(nil, 7, protowire.StartGroupType), 1, 1), 7, protowire.EndGroupType), varintField(nil, 1, 2)...)},
		{"an end group alone", protowire.AppendTag(nil, 7, protowire.EndGroupType)},
		{"field number 0", varintField(nil, 0, 1)},
		{"a field number over the maximum", varintField(nil, protowire.MaxValidNumber+1, 1)},
		{"the maximum field number", varintField(nil, protowire.MaxValidNumber, 1)},
		{"truncated length", []byte{0x22, 0x05, 0x0a}},
		{"truncated varint", []byte{0x08, 0x80}},
		{"an over-long varint", append([]byte{0x08}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)},
		{"a label without a value", label(field(nil, 1, []byte("k")))},
		{"a label without a key", label(field(nil, 2, []byte("v")))},
		{"an empty label entry", label(nil)},
		{"a repeated label key: the last wins", field(field(nil, 4, field(field(nil, 1, []byte("k")), 2, []byte("a"))), 4, field(field(nil, 1, []byte("k")), 2, []byte("b")))},
		{"a label entry with an unknown field", label(varintField(field(nil, 1, []byte("k")), 3, 1))},
		{"a label key twice in one entry", label(field(field(nil, 1, []byte("a")), 1, []byte("b")))},
		{"a truncated label entry", label([]byte{0x0a, 0x09})},
		{"invalid UTF-8 in a kind", field(nil, 4, field(nil, 1, bad))},
		{"invalid UTF-8 in a label key", label(field(nil, 1, bad))},
		{"invalid UTF-8 in a label value", label(field(nil, 2, bad))},
		{"invalid UTF-8 in a key's name", field(nil, 5, field(nil, 3, bad))},
		{"invalid UTF-8 in spec bytes is kept", field(nil, 4, field(nil, 5, bad))},
		{"empty spec and status", field(nil, 4, field(field(nil, 5, nil), 6, nil))},
		{"a resource field repeated: the last wins", field(nil, 4, field(field(nil, 3, []byte("a")), 3, []byte("b")))},
		{"a truncated resource", []byte{0x22, 0x02, 0x0a, 0x05}},
		{"a truncated key", []byte{0x2a, 0x02, 0x1a, 0x05}},
	} {
		t.Run(tc.name, func(t *testing.T) { agreeWithProto(t, tc.b) })
	}
}

// FuzzUnmarshalChanges checks unmarshalChanges against proto.Unmarshal on
// arbitrary bytes: the same refusals and the same fields.
func FuzzUnmarshalChanges(f *testing.F) {
	fuzzSeeds(f)
	f.Add(field(nil, 4, field(nil, 4, field(nil, 1, []byte("k")))))
	f.Add(protowire.AppendTag(nil, 7, protowire.StartGroupType))
	f.Fuzz(func(t *testing.T, b []byte) { agreeWithProto(t, b) })
}
