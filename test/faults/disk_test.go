package faults

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// mountTmpfs mounts a tmpfs of size bytes on a new directory, unmounted
// when t ends; it skips t where mounting is not allowed (not root).
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs (it needs root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fill writes a file in dir until the file system is full, and returns it.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			break
		}
	}
	for size := 64 << 10; size > 0; size /= 2 { // what is left
		for {
			if _, err := f.Write(chunk[:size]); err != nil {
				break
			}
		}
	}
	return path
}

// answers says whether the server's DNS answers name with an address.
func answers(s *server, name string) bool {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	r, err := dns.Exchange(m, s.dns)
	return err == nil && len(r.Answer) > 0
}

// TestDiskFull_Tmpfs runs a server on the embedded store in a 64 MiB
// tmpfs and fills the file system: writes are refused with 507 saying the
// disk is full, reads and DNS go on, writes resume by themselves within
// seconds of the filler's removal, and after a kill -9 and a restart
// every acknowledged write is there with its VIP.
func TestDiskFull_Tmpfs(t *testing.T) {
	t.Parallel()
	dir := mountTmpfs(t, 64<<20)
	s := serve(t, "tmpfs", "--data-dir", filepath.Join(dir, "data"))
	s.ready(time.Minute)
	acked := map[string]bool{}
	put := func(name string) (int, string) {
		code, b, err := call(http.MethodPut, s.api+msPath(name), meshService(name, 80, nil))
		if err != nil {
			t.Fatal(err)
		}
		if code == http.StatusCreated {
			acked[name] = true
		}
		return code, string(b)
	}
	for i := range 100 {
		if code, body := put(fmt.Sprintf("before-%d", i)); code != http.StatusCreated {
			t.Fatalf("PUT before the disk fills: %d %s", code, body)
		}
	}
	waitFor(t, 30*time.Second, "before-99 answered by DNS", func() bool { return answers(s, "before-99.svc.mesh.local") })

	filler := fill(t, dir)
	var code int
	var body string
	for i := 0; ; i++ {
		code, body = put(fmt.Sprintf("during-%d", i))
		if code != http.StatusCreated || i == 1000 {
			break
		}
	}
	if code != http.StatusInsufficientStorage || !strings.Contains(body, "the disk of the control plane's store is full") {
		t.Fatalf("PUT on a full disk = %d %s, want 507 saying the disk is full", code, body)
	}
	if code, _, err := call(http.MethodGet, s.api+msPath("before-0"), nil); err != nil || code != http.StatusOK {
		t.Errorf("GET on a full disk = %d %v, want 200", code, err)
	}
	if !answers(s, "before-0.svc.mesh.local") {
		t.Error("DNS stopped answering on a full disk")
	}
	if code, _, _ := call(http.MethodGet, s.api+"/readyz", nil); code != http.StatusOK {
		t.Errorf("/readyz on a full disk = %d, want 200 (it serves reads)", code)
	}
	if code, body := put("still-full"); code != http.StatusInsufficientStorage {
		t.Errorf("PUT while the disk stays full = %d %s, want 507", code, body)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	var resumed time.Duration
	waitFor(t, 30*time.Second, "writes resume after the filler is removed", func() bool {
		code, _ := put(fmt.Sprintf("after-%d", time.Now().UnixNano()))
		resumed = time.Since(freed)
		return code == http.StatusCreated
	})
	t.Logf("writes resumed %s after the filler was removed", resumed.Round(time.Millisecond))
	if !strings.Contains(s.log.String(), "the store refuses writes until its disk takes them again") {
		t.Error("the server did not log the refusal")
	}

	s.restart()
	s.ready(time.Minute)
	got, err := list(s.api)
	if err != nil {
		t.Fatal(err)
	}
	holder := map[string]string{}
	waitFor(t, 30*time.Second, "every service named after the restart", func() bool {
		got, err = list(s.api)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range got {
			if len(v.Status.VIPs) == 0 {
				return false
			}
		}
		return true
	})
	for name := range acked {
		if got[name] == nil {
			t.Errorf("acknowledged %s is gone after the restart", name)
		}
	}
	for name, v := range got {
		ip := v.Status.VIPs[0].IP
		if other, ok := holder[ip]; ok {
			t.Errorf("VIP %s held by %s and %s", ip, other, name)
		}
		holder[ip] = name
	}
}
