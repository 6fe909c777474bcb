package faults

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/pebble"
)

// The child of TestKill9Cycles: crashDirEnv names its store's directory,
// crashCycleEnv the cycle (which its names carry).
const (
	crashDirEnv   = "MESHNAMES_FAULTS_CRASH_DIR"
	crashCycleEnv = "MESHNAMES_FAULTS_CRASH_CYCLE"
	crashWriters  = 4
)

func zone(name string) *resource.Object {
	return &resource.Object{Kind: resource.Zone, Name: name, Spec: &resource.ZoneSpec{}}
}

// crashChild opens the embedded store in dir and runs crashWriters
// writers until it is killed: each creates new Zones and deletes one in
// three of those the store held when it started (its share of them),
// printing "put-start NAME" and "del-start NAME" before each write and
// "put NAME" and "del NAME" once the store acknowledged it.
func crashChild(dir string) int {
	cycle, _ := strconv.Atoi(os.Getenv(crashCycleEnv))
	s, err := pebble.Open(dir)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	objs, _, err := s.List(context.Background(), resource.Zone)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	var out sync.Mutex
	say := func(verb, name string) {
		out.Lock()
		fmt.Println(verb, name)
		out.Unlock()
	}
	var wg sync.WaitGroup
	for w := range crashWriters {
		var mine []string
		for i, o := range objs {
			if i%crashWriters == w {
				mine = append(mine, o.Name)
			}
		}
		wg.Go(func() {
			ctx := context.Background()
			for i := 0; ; i++ {
				if i%3 == 2 && len(mine) > 0 {
					name := mine[len(mine)-1]
					mine = mine[:len(mine)-1]
					say("del-start", name)
					if _, err := store.Delete(ctx, s, resource.Key{Kind: resource.Zone, Name: name}, 0); err != nil {
						say("error:", err.Error())
						os.Exit(1)
					}
					say("del", name)
					continue
				}
				name := fmt.Sprintf("c%d-w%d-%d", cycle, w, i)
				say("put-start", name)
				if _, err := store.Create(ctx, s, zone(name)); err != nil {
					say("error:", err.Error())
					os.Exit(1)
				}
				say("put", name)
			}
		})
	}
	wg.Wait()
	return 0
}

// TestKill9Cycles kills a process writing to the embedded store with
// SIGKILL, again and again, on the same data directory: four writers
// create and delete Zones, each kill comes after a random number (20 to
// 300) of acknowledged writes, and after each the store must hold every
// acknowledged creation not since deleted (0 lost), no acknowledged
// deletion (0 resurrected), and nothing no writer started. Quick: 10
// cycles; long: 1,000.
func TestKill9Cycles(t *testing.T) {
	t.Parallel()
	cycles := pick(10, 1000)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	live, dead := map[string]bool{}, map[string]bool{}
	var acks, inFlight int
	start := time.Now()
	for c := range cycles {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashCycleEnv+"="+strconv.Itoa(c))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		started, delStarted := map[string]bool{}, map[string]bool{}
		target := 20 + rng.IntN(281)
		lines := bufio.NewScanner(out)
		n := 0
		read := func() bool {
			if !lines.Scan() {
				return false
			}
			verb, name, _ := strings.Cut(lines.Text(), " ")
			switch verb {
			case "put-start":
				started[name] = true
			case "del-start":
				delStarted[name] = true
			case "put":
				live[name] = true
				n++
			case "del":
				delete(live, name)
				dead[name] = true
				n++
			default:
				t.Fatalf("cycle %d: the child said %q", c, lines.Text())
			}
			return true
		}
		for n < target && read() {
		}
		_ = cmd.Process.Kill()
		for read() { // what it said before it died
		}
		_ = cmd.Wait()
		acks += n

		s, err := pebble.Open(dir)
		if err != nil {
			t.Fatalf("cycle %d: reopen after kill -9: %v", c, err)
		}
		objs, _, err := s.List(context.Background(), resource.Zone)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, o := range objs {
			have[o.Name] = true
			switch {
			case dead[o.Name]:
				t.Errorf("cycle %d: %s was deleted (acknowledged) and is back", c, o.Name)
			case !live[o.Name] && !started[o.Name]:
				t.Errorf("cycle %d: %s is there, but no writer created it", c, o.Name)
			case !live[o.Name]:
				inFlight++ // a creation in flight at the kill that landed
			}
		}
		for name := range live {
			if !have[name] && !delStarted[name] {
				t.Errorf("cycle %d: acknowledged %s is lost", c, name)
			}
		}
		if t.Failed() {
			return
		}
		live = have // what landed in flight is the next cycle's to delete
	}
	t.Logf("%d kill -9 cycles in %s: %d acknowledged writes, 0 lost, 0 resurrected; %d creations in flight at a kill landed; %d zones at the end",
		cycles, time.Since(start).Round(time.Second), acks, inFlight, len(live))
}
