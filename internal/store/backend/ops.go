package backend

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// Check validates the shape of a resource operation (create, update,
// update status, patch status, delete) and returns its key and the
// descriptor of its kind. Its errors carry the operation and key as
// context.
func Check(op store.Op) (resource.Key, *resource.Descriptor, error) {
	var key resource.Key
	switch op.Type {
	case store.OpCreate, store.OpUpdate, store.OpUpdateStatus, store.OpPatchStatus:
		if op.Object == nil {
			return key, nil, fmt.Errorf("%s: no object", op.Type)
		}
		if op.Type == store.OpPatchStatus && op.Patch == nil {
			return key, nil, fmt.Errorf("%s %s: no patch", op.Type, op.Object.Key())
		}
		key = op.Object.Key()
	case store.OpDelete:
		key = op.Key
	default:
		return key, nil, fmt.Errorf("apply: unknown operation %v", op.Type)
	}
	bad := func(msg string, args ...any) (resource.Key, *resource.Descriptor, error) {
		return key, nil, fmt.Errorf("%s %s: %s", op.Type, key, fmt.Sprintf(msg, args...))
	}
	d, ok := resource.Lookup(key.Kind)
	switch {
	case !ok:
		return bad("unknown kind %q", key.Kind)
	case key.Name == "":
		return bad("name is required")
	case !Printable(key.Name) || !Printable(key.Mesh):
		// PostgreSQL text cannot hold NUL or invalid UTF-8; refuse them
		// on every backend so that all behave alike (and the embedded
		// engine may use NUL as a separator in its keys).
		return bad("name and mesh must be valid UTF-8 without control characters")
	case d.MeshScoped && key.Mesh == "":
		return bad("mesh is required: %s is mesh-scoped", key.Kind)
	case !d.MeshScoped && key.Mesh != "":
		return bad("mesh must be empty: %s is not mesh-scoped", key.Kind)
	}
	return key, d, nil
}

// Printable reports whether s is valid UTF-8 without control characters.
func Printable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl)
}

// Encoded is what an operation writes of an object, as JSON text: labels
// and spec for create and update, status for create, update status and
// patch status (empty when the operation does not write it; Status is
// also empty for no status).
type Encoded struct {
	Labels, Spec, Status string
}

// Encode encodes what an operation of type t writes of obj, a resource of
// the kind d describes.
func Encode(obj *resource.Object, t store.OpType, d *resource.Descriptor) (Encoded, error) {
	var e Encoded
	var err error
	if t == store.OpCreate || t == store.OpUpdate {
		if obj.Spec != nil && reflect.TypeOf(obj.Spec) != d.SpecType() {
			return e, fmt.Errorf("spec is %T, want %T", obj.Spec, d.NewSpec())
		}
		e.Labels = EncodeLabels(obj.Labels)
		if e.Spec, err = EncodeSpec(obj.Spec); err != nil {
			return e, err
		}
	}
	if t == store.OpCreate || t == store.OpUpdateStatus || t == store.OpPatchStatus {
		switch {
		case !d.HasStatus && (obj.Status != nil || t != store.OpCreate):
			return e, fmt.Errorf("%s has no status", d.Kind)
		case obj.Status != nil && reflect.TypeOf(obj.Status) != d.StatusType():
			return e, fmt.Errorf("status is %T, want %T", obj.Status, d.NewStatus())
		}
		if e.Status, err = EncodeStatus(obj.Status); err != nil {
			return e, err
		}
	}
	return e, nil
}

// EncodeLabels encodes labels as a JSON object ("{}" when there are none).
func EncodeLabels(labels map[string]string) string {
	if len(labels) == 0 {
		return "{}"
	}
	return owned(resource.AppendLabels(make([]byte, 0, 256), labels))
}

