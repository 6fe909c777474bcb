// Package decode turns JSON and YAML (through go.yaml.in/yaml/v2) documents
// into Go structs strictly: an unknown field, a value of the wrong type or a
// number out of range is reported with its field path, and every such
// problem in the document is reported at once rather than only the first.
//
// encoding/json stops at the first error, matches field names without regard
// to case and reports unknown fields without a path, which is not what users
// of a control plane need to fix a file. Struct fields are matched by their
// exact json tag name; a string field tagged `decode:"nonempty"` refuses an
// empty string (it may be left out). Types that need their own rule
// implement Decoder.
//
// Lines (lines.go) finds the line of a field path in a YAML or JSON document
// (through go.yaml.in/yaml/v3, which keeps positions), so that a problem is
// reported where its field is.
//
// It imports the standard library, validate and the YAML libraries only.
// Its functions are safe for concurrent use.
package decode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"sync"
	"time"

	yaml2 "go.yaml.in/yaml/v2"

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

// YAML decodes one YAML document (or JSON, which is YAML) like JSON.
func YAML(data []byte, out any, root validate.Path) validate.Errors {
	v, err := YAMLGeneric(data)
	if err != nil {
		return validate.Errors{{Field: string(root), Message: err.Error()}}
	}
	return Value(v, out, root)
}

// YAMLGeneric parses one YAML document into the generic form JSON decodes
// to (map[string]any, []any, string, bool, json.Number, nil), in a single
// pass. Duplicate keys are an error (YAML parsers usually keep the last one
// silently). Unlike sigs.k8s.io/yaml, which converts the first document and
// drops whatever follows it, it fails when the input holds a second document
// or anything after the first: a caller that means a multi-document stream
// splits it first, and content that would be ignored is a mistake the user
// should hear about. Empty input is nil.
func YAMLGeneric(data []byte) (any, error) {
	dec := yaml2.NewDecoder(bytes.NewReader(data))
	dec.SetStrict(true)
	var first any
	if err := dec.Decode(&first); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	for {
		var next any
		err := dec.Decode(&next)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("invalid YAML: unexpected content after the document: %w", err)
		}
		if next != nil {
			return nil, errors.New("invalid YAML: more than one document; give one document at a time")
		}
		// An empty document (a trailing "---") holds nothing to lose.
	}
	return fromYAML(first, 0)
}

// fromYAML converts what yaml.v2 decodes into the generic JSON form.
func fromYAML(v any, depth int) (any, error) {
	if depth > MaxDepth {
		return nil, fmt.Errorf("document nests more than %d levels deep", MaxDepth)
	}
	switch t := v.(type) {
	case nil, string, bool:
		return t, nil
	case int:
		return json.Number(strconv.Itoa(t)), nil
	case int64:
		return json.Number(strconv.FormatInt(t, 10)), nil
	case uint64:
		return json.Number(strconv.FormatUint(t, 10)), nil
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return nil, fmt.Errorf("invalid YAML: %v is not a number JSON can hold", t)
		}
		return json.Number(strconv.FormatFloat(t, 'g', -1, 64)), nil
	case time.Time:
		return t.Format(time.RFC3339Nano), nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			c, err := fromYAML(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			var key string
			switch kt := k.(type) {
			case string:
				key = kt
			case int, int64, uint64, float64, bool:
				key = fmt.Sprint(kt)
			default:
				return nil, fmt.Errorf("invalid YAML: a mapping key must be a string, got %v", k)
			}
			c, err := fromYAML(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[key] = c
		}
		return out, nil
	}
	return nil, fmt.Errorf("invalid YAML: unsupported value %v (%T)", v, v)
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
	// Decoder.More is false for a stray ']' or '}', so look at the bytes.
	if len(bytes.TrimSpace(data[dec.InputOffset():])) > 0 {
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
			f, ok := fields[k]
			if !ok {
				errs.Add(unknownFieldPath(p, k), "unknown field")
				continue
			}
			if f.nonEmpty && m[k] == "" {
				errs.Add(p.Field(k), "must not be empty: leave the field out to give it no value")
				continue
			}
			into(m[k], rv.FieldByIndex(f.index), p.Field(k), errs)
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
		stringValues := rv.Type().Elem().Kind() == reflect.String
		for _, k := range sortedKeys(m) {
			ev := reflect.New(rv.Type().Elem()).Elem()
			e := m[k]
			if stringValues {
				e = scalarString(e)
			}
			into(e, ev, p.Key(k), errs)
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
				msg := "must be a string, got " + describe(v)
				if _, num := v.(json.Number); num {
					msg += " (quote it if it is meant as text)"
				}
				errs.Add(p, msg)
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
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			errs.Add(p, "must be an integer, got number "+string(n))
			return
		}
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
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			errs.Add(p, "must be a non-negative integer, got number "+string(n))
			return
		}
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

// unknownFieldPath is the path of a key that is not a field. Field names
// are plain identifiers; any other key (empty, or with dots or spaces) is
// quoted so that the path stays unambiguous and never empty.
func unknownFieldPath(p validate.Path, k string) validate.Path {
	if k == "" {
		return p.Key(k)
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return p.Key(k)
		}
	}
	return p.Field(k)
}

// scalarString turns a boolean into its text. Maps of strings are labels,
// tags and selectors, and seed 001 writes `k8s.kuma.io/is-headless-service:
// false` unquoted, meaning the string "false". Numbers are not converted:
// YAML reads 1.10 as 1.1 and 010 as 8, so their text would silently change;
// the user must quote them.
func scalarString(v any) any {
	if b, ok := v.(bool); ok {
		return strconv.FormatBool(b)
	}
	return v
}

// field is a decodable struct field: its index path, and whether an
// empty string given for it is refused (tag `decode:"nonempty"`). Such a
// field is optional, and an empty value written out is refused rather
// than read as the field left out: a port `name: ""` is a name that breaks
// the naming rule, not an unnamed port, and with omitempty it would not
// even survive a round trip.
type field struct {
	index    []int
	nonEmpty bool
}

// fieldsOf maps json tag names to fields. Fields without a json tag or
// tagged "-" are not decodable, except that the fields of an embedded
// struct without a json name are promoted, as encoding/json does, so that
// what json.Marshal writes for such a struct decodes back. A field of the
// outer struct wins over a promoted one of the same name.
//
// The result is computed once per type and shared; callers must not modify it.
func fieldsOf(t reflect.Type) map[string]field {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]field)
	}
	m, _ := fieldCache.LoadOrStore(t, computeFields(t))
	return m.(map[string]field)
}

// fieldCache maps a struct type to its fieldsOf result; decoding is hot
// (every API write) and the set of types is small and fixed.
var fieldCache sync.Map

func computeFields(t reflect.Type) map[string]field {
	m := make(map[string]field, t.NumField())
	var embedded []reflect.StructField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := cut(tag, ',')
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			embedded = append(embedded, f)
			continue
		}
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		m[name] = field{index: []int{i}, nonEmpty: f.Tag.Get("decode") == "nonempty"}
	}
	for _, f := range embedded {
		if tag := f.Tag.Get("json"); tag == "-" {
			continue
		}
		for name, pf := range computeFields(f.Type) {
			if _, taken := m[name]; !taken {
				m[name] = field{index: append([]int{f.Index[0]}, pf.index...), nonEmpty: pf.nonEmpty}
			}
		}
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
