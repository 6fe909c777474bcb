// Command meshnames is the naming-and-addressing plane of a service mesh.
// See internal/cli for its commands.
//
// MESHNAMES_CPU_PROFILE=FILE writes a CPU profile of the whole run to FILE,
// and MESHNAMES_ALLOC_PROFILE=FILE a profile of what it allocated (read
// them with `go tool pprof`), and MESHNAMES_TRACE=FILE an execution trace
// (`go tool trace`): how the figures of docs/performance.md are
// explained. A "%p" in FILE is replaced by the process's ID, so that the
// several servers one benchmark starts each keep their own.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"

	"github.com/meshnames/meshnames/internal/cli"
)

func main() {
	var stop []func()
	for _, r := range []struct {
		env   string
		start func(io.Writer) error
		stop  func()
	}{
		{"MESHNAMES_CPU_PROFILE", pprof.StartCPUProfile, pprof.StopCPUProfile},
		{"MESHNAMES_TRACE", trace.Start, trace.Stop},
	} {
		if path := os.Getenv(r.env); path != "" {
			f := create(r.env, path)
			if err := r.start(f); err != nil {
				fmt.Fprintln(os.Stderr, r.env+":", err)
				os.Exit(2)
			}
			stop = append(stop, func() { r.stop(); f.Close() })
		}
	}
	if path := os.Getenv("MESHNAMES_ALLOC_PROFILE"); path != "" {
		f := create("MESHNAMES_ALLOC_PROFILE", path)
		stop = append(stop, func() {
			if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
				fmt.Fprintln(os.Stderr, "MESHNAMES_ALLOC_PROFILE:", err)
			}
			f.Close()
		})
	}
	code := cli.Main(os.Args[1:])
	for _, s := range stop {
		s()
	}
	os.Exit(code)
}

func create(env, path string) *os.File {
	f, err := os.Create(profilePath(path, os.Getpid()))
	if err != nil {
		fmt.Fprintln(os.Stderr, env+":", err)
		os.Exit(2)
	}
	return f
}

// profilePath is path with every "%p" replaced by pid.
func profilePath(path string, pid int) string {
	return strings.ReplaceAll(path, "%p", strconv.Itoa(pid))
}
