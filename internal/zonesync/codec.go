package zonesync

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	pb "github.com/meshnames/meshnames/api/zonesync/v1"
	"github.com/meshnames/meshnames/internal/decode"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/validate"
)

// Limits on what a peer may send.
const (
	// MaxMessageBytes is gRPC's limit on one message: a message over it
	// ends the stream (gRPC's rule), so it is far above MaxChangesBytes,
	// which this package enforces itself and which keeps the stream.
	MaxMessageBytes = 16 << 20
	// MaxChangesBytes bounds one encoded batch; a larger one is refused
	// whole, counted, and the stream goes on.
	MaxChangesBytes = 4 << 20
	// MaxBatchItems bounds the puts and deletes of one batch.
	MaxBatchItems = 5000
	// batchBytes is what a sender aims one batch at.
	batchBytes = 512 << 10
)

// batchItems is the most resources a sender puts in one batch (a
// variable so that tests of several batches stay small).
var batchItems = 1000

// errRefused marks input a receiver refuses: counted and logged, and the
// stream goes on.
var errRefused = errors.New("refused")

// refusal is why a receiver refused a batch or a resource of it.
type refusal struct {
	reason string // bounded set, for the metric: malformed, oversized, kind, invalid, zone, owner
	err    error
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return errRefused }

func refuse(reason, format string, args ...any) error {
	return &refusal{reason: reason, err: fmt.Errorf(format, args...)}
}

// refusalReason returns the metric reason of a refusal, or "other".
func refusalReason(err error) string {
	var r *refusal
	if errors.As(err, &r) {
		return r.reason
	}
	return "other"
}

// DecodeChanges decodes one batch a peer sent. It refuses a batch over
// MaxChangesBytes or MaxBatchItems and one that is not a valid Changes
// message; nothing of a refused batch is applied.
func DecodeChanges(b []byte) (*pb.Changes, error) {
	if len(b) > MaxChangesBytes {
		return nil, refuse("oversized", "a batch of %d bytes is over the limit of %d", len(b), MaxChangesBytes)
	}
	var c pb.Changes
	if err := unmarshalChanges(b, &c); err != nil {
		return nil, refuse("malformed", "malformed batch: %v", err)
	}
	if n := len(c.Put) + len(c.Delete); n > MaxBatchItems {
		return nil, refuse("oversized", "a batch of %d resources is over the limit of %d", n, MaxBatchItems)
	}
	if c.Revision < 0 {
		return nil, refuse("malformed", "malformed batch: negative revision %d", c.Revision)
	}
	if c.Last && !c.Snapshot {
		return nil, refuse("malformed", "malformed batch: last is set outside a snapshot")
	}
	return &c, nil
}

// encodeResource is the wire form of a stored resource.
func encodeResource(o *resource.Object) (*pb.Resource, error) {
	spec, err := resource.MarshalSpec(o.Spec)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", o.Key(), err)
	}
	r := &pb.Resource{Kind: string(o.Kind), Mesh: o.Mesh, Name: o.Name, Labels: o.Labels, Spec: spec}
	if o.Status != nil {
		if r.Status, err = resource.MarshalStatus(o.Status); err != nil {
			return nil, fmt.Errorf("encode %s: %w", o.Key(), err)
		}
	}
	return r, nil
}

// DecodeResource decodes a resource a peer sent as strictly as the REST API
// decodes a user's: a known kind, a spec without unknown fields or wrong
// types, defaulted and validated (every violation named by its field).
// Status, written by the peer's controllers, is read as stored. The object
// takes r's labels map: r is a message decoded for this call (a stream's
// batch), which nothing reads the labels of afterwards.
func DecodeResource(r *pb.Resource) (*resource.Object, error) { return decodeResource(r, true) }

