package cli

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"

	"github.com/meshnames/meshnames/internal/config"
	"github.com/meshnames/meshnames/internal/server/servertest"
)

var update = flag.Bool("update", false, "rewrite the want section of golden files")

// created is the fixed creation time of every resource in golden tests;
// commands see the time now.
var (
	created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now     = created.Add(5 * time.Minute)
)

// TestGolden runs each testdata/golden/*.txtar: the comment holds commands
// (lines starting with "$ meshnames"), the other files are inputs, and the
// "want" file is the transcript: each command, its output and, when it
// fails, its error and "[exit 1]", with the server's URL shown as $SERVER.
// Run with -update to rewrite "want".
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/golden/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			url := servertest.Start(t, config.Default(), servertest.Options{Clock: func() time.Time { return created }, NoControllers: true})
			dir := t.TempDir()
			var want []byte
			for _, f := range ar.Files {
				if f.Name == "want" {
					want = f.Data
					continue
				}
				if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			t.Chdir(dir)
			var transcript bytes.Buffer
			for _, line := range strings.Split(string(ar.Comment), "\n") {
				cmdline, ok := strings.CutPrefix(line, "$ meshnames ")
				if !ok {
					continue
				}
				fmt.Fprintf(&transcript, "$ meshnames %s\n", cmdline)
				var out bytes.Buffer
				runCLI(&out, url, strings.Fields(cmdline))
				// The server's port changes from run to run.
				transcript.WriteString(strings.ReplaceAll(out.String(), url, "$SERVER"))
			}
			got := transcript.Bytes()
			if *update {
				replaced := false
				for i := range ar.Files {
					if ar.Files[i].Name == "want" {
						ar.Files[i].Data, replaced = got, true
					}
				}
				if !replaced {
					ar.Files = append(ar.Files, txtar.File{Name: "want", Data: got})
				}
				if err := os.WriteFile(filepath.Join(origDir(t), file), txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if d := cmp.Diff(string(want), string(got)); d != "" {
				t.Errorf("transcript mismatch (-want +got); rerun with -update if the change is intended:\n%s", d)
			}
		})
	}
}

var startDir, _ = os.Getwd()

func origDir(*testing.T) string { return startDir }

// runCLI runs one command in-process, the way Main would.
func runCLI(w *bytes.Buffer, server string, args []string) {
	var out, errOut bytes.Buffer
	env := Env{
		In: strings.NewReader(""), Out: &out, Err: &errOut, Now: func() time.Time { return now },
		Getenv: func(k string) (string, bool) {
			if k == ServerEnv {
				return server, true
			}
			return "", false
		},
	}
	root := New(env)
	root.SetArgs(args)
	err := root.Execute()
	w.Write(out.Bytes())
	w.Write(errOut.Bytes())
	if err != nil {
		code, show := exitCode(err)
		if show {
			fmt.Fprintf(w, "Error: %v\n", err)
		}
		fmt.Fprintf(w, "[exit %d]\n", code)
	}
}