// owned returns b as a string without copying it: b is the caller's own
// new encoding, which nothing writes to afterwards (every write of a
// resource encodes it, and copying the three encodings was 4% of what a
// zone allocated storing an initial sync).
func owned(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// EncodeSpec encodes a spec as JSON ("{}" for nil).
func EncodeSpec(s resource.Spec) (string, error) {
	if s == nil {
		return "{}", nil
	}
	b, err := resource.MarshalSpec(s)
	if err != nil {
		return "", fmt.Errorf("encode spec: %w", err)
	}
	return owned(b), nil
}

// EncodeStatus encodes a status as JSON ("" for nil: no status).
func EncodeStatus(s resource.Status) (string, error) {
	if s == nil {
		return "", nil
	}
	b, err := resource.MarshalStatus(s)
	if err != nil {
		return "", fmt.Errorf("encode status: %w", err)
	}
	return owned(b), nil
}

// Decode builds the live object of key from its stored metadata and JSON
// text (labels may be "" for none, status "" for no status). The object
// belongs to the caller.
func Decode(key resource.Key, version, revision, created, modified int64, labels, spec, status string) (*resource.Object, error) {
	o := &resource.Object{
		Kind:             key.Kind,
		Mesh:             key.Mesh,
		Name:             key.Name,
		Version:          version,
		Revision:         revision,
		CreationTime:     time.Unix(0, created).UTC(),
		ModificationTime: time.Unix(0, modified).UTC(),
	}
	var err error
	if labels != "" {
		if o.Labels, err = resource.UnmarshalLabels([]byte(labels), o.Name); err != nil {
			return nil, fmt.Errorf("decode %s labels: %w", key, err)
		}
	}
	if o.Spec, err = resource.UnmarshalSpec(key.Kind, []byte(spec)); err != nil {
		return nil, fmt.Errorf("decode %s: %w", key, err)
	}
	if o.Status, err = resource.UnmarshalStatus(key.Kind, []byte(status)); err != nil {
		return nil, fmt.Errorf("decode %s: %w", key, err)
	}
	return o, nil
}

// Dependencies checks op's DependsOn against the results of the earlier
// operations of its batch (op is at index): nil when op may run.
func Dependencies(op store.Op, index int, results []store.Result) error {
	for _, d := range op.DependsOn {
		switch {
		case d < 0 || d >= index:
			return fmt.Errorf("%s: DependsOn names op %d, which does not come before it (op %d)", op.Type, d, index)
		case results[d].Err != nil:
			return fmt.Errorf("%s: %w: op %d: %v", op.Type, store.ErrDependencyFailed, d, results[d].Err)
		}
	}
	return nil
}

// PatchStatus applies p to the stored status cur: the fields p names and
// the conditions of the types it names come from next, the rest from cur.
// Both are JSON objects, or "" for no status. whole reports that the
// result holds exactly what next holds: cur was "" and p named every part
// of next (a controller naming a new service).
func PatchStatus(cur, next string, p *store.StatusPatch) (patched string, whole bool, err error) {
	if cur == "" && next != "" && namesAll(next, p) {
		return next, true, nil
	}
	patched, dropped, err := patchStatus(cur, next, p)
	return patched, err == nil && cur == "" && next != "" && !dropped, err
}

// patchStatus is PatchStatus; dropped reports that a part of next was
// left out because p does not name it.
func patchStatus(cur, next string, p *store.StatusPatch) (string, bool, error) {
	var c, n map[string]json.RawMessage
	if cur != "" {
		if err := json.Unmarshal([]byte(cur), &c); err != nil {
			return "", false, fmt.Errorf("stored status: %w", err)
		}
	}
	if next != "" {
		if err := json.Unmarshal([]byte(next), &n); err != nil {
			return "", false, fmt.Errorf("status: %w", err)
		}
	}
	if c == nil {
		c = map[string]json.RawMessage{}
	}
	taken := 0 // of next's fields
	for _, f := range p.Fields {
		if v, ok := n[f]; ok {
			c[f] = v
			taken++
		} else {
			delete(c, f)
		}
	}
	_, hasConditions := n["conditions"]
	if hasConditions && len(p.Conditions) > 0 && !slices.Contains(p.Fields, "conditions") {
		taken++ // taken in part (below)
	}
	dropped := taken < len(n)
	if len(p.Conditions) > 0 {
		type cond struct {
			Type string `json:"type"`
		}
		var kept []json.RawMessage
		for _, list := range []struct {
			raw  json.RawMessage
			ours bool
		}{{c["conditions"], false}, {n["conditions"], true}} {
			var items []json.RawMessage
			if len(list.raw) > 0 {
				if err := json.Unmarshal(list.raw, &items); err != nil {
					return "", false, fmt.Errorf("conditions: %w", err)
				}
				if list.ours && len(items) == 0 {
					dropped = true // an empty list is left out
				}
			}
			for _, it := range items {
				var ct cond
				if err := json.Unmarshal(it, &ct); err != nil {
					return "", false, fmt.Errorf("condition: %w", err)
				}
				if slices.Contains(p.Conditions, ct.Type) == list.ours {
					kept = append(kept, it)
				} else if list.ours {
					dropped = true
				}
			}
		}
		if len(kept) == 0 {
			delete(c, "conditions")
		} else {
			b, err := json.Marshal(kept)
			if err != nil {
				return "", false, err
			}
			c["conditions"] = b
		}
	}
	if len(c) == 0 && cur == "" && next == "" {
		return "", false, nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return "", false, err
	}
	return string(b), dropped, nil
}

// namesAll reports whether next is a JSON object of which p names every
// part: each member is a field p names, or the conditions, not empty and
// each of a type p names when p names condition types. A patch of next
// over no status then stores next as it is, and neither decodes it into a
// map nor encodes it again (a first naming patches 100,000 statuses so).
// It answers false for anything it does not recognise (invalid JSON or
// UTF-8, a member name with escapes, a member twice), which patchStatus
// decides.
func namesAll(next string, p *store.StatusPatch) bool {
	if !utf8.ValidString(next) || !json.Valid([]byte(next)) {
		return false
	}
	i := skipSpace(next, 0)
	if next[i] != '{' {
		return false
	}
	var seen []string
	for i = skipSpace(next, i+1); next[i] != '}'; {
		end := jsonValueEnd(next, i)
		name := next[i+1 : end-1]
		if strings.IndexByte(name, '\\') >= 0 || slices.Contains(seen, name) {
			return false
		}
		seen = append(seen, name)
		i = skipSpace(next, skipSpace(next, end)+1) // past the colon
		end = jsonValueEnd(next, i)
		switch {
		case name == "conditions" && len(p.Conditions) > 0:
			var items []struct {
				Type string `json:"type"`
			}
			if json.Unmarshal([]byte(next[i:end]), &items) != nil || len(items) == 0 {
				return false
			}
			for _, it := range items {
				if !slices.Contains(p.Conditions, it.Type) {
					return false
				}
			}
		case !slices.Contains(p.Fields, name):
			return false
		}
		if i = skipSpace(next, end); next[i] == ',' {
			i = skipSpace(next, i+1)
		}
	}
	return true
}

// skipSpace returns the index of the first byte of s from i on that is
// not JSON white space.
func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// jsonValueEnd returns the index just past the JSON value that starts at
// s[i], s being valid JSON.
func jsonValueEnd(s string, i int) int {
	depth := 0
	for ; i < len(s); i++ {
		switch s[i] {
		case '"':
			for i++; s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // the end of a literal
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i // the end of a literal
			}
		}
	}
	return i
}