// decodeResource is DecodeResource, defaulting and validating the
// resource only when validated is set; a receiver that does not must
// admit the resource (admission.Admitter.Admit defaults and validates it)
// before it stores it.
func decodeResource(r *pb.Resource, validated bool) (*resource.Object, error) {
	d, ok := resource.Lookup(resource.Kind(r.GetKind()))
	if !ok {
		return nil, refuse("kind", "unknown kind %q", r.GetKind())
	}
	if n := len(r.Spec) + len(r.Status); n > store.MaxObjectBytes {
		return nil, refuse("oversized", "%s %q: %d bytes of spec and status is over the limit of %d", d.Kind, r.Name, n, store.MaxObjectBytes)
	}
	obj := &resource.Object{Kind: d.Kind, Mesh: r.Mesh, Name: r.Name, Labels: r.Labels}
	var errs validate.Errors
	if len(r.Spec) == 0 {
		obj.Spec = d.NewSpec()
	} else if s, ok := resource.PlainSpec(d.Kind, r.Spec); ok {
		obj.Spec = s // a synced MeshService, read without reflection
	} else if obj.Spec = d.NewSpec(); !canonicalSpec(r.Spec, obj.Spec) {
		obj.Spec = d.NewSpec()
		errs.Append(decode.JSON(r.Spec, obj.Spec, "spec"))
	}
	if len(r.Status) > 0 {
		if !d.HasStatus {
			errs.Addf("status", "must be empty: %s has no status", d.Kind)
		} else if st, err := resource.UnmarshalStatus(d.Kind, r.Status); err != nil {
			errs.Add("status", err.Error())
		} else {
			obj.Status = st
		}
	}
	if len(errs) == 0 && validated {
		obj.Spec.Default()
		// A Kubernetes zone names its namespaced resources
		// "<object>.<namespace>": the name checked is the object's, which
		// the global names the resource after (acceptFromZone), as the
		// zone's store checks it.
		check := *obj
		check.Name = localName(obj.Name, obj.Labels[resource.LabelNamespace])
		errs = resource.Validate(&check)
	}
	if len(errs) > 0 {
		return nil, refuse("invalid", "%s: %v", obj.Key(), errs)
	}
	return obj, nil
}

// canonicalSpec decodes spec into out through encoding/json and reports
// whether spec is exactly what json.Marshal makes of the result: what a
// peer's encodeResource sends. Such a document has no unknown or
// duplicate fields and only exact field names, so the strict decoder
// would decode it to the same value; it costs half of it and a third of
// its allocations. On false, out holds anything and the caller decodes
// strictly, which names the problems.
func canonicalSpec(spec []byte, out resource.Spec) bool {
	if json.Unmarshal(spec, out) != nil {
		return false
	}
	again, err := json.Marshal(out)
	return err == nil && bytes.Equal(again, spec)
}

// decodeKey decodes the key of a deletion a peer sent.
func decodeKey(k *pb.Key) (resource.Key, error) {
	d, ok := resource.Lookup(resource.Kind(k.GetKind()))
	if !ok {
		return resource.Key{}, refuse("kind", "unknown kind %q", k.GetKind())
	}
	key := resource.Key{Kind: d.Kind, Mesh: k.GetMesh(), Name: k.GetName()}
	check := validate.DNS1123Subdomain
	name := key.Name
	if d.ServiceKind {
		check = validate.DNS1035Label
		// A Kubernetes zone's "<object>.<namespace>" (see DecodeResource).
		if i := strings.LastIndexByte(name, '.'); i >= 0 {
			if msg := validate.DNS1123Label(name[i+1:]); msg != "" {
				return resource.Key{}, refuse("invalid", "delete %s: name: the part after the last dot is a Kubernetes namespace and %s", key, msg)
			}
			name = name[:i]
		}
	}
	if msg := check(name); msg != "" {
		return resource.Key{}, refuse("invalid", "delete %s: name: %s", key, msg)
	}
	if d.MeshScoped != (key.Mesh != "") {
		return resource.Key{}, refuse("invalid", "delete %s: mesh must be set exactly for mesh-scoped kinds", key)
	}
	if key.Mesh != "" {
		if msg := validate.DNS1123Subdomain(key.Mesh); msg != "" {
			return resource.Key{}, refuse("invalid", "delete %s: mesh: %s", key, msg)
		}
	}
	return key, nil
}

func wireKey(k resource.Key) *pb.Key {
	return &pb.Key{Kind: string(k.Kind), Mesh: k.Mesh, Name: k.Name}
}
