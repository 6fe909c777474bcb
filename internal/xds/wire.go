package xds

import (
	"slices"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// Responses are encoded here rather than by proto.Marshal of a response
// message: a first config of 10,000 services is 30,000 resources, whose
// reflective marshal (a size pass, then UTF-8 checks and a copy of every
// name, version and Any) and 10,000 wrapper messages per type cost more
// than everything else a stream does. What every plain wildcard proxy
// gets in full is encoded once for all of them (wildcardSet), and only
// the nonce per stream. The ADS server's codec hands gRPC those bytes as
// they are (gRPC writes a message's buffers without copying them into
// one), so a first config costs no copy but the socket's.

// encoded is a response encoded here: its fields, in buffers gRPC only
// reads.
type encoded struct {
	data mem.BufferSlice
}

// codec is the ADS server's: responses encoded here go as they are,
// everything else (the requests) through gRPC's proto codec.
type codec struct {
	proto encoding.CodecV2
}

func newCodec() codec { return codec{proto: encoding.GetCodecV2(grpcproto.Name)} }

func (c codec) Name() string { return grpcproto.Name }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if e, ok := v.(*encoded); ok {
		return e.data, nil
	}
	return c.proto.Marshal(v)
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }

// encode returns the response o: the nonce field, then the body (shared
// with every plain wildcard stream, or o's own).
func encode(o *out, delta bool) *encoded {
	num, body := sotwNonceField, sotwBody
	if delta {
		num, body = deltaNonceField, deltaBody
	}
	var b []byte
	if o.shared != nil {
		b = o.shared.encoded(delta, func() []byte { return body(nil, o) })
	} else {
		b = body(nil, o)
	}
	return &encoded{data: mem.BufferSlice{mem.SliceBuffer(appendString(nil, num, o.nonce)), mem.SliceBuffer(b)}}
}

// Field numbers, read from the descriptors.
var (
	deltaResourcesField = fieldNumber((&discovery.DeltaDiscoveryResponse{}).ProtoReflect().Descriptor(), "resources")
	deltaRemovedField   = fieldNumber((&discovery.DeltaDiscoveryResponse{}).ProtoReflect().Descriptor(), "removed_resources")
	deltaTypeURLField   = fieldNumber((&discovery.DeltaDiscoveryResponse{}).ProtoReflect().Descriptor(), "type_url")
	deltaVersionField   = fieldNumber((&discovery.DeltaDiscoveryResponse{}).ProtoReflect().Descriptor(), "system_version_info")

	resourceNameField    = fieldNumber((&discovery.Resource{}).ProtoReflect().Descriptor(), "name")
	resourceVersionField = fieldNumber((&discovery.Resource{}).ProtoReflect().Descriptor(), "version")
	resourceAnyField     = fieldNumber((&discovery.Resource{}).ProtoReflect().Descriptor(), "resource")

	sotwResourcesField = fieldNumber((&discovery.DiscoveryResponse{}).ProtoReflect().Descriptor(), "resources")
	sotwTypeURLField   = fieldNumber((&discovery.DiscoveryResponse{}).ProtoReflect().Descriptor(), "type_url")
	sotwVersionField   = fieldNumber((&discovery.DiscoveryResponse{}).ProtoReflect().Descriptor(), "version_info")

	deltaNonceField = fieldNumber((&discovery.DeltaDiscoveryResponse{}).ProtoReflect().Descriptor(), "nonce")
	sotwNonceField  = fieldNumber((&discovery.DiscoveryResponse{}).ProtoReflect().Descriptor(), "nonce")

	anyTypeURLField = fieldNumber((&anypb.Any{}).ProtoReflect().Descriptor(), "type_url")
	anyValueField   = fieldNumber((&anypb.Any{}).ProtoReflect().Descriptor(), "value")
)

func fieldNumber(d protoreflect.MessageDescriptor, name protoreflect.Name) protowire.Number {
	f := d.Fields().ByName(name)
	if f == nil {
		panic("xds: " + string(d.FullName()) + " has no field " + string(name))
	}
	return f.Number()
}

// A proto3 string or bytes field is left out when empty.

func sizeString(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func anySize(a *anypb.Any) int {
	n := sizeString(anyTypeURLField, a.GetTypeUrl())
	if len(a.GetValue()) > 0 {
		n += protowire.SizeTag(anyValueField) + protowire.SizeBytes(len(a.GetValue()))
	}
	return n
}

func appendAny(b []byte, a *anypb.Any, size int) []byte {
	b = protowire.AppendVarint(b, uint64(size))
	b = appendString(b, anyTypeURLField, a.GetTypeUrl())
	if len(a.GetValue()) > 0 {
		b = protowire.AppendTag(b, anyValueField, protowire.BytesType)
		b = protowire.AppendBytes(b, a.GetValue())
	}
	return b
}

// resourceSize is the size of e as a delta Resource, and of its Any.
func resourceSize(e *sent) (int, int) {
	as := anySize(e.any)
	return sizeString(resourceNameField, e.name) + sizeString(resourceVersionField, e.version) +
		protowire.SizeTag(resourceAnyField) + protowire.SizeBytes(as), as
}

// deltaBody appends to b the fields of o's DeltaDiscoveryResponse but
// the nonce.
func deltaBody(b []byte, o *out) []byte {
	url := o.typ.URL()
	n := sizeString(deltaVersionField, o.version) + sizeString(deltaTypeURLField, url)
	for i := range o.resources {
		rs, _ := resourceSize(&o.resources[i])
		n += protowire.SizeTag(deltaResourcesField) + protowire.SizeBytes(rs)
	}
	for _, r := range o.removed {
		n += protowire.SizeTag(deltaRemovedField) + protowire.SizeBytes(len(r))
	}
	b = slices.Grow(b, n)
	b = appendString(b, deltaVersionField, o.version)
	for i := range o.resources {
		e := &o.resources[i]
		rs, as := resourceSize(e)
		b = protowire.AppendTag(b, deltaResourcesField, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(rs))
		b = appendString(b, resourceVersionField, e.version)
		b = protowire.AppendTag(b, resourceAnyField, protowire.BytesType)
		b = appendAny(b, e.any, as)
		b = appendString(b, resourceNameField, e.name)
	}
	b = appendString(b, deltaTypeURLField, url)
	for _, r := range o.removed {
		// a repeated string keeps its empty elements
		b = protowire.AppendTag(b, deltaRemovedField, protowire.BytesType)
		b = protowire.AppendString(b, r)
	}
	return b
}

// sotwBody appends to b the fields of o's DiscoveryResponse but the
// nonce.
func sotwBody(b []byte, o *out) []byte {
	url := o.typ.URL()
	n := sizeString(sotwVersionField, o.version) + sizeString(sotwTypeURLField, url)
	for _, e := range o.resources {
		n += protowire.SizeTag(sotwResourcesField) + protowire.SizeBytes(anySize(e.any))
	}
	b = slices.Grow(b, n)
	b = appendString(b, sotwVersionField, o.version)
	for _, e := range o.resources {
		b = protowire.AppendTag(b, sotwResourcesField, protowire.BytesType)
		b = appendAny(b, e.any, anySize(e.any))
	}
	return appendString(b, sotwTypeURLField, url)
}
