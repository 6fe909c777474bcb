package main

import (
	"errors"
	"fmt"
	"sync/atomic"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// codec marshals requests with proto and reads responses with protowire,
// keeping only what the load needs (type, nonce, how many resources, the
// watched names): a first config of 10,000 services is about 30,000
// resources, which a full unmarshal would copy and allocate for every
// proxy, on the cores the control plane shares.
type codec struct{}

func (codec) Name() string { return "proto" }

func (codec) Marshal(v any) (mem.BufferSlice, error) {
	b, err := proto.Marshal(v.(proto.Message))
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (codec) Unmarshal(data mem.BufferSlice, v any) error {
	r, ok := v.(*response)
	if !ok {
		return fmt.Errorf("xdsload: cannot decode into %T", v)
	}
	if len(data) == 1 {
		return r.parse(data[0].ReadOnlyData())
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return r.parse(buf.ReadOnlyData())
}

// response is what a proxy keeps of a DeltaDiscoveryResponse.
type response struct {
	watches   *atomic.Pointer[map[string]*watch]
	typeURL   string
	nonce     string
	resources int
	hits      []hit
}

// hit is a watched resource in a response.
type hit struct {
	w       *watch
	version string
}

// Field numbers, from the descriptors rather than by hand.
var (
	respFields = (&discovery.DeltaDiscoveryResponse{}).ProtoReflect().Descriptor().Fields()
	resFields  = (&discovery.Resource{}).ProtoReflect().Descriptor().Fields()

	fResources = number(respFields, "resources")
	fTypeURL   = number(respFields, "type_url")
	fNonce     = number(respFields, "nonce")
	fName      = number(resFields, "name")
	fVersion   = number(resFields, "version")
)

func number(fs protoreflect.FieldDescriptors, name protoreflect.Name) protowire.Number {
	f := fs.ByName(name)
	if f == nil {
		panic("xdsload: no field " + string(name))
	}
	return f.Number()
}

var errMalformed = errors.New("xdsload: malformed DeltaDiscoveryResponse")

// fields calls f with each field of the message b; bytes fields (and
// nested messages) come as v, others are skipped.
func fields(b []byte, f func(num protowire.Number, v []byte)) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
		if typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return errMalformed
			}
			f(num, v)
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return errMalformed
		}
		b = b[m:]
	}
	return nil
}

func (r *response) parse(b []byte) error {
	watches := *r.watches.Load()
	var inner error
	err := fields(b, func(num protowire.Number, v []byte) {
		switch num {
		case fTypeURL:
			r.typeURL = string(v)
		case fNonce:
			r.nonce = string(v)
		case fResources:
			r.resources++
			if len(watches) == 0 {
				return
			}
			var name, version []byte
			if err := fields(v, func(num protowire.Number, v []byte) {
				switch num {
				case fName:
					name = v
				case fVersion:
					version = v
				}
			}); err != nil {
				inner = err
				return
			}
			if w := watches[string(name)]; w != nil {
				r.hits = append(r.hits, hit{w: w, version: string(version)})
			}
		}
	})
	return errors.Join(err, inner)
}
