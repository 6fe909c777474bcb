// Package decode turns JSON (and YAML, through sigs.k8s.io/yaml) documents
// into Go structs strictly: an unknown field, a value of the wrong type or a
// number out of range is reported with its field path, and every such
// problem in the document is reported at once rather than only the first.
//
// encoding/json stops at the first error, matches field names without regard
// to case and reports unknown fields without a path, which is not what users
// of a control plane need to fix a file. Struct fields are matched by their
// exact json tag name. Types that need their own rule implement Decoder.
//
// It imports only the standard library and validate.
package decode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/meshnames/meshnames/internal/validate"
)

// Decoder is implemented by types that decode themselves from a generic JSON
// value (map[string]any, []any, string, bool, json.Number or nil). It returns
// a message stating the rule when v does not fit.
type Decoder interface {
	DecodeValue(v any) (msg string)
}

// MaxDepth bounds nesting so that a hostile document cannot exhaust the stack.
const MaxDepth = 64

// JSON decodes data into out (a pointer), reporting problems under root.
func JSON(data []byte, out any, root validate.Path) validate.Errors {
	v, err := Generic(data)
	if err != nil {
		return validate.Errors{{Field: string(root), Message: err.Error()}}
	}
	return Value(v, out, root)
}

// YAML converts a YAML document to JSON and decodes it like JSON.
func YAML(data []byte, out any, root validate.Path) validate.Errors {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return validate.Errors{{Field: string(root), Message: "invalid YAML: " + err.Error()}}
	}
	return JSON(j, out, root)
}

// Generic parses JSON into the generic form (numbers as json.Number) and
// rejects trailing data and excessive nesting.
func Generic(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("invalid JSON: unexpected data after the document")
	}
	if depth(v, 0) > MaxDepth {
		return nil, fmt.Errorf("document nests more than %d levels deep", MaxDepth)
	}
	return v, nil
}

func depth(v any, d int) int {
	if d > MaxDepth {
		return d
	}
	max := d
	switch t := v.(type) {
	case map[string]any:
		for _, c := range t {
			if n := depth(c, d+1); n > max {
				max = n
			}
		}
	case []any:
		for _, c := range t {
			if n := depth(c, d+1); n > max {
				max = n
			}
		}
	}
	return max
}

// Value decodes the generic value v into out (a pointer).
func Value(v any, out any, root validate.Path) validate.Errors {
	rv := reflect.ValueOf(out)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		panic("decode: out must be a non-nil pointer")
	}
	var errs validate.Errors
	into(v, rv.Elem(), root, &errs)
	return errs
}

var (
	decoderType = reflect.TypeFor[Decoder]()
	rawType     = reflect.TypeFor[json.RawMessage]()
	timeType    = reflect.TypeFor[time.Time]()
)

func into(v any, rv reflect.Value, p validate.Path, errs *validate.Errors) {
	if rv.CanAddr() && rv.Addr().Type().Implements(decoderType) {
		if v == nil {
			return
		}
		if msg := rv.Addr().Interface().(Decoder).DecodeValue(v); msg != "" {
			errs.Add(p, msg)
		}
		return
	}
	switch rv.Type() {
	case rawType:
		if v == nil {
			return
		}
		b, err := json.Marshal(v)
		if err != nil {
			errs.Add(p, err.Error())
			return
		}
		rv.SetBytes(b)
		return
	case timeType:
		s, ok := v.(string)
		if !ok {
			errs.Add(p, "must be a time in RFC 3339 format, got "+describe(v))
			return
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			errs.Add(p, "must be a time in RFC 3339 format, got "+strconv.Quote(s))
			return
		}
		rv.Set(reflect.ValueOf(t))
		return
	}

	switch rv.Kind() {
	case reflect.Pointer:
		if v == nil {
			rv.SetZero()
			return
		}
		n := reflect.New(rv.Type().Elem())
		into(v, n.Elem(), p, errs)
		rv.Set(n)
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			if v != nil {
				errs.Add(p, "must be an object, got "+describe(v))
			}
			return
		}
		fields := fieldsOf(rv.Type())
		for _, k := range sortedKeys(m) {
			idx, ok := fields[k]
			if !ok {
				errs.Add(p.Field(k), "unknown field")
				continue
			}
			into(m[k], rv.Field(idx), p.Field(k), errs)
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			if v != nil {
				errs.Add(p, "must be an object, got "+describe(v))
			}
			return
		}
		if rv.Type().Key().Kind() != reflect.String {
			panic("decode: map keys must be strings")
		}
		out := reflect.MakeMapWithSize(rv.Type(), len(m))
		for _, k := range sortedKeys(m) {
			ev := reflect.New(rv.Type().Elem()).Elem()
			into(m[k], ev, p.Key(k), errs)
			out.SetMapIndex(reflect.ValueOf(k).Convert(rv.Type().Key()), ev)
		}
		rv.Set(out)
	case reflect.Slice:
		s, ok := v.([]any)
		if !ok {
			if v != nil {
				errs.Add(p, "must be a list, got "+describe(v))
			}
			return
		}
		out := reflect.MakeSlice(rv.Type(), len(s), len(s))
		for i, ev := range s {
			into(ev, out.Index(i), p.Index(i), errs)
		}
		rv.Set(out)
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			if v != nil {
				errs.Add(p, "must be a string, got "+describe(v))
			}
			return
		}
		rv.SetString(s)
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			if v != nil {
				errs.Add(p, "must be true or false, got "+describe(v))
			}
			return
		}
		rv.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			if v != nil {
				errs.Add(p, "must be an integer, got "+describe(v))
			}
			return
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil || rv.OverflowInt(i) {
			errs.Add(p, "must be an integer within range, got "+string(n))
			return
		}
		rv.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(json.Number)
		if !ok {
			if v != nil {
				errs.Add(p, "must be a non-negative integer, got "+describe(v))
			}
			return
		}
		u, err := strconv.ParseUint(string(n), 10, 64)
		if err != nil || rv.OverflowUint(u) {
			errs.Add(p, "must be a non-negative integer within range, got "+string(n))
			return
		}
		rv.SetUint(u)
	case reflect.Float32, reflect.Float64:
		n, ok := v.(json.Number)
		if !ok {
			if v != nil {
				errs.Add(p, "must be a number, got "+describe(v))
			}
			return
		}
		f, err := n.Float64()
		if err != nil || math.IsInf(f, 0) {
			errs.Add(p, "must be a number within range, got "+string(n))
			return
		}
		rv.SetFloat(f)
	case reflect.Interface:
		if rv.NumMethod() != 0 {
			panic("decode: unsupported interface type " + rv.Type().String())
		}
		if v != nil {
			rv.Set(reflect.ValueOf(v))
		}
	default:
		panic("decode: unsupported type " + rv.Type().String())
	}
}

// fieldsOf maps json tag names to field indexes. Fields without a json tag
// or tagged "-" are not decodable.
func fieldsOf(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, _, _ := cut(tag, ',')
		if name == "" || name == "-" {
			continue
		}
		m[name] = i
	}
	return m
}

func cut(s string, sep byte) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// describe names the JSON type of v for error messages.
func describe(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case string:
		if len(t) > 40 {
			t = t[:40] + "..."
		}
		return "string " + strconv.Quote(t)
	case bool:
		return "boolean " + strconv.FormatBool(t)
	case json.Number:
		return "number " + string(t)
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	default:
		return fmt.Sprintf("%T", v)
	}
}
