package gui

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/resource"
)

var update = flag.Bool("update", false, "rewrite the want section of testdata/pages/*.txtar")

// TestPages renders each testdata/pages/*.txtar: its comment is the path
// of a page and its expected status ("GET /gui/services 200"), the file
// resources.json the resources (with status) in the store, and "want" the
// page. With insights.json (zone name to the body of its _insight, an
// error for a zone not there) the GUI is a global's; with link.json (a
// GlobalLink) a zone's; with xds.json (the body of _xds) every Dataplane's
// proxy is in that state. Run with -update to rewrite "want".
func TestPages(t *testing.T) {
	files, err := filepath.Glob("testdata/pages/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden pages: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			fields := strings.Fields(string(ar.Comment))
			if len(fields) != 3 || fields[0] != "GET" {
				t.Fatalf("comment %q: want GET PATH STATUS", ar.Comment)
			}
			wantCode, _ := strconv.Atoi(fields[2])
			var objs []byte
			var tunes []func(*Options)
			for _, f := range ar.Files {
				switch f.Name {
				case "resources.json":
					objs = f.Data
				case "insights.json":
					tunes = append(tunes, globalOf(t, f.Data))
				case "link.json":
					tunes = append(tunes, zoneOf(t, f.Data))
				case "xds.json":
					tunes = append(tunes, xdsOf(t, f.Data))
				}
			}
			u := newUnitWith(t, decodeObjects(t, objs), func(o *Options) {
				for _, tune := range tunes {
					tune(o)
				}
			})
			code, body := u.get(t, fields[1])
			if code != wantCode {
				t.Errorf("status %d, want %d", code, wantCode)
			}
			got := []byte(body)
			if !bytes.HasSuffix(got, []byte("\n")) {
				got = append(got, '\n') // txtar ends every file with one
			}
			if *update {
				ar.Files = slicesDeleteWant(ar.Files)
				ar.Files = append(ar.Files, txtar.File{Name: "want", Data: got})
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			var want []byte
			for _, f := range ar.Files {
				if f.Name == "want" {
					want = f.Data
				}
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("page (-want +got), rerun with -update if intended:\n%s", diff)
			}
		})
	}
}

func slicesDeleteWant(fs []txtar.File) []txtar.File {
	var out []txtar.File
	for _, f := range fs {
		if f.Name != "want" {
			out = append(out, f)
		}
	}
	return out
}

// TestStatic_HtmxPinned checks that the vendored htmx is the file
// static/NOTICE.md names.
func TestStatic_HtmxPinned(t *testing.T) {
	b, err := fs.ReadFile(files, "static/htmx.min.js")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	notice, err := fs.ReadFile(files, "static/NOTICE.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(notice, []byte(hex.EncodeToString(sum[:]))) || !bytes.Contains(b, []byte(`version:"2.0.11"`)) {
		t.Fatalf("static/htmx.min.js (sha256 %x) is not the htmx 2.0.11 that static/NOTICE.md names", sum)
	}
}

// TestTemplates_Accessible checks rules every page follows: each table
// has column headers with a scope, each form control a label.
func TestTemplates_Accessible(t *testing.T) {
	entries, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, _ := fs.ReadFile(files, e)
		s := string(b)
		if n, m := strings.Count(s, "<th>")+strings.Count(s, "<th "), strings.Count(s, "<th scope="); n != m {
			t.Errorf("%s: %d of %d header cells without a scope", e, n-m, n)
		}
		for _, id := range controlIDs(s) {
			if !strings.Contains(s, `<label for="`+id+`"`) {
				t.Errorf("%s: control %q has no label", e, id)
			}
		}
	}
}

// controlIDs returns the ids of the inputs and selects of a template.
func controlIDs(s string) []string {
	var ids []string
	for _, tag := range []string{"<input ", "<select "} {
		for rest := s; ; {
			i := strings.Index(rest, tag)
			if i < 0 {
				break
			}
			rest = rest[i+len(tag):]
			end := strings.Index(rest, ">")
			el := rest[:end]
			if _, after, ok := strings.Cut(el, `id="`); ok {
				id, _, _ := strings.Cut(after, `"`)
				ids = append(ids, id)
			} else {
				ids = append(ids, "(no id) "+el)
			}
		}
	}
	return ids
}

func TestNumbers(t *testing.T) {
	shares := []struct {
		n, size uint64
		want    string
	}{{0, 100, "0%"}, {1, 0, "0%"}, {1, 3, "33.33%"}, {100, 100, "100.00%"}, {2, 16777214, "<0.01%"}, {1678, 16777214, "0.01%"}}
	for _, tt := range shares {
		if got := share(tt.n, tt.size); got != tt.want {
			t.Errorf("share(%d, %d) = %q, want %q", tt.n, tt.size, got, tt.want)
		}
	}
	nums := []struct {
		n    any
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1,000"}, {-1234567, "-1,234,567"}, {uint64(1<<64 - 2), "18,446,744,073,709,551,614"}}
	for _, tt := range nums {
		if got := num(tt.n); got != tt.want {
			t.Errorf("num(%v) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

// globalOf makes a unit a global control plane whose zones' insights are
// those of data (a JSON object of zone name to insight); a zone not in it
// has an insight that cannot be read.
func globalOf(t *testing.T, data []byte) func(*Options) {
	t.Helper()
	var insights map[string]api.ZoneInsight
	if err := json.Unmarshal(data, &insights); err != nil {
		t.Fatalf("insights.json: %v", err)
	}
	return func(o *Options) {
		o.Mode = resource.ModeGlobal // its zone setting stays "default", as a global's does
		o.ZoneInsight = func(_ context.Context, zone string) (api.ZoneInsight, error) {
			in, ok := insights[zone]
			if !ok {
				return api.ZoneInsight{}, errors.New("cannot read the insight of zone " + zone + ": the store is away")
			}
			return in, nil
		}
	}
}

// zoneOf makes a unit the zone east whose stream to the global is data
// (a GlobalLink).
func zoneOf(t *testing.T, data []byte) func(*Options) {
	t.Helper()
	var l GlobalLink
	if err := json.Unmarshal(data, &l); err != nil {
		t.Fatalf("link.json: %v", err)
	}
	return func(o *Options) {
		o.Mode, o.Zone = resource.ModeZone, "east"
		o.GlobalLink = func() GlobalLink { return l }
	}
}

// xdsOf gives every Dataplane of a unit the _xds inspection data; when it
// names a dataplane, the others have no stream.
func xdsOf(t *testing.T, data []byte) func(*Options) {
	t.Helper()
	var in api.XDSInspection
	if err := json.Unmarshal(data, &in); err != nil {
		t.Fatalf("xds.json: %v", err)
	}
	streams := func(name string) []api.XDSStream {
		if in.Dataplane != "" && name != in.Dataplane {
			return []api.XDSStream{}
		}
		return in.Streams
	}
	return func(o *Options) {
		o.XDS = func(mesh, name string) (api.XDSInspection, error) {
			out := in
			out.Mesh, out.Dataplane, out.Streams = mesh, name, streams(name)
			return out, nil
		}
		o.XDSStreams = func(_, name string) []api.XDSStream { return streams(name) }
	}
}
