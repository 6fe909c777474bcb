package storetest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// crashDirEnv, when set, makes Kill9 the child process: it writes to the
// store in that directory until killed.
const crashDirEnv = "MESHNAMES_STORETEST_CRASH_DIR"

// Kill9 checks the durability of an embedded store: it runs a child
// process (the test binary again, running only the test named test, which
// must call Kill9) that creates resources one by one in a directory and
// prints each acknowledged write, kills it with SIGKILL mid-stream, and
// checks that every acknowledged write is there after reopening, and that
// while the child ran the directory was refused with the child's pid.
func Kill9(t *testing.T, test string, open func(dir string) (store.Store, error)) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		s, err := open(dir)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		for i := 0; ; i++ {
			name := fmt.Sprintf("z%d", i)
			if _, err := store.Create(context.Background(), s, &resource.Object{Kind: resource.Zone, Name: name, Spec: &resource.ZoneSpec{}}); err != nil {
				fmt.Println("error:", err)
				os.Exit(1)
			}
			fmt.Println("ack", name)
		}
	}

	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acked []string
	lines := bufio.NewScanner(out)
	for len(acked) < 200 && lines.Scan() {
		name, ok := strings.CutPrefix(lines.Text(), "ack ")
		if !ok {
			t.Fatalf("child: %s", lines.Text())
		}
		acked = append(acked, name)
	}
	if len(acked) < 200 {
		t.Fatalf("child stopped after %d writes: %v", len(acked), lines.Err())
	}

	_, err = open(dir)
	if want := fmt.Sprintf("(pid %d)", cmd.Process.Pid); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Open while the child runs = %v, want an error naming %s", err, want)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // killed: the error is expected

	s, err := open(dir)
	if err != nil {
		t.Fatalf("reopen after kill -9: %v", err)
	}
	defer s.Close()
	for _, name := range acked {
		if _, err := s.Get(t.Context(), resource.Key{Kind: resource.Zone, Name: name}); err != nil {
			t.Fatalf("acknowledged write %s lost: %v", name, err)
		}
	}
}
