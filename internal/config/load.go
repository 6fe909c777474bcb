package config

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v2"

	"github.com/meshnames/meshnames/internal/decode"
	"github.com/meshnames/meshnames/internal/validate"
)

// EnvPrefix starts the name of every configuration environment variable.
const EnvPrefix = "MESHNAMES_"

// MaxFileBytes bounds the configuration file.
const MaxFileBytes = 1 << 20

// Load returns the defaults overlaid with the file at path (when path is not
// empty) and then with environment variables from lookup (os.LookupEnv in
// production). Problems are returned as validate.Errors naming the field,
// the file or the variable. Load does not call Validate: flags come next.
func Load(path string, lookup func(string) (string, bool)) (Config, error) {
	cfg := Default()
	var errs validate.Errors
	if path != "" {
		data, err := readFile(path)
		if err != nil {
			return cfg, err
		}
		for _, e := range decode.YAML(data, &cfg, "") {
			errs.Add(validate.Path(e.Field), e.Message+" (in "+path+")")
		}
	}
	for _, f := range Fields() {
		v, ok := lookup(f.Env)
		if !ok {
			continue
		}
		if msg := f.set(&cfg, v); msg != "" {
			errs.Addf(validate.Path(f.Path), "%s: %s", f.Env, msg)
		}
	}
	return cfg, errs.Err()
}

func readFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read config file: %w", err)
	}
	if st.Size() > MaxFileBytes {
		return nil, fmt.Errorf("read config file %s: larger than %d bytes", path, MaxFileBytes)
	}
	return os.ReadFile(path)
}

// Field is one leaf of the tree.
type Field struct {
	Path  string // api.addr
	Env   string // MESHNAMES_API_ADDR
	index []int
}

// Fields lists every leaf of the configuration tree.
func Fields() []Field {
	var out []Field
	walk(reflect.TypeFor[Config](), "", nil, &out)
	return out
}

var durationType = reflect.TypeFor[Duration]()

func walk(t reflect.Type, prefix string, index []int, out *[]Field) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		idx := append(append([]int(nil), index...), i)
		if f.Type.Kind() == reflect.Struct && f.Type != durationType {
			walk(f.Type, path, idx, out)
			continue
		}
		*out = append(*out, Field{Path: path, Env: envName(path), index: idx})
	}
}

// envName turns store.dataDir into MESHNAMES_STORE_DATA_DIR.
func envName(path string) string {
	var b strings.Builder
	b.WriteString(EnvPrefix)
	for i, r := range path {
		switch {
		case r == '.':
			b.WriteByte('_')
		case r >= 'A' && r <= 'Z':
			if i > 0 && path[i-1] != '.' {
				b.WriteByte('_')
			}
			b.WriteRune(r)
		default:
			b.WriteString(strings.ToUpper(string(r)))
		}
	}
	return b.String()
}

// Set assigns the text value v to the field at path (used for flags).
func (c *Config) Set(path, v string) error {
	for _, f := range Fields() {
		if f.Path == path {
			if msg := f.set(c, v); msg != "" {
				return validate.Errors{{Field: path, Message: msg}}
			}
			return nil
		}
	}
	return fmt.Errorf("config: no field %q", path)
}

func (f Field) set(c *Config, v string) string {
	fv := reflect.ValueOf(c).Elem().FieldByIndex(f.index)
	switch {
	case fv.Type() == durationType:
		return fv.Addr().Interface().(*Duration).set(v)
	case fv.Kind() == reflect.String:
		fv.SetString(v)
	case fv.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Sprintf("must be true or false, got %q", v)
		}
		fv.SetBool(b)
	case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.String:
		// A list in the environment or a flag: comma-separated.
		var items []string
		for _, item := range strings.Split(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				items = append(items, item)
			}
		}
		fv.Set(reflect.ValueOf(items))
	case fv.Kind() == reflect.Int:
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Sprintf("must be an integer, got %q", v)
		}
		fv.SetInt(int64(n))
	default:
		panic("config: unsupported field type " + fv.Type().String())
	}
	return ""
}

// YAML renders the configuration as YAML, for `meshnames config show`, in
// the order of the struct (mode, zone, store, ...) rather than sorted.
func (c Config) YAML() ([]byte, error) {
	j, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	var doc yaml.MapSlice // JSON is YAML; a MapSlice keeps the key order
	if err := yaml.Unmarshal(j, &doc); err != nil {
		return nil, err
	}
	return yaml.Marshal(doc)
}
