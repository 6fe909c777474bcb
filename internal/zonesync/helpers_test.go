package zonesync

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/sqlite"
	"github.com/meshnames/meshnames/internal/token"
)

// testHeartbeat is the heartbeat of the streams tests run: short, so that
// tests of silence and reconnection are quick.
var testHeartbeat = 200 * time.Millisecond

// logBuffer collects a control plane's log for assertions and failures.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// cp is one control plane's store and cache.
type cp struct {
	t    testing.TB
	name string
	st   store.Store
	c    *cache.Cache
	logs *logBuffer
	log  *slog.Logger
}

func newCP(t testing.TB, name string) *cp {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	p := &cp{t: t, name: name, st: st, logs: &logBuffer{}}
	p.log = slog.New(slog.NewTextHandler(p.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p.c = cache.New(st, p.log, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		st.Close()
		if t.Failed() || os.Getenv("ZS_LOGS") != "" {
			t.Logf("--- log of %s:\n%s", name, p.logs.String())
		}
	})
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	if !p.c.WaitSynced(wctx) {
		t.Fatalf("%s: cache not synced", name)
	}
	return p
}

// put creates or updates obj through the store, as the REST API would after
// admission (defaults, system labels of mode and zone).
func (p *cp) put(obj *resource.Object, mode, zone string) *resource.Object {
	p.t.Helper()
	if errs := admission.New(admission.Options{Mode: mode, Zone: zone}).Admit(obj, admission.Writer{Source: admission.User}); len(errs) > 0 {
		p.t.Fatalf("%s: invalid %s: %v", p.name, obj.Key(), errs)
	}
	ctx := context.Background()
	cur, err := p.st.Get(ctx, obj.Key())
	switch {
	case errors.Is(err, store.ErrNotFound):
		obj, err = store.Create(ctx, p.st, obj)
	case err == nil:
		obj.Version = cur.Version
		obj, err = store.Update(ctx, p.st, obj)
	}
	if err != nil {
		p.t.Fatalf("%s: write %s: %v", p.name, obj.Key(), err)
	}
	return obj
}

func (p *cp) delete(k resource.Key) {
	p.t.Helper()
	if _, err := store.Delete(context.Background(), p.st, k, 0); err != nil {
		p.t.Fatalf("%s: delete %s: %v", p.name, k, err)
	}
}

// eventually waits until cond holds for what the store holds at k (nil
// when nothing), failing after the deadline.
func (p *cp) eventually(what string, k resource.Key, cond func(*resource.Object) bool) *resource.Object {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		obj, err := p.st.Get(context.Background(), k)
		if errors.Is(err, store.ErrNotFound) {
			obj, err = nil, nil
		}
		if err != nil {
			p.t.Fatal(err)
		}
		if cond(obj) {
			return obj
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: %s: not reached within 10s (now %v)", p.name, what, describe(obj))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitLog waits for a log line containing s.
func (p *cp) waitLog(s string) {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.logs.String(), s) {
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: no log line with %q within 10s", p.name, s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitLogs waits until n log lines contain s.
func (p *cp) waitLogs(s string, n int) {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(p.logs.String(), s) < n {
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: %d log lines with %q within 10s, want %d", p.name, strings.Count(p.logs.String(), s), s, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func describe(o *resource.Object) string {
	if o == nil {
		return "absent"
	}
	b, _ := json.Marshal(o)
	return string(b)
}

// testKeys are the token keys of the global's store, set by runGlobal.
var testKeys = map[store.Store]*token.Keys{}

// zoneToken signs a zone token with the global's keys, as meshnames token
// zone does.
func zoneToken(t testing.TB, global *cp, zone, pin string) string {
	t.Helper()
	raw, err := testKeys[global.st].Sign(token.Claims{Subject: "zone " + zone, Role: token.RoleZone, Zone: zone, SyncPin: pin,
		ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func verifier(keys *token.Keys) func(string, time.Time) (string, error) {
	return func(raw string, now time.Time) (string, error) {
		c, err := keys.Verify(raw, now)
		if err != nil {
			return "", err
		}
		if c.Role != token.RoleZone {
			return "", fmt.Errorf("a %s token is not a zone token", c.Role)
		}
		return c.Zone, nil
	}
}

func writeToken(t testing.TB, raw string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "zone.token")
	if err := os.WriteFile(path, []byte(raw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runGlobal starts a global's sync server on a free port and returns it
// and its address.
func runGlobal(t testing.TB, p *cp) (*Global, string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tlsm, err := LoadGlobalTLS(ctx, p.st, "", "")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := token.LoadKeys(ctx, p.st)
	if err != nil {
		t.Fatal(err)
	}
	testKeys[p.st] = keys
	addrc := make(chan string, 1)
	g := NewGlobal(GlobalOptions{
		Store: p.st, Cache: p.c, Log: p.log, Addr: "127.0.0.1:0", TLS: tlsm, Verify: verifier(keys),
		Instance: "global-1", Version: "test", ExportDefault: resource.ExportAll, Heartbeat: testHeartbeat,
		Listening: func(a string) { addrc <- a },
	})
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case a := <-addrc:
		return g, a, tlsm.Pin
	case err := <-done:
		t.Fatalf("global: %v", err)
	}
	return nil, "", ""
}

// zoneRunner runs a zone's client until stopped.
type zoneRunner struct {
	z      *Zone
	cancel context.CancelFunc
	done   chan struct{}
}

func runZone(t testing.TB, p *cp, zone, addr, tokenFile string) *zoneRunner {
	t.Helper()
	z := NewZone(ZoneOptions{
		Store: p.st, Cache: p.c, Log: p.log, Zone: zone, Address: "grpcs://" + addr, TokenFile: tokenFile,
		Env: resource.EnvUniversal, ExportDefault: resource.ExportAll, Version: "test",
		Heartbeat: testHeartbeat, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	r := &zoneRunner{z: z, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(r.done); _ = z.Run(ctx, nil) }()
	t.Cleanup(r.stop)
	return r
}

func (r *zoneRunner) stop() {
	r.cancel()
	<-r.done
}

func meshService(mesh, name string, port int) *resource.Object {
	return &resource.Object{Kind: resource.MeshService, Mesh: mesh, Name: name, Spec: &resource.MeshServiceSpec{
		Selector: resource.MeshServiceSelector{DataplaneTags: map[string]string{"app": name}},
		Ports:    []resource.Port{{Port: port}},
	}}
}

func msKey(mesh, name string) resource.Key {
	return resource.Key{Kind: resource.MeshService, Mesh: mesh, Name: name}
}

func exists(o *resource.Object) bool { return o != nil }
func absent(o *resource.Object) bool { return o == nil }
