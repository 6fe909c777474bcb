// Command meshnames is the naming-and-addressing plane of a service mesh.
// See internal/cli for its commands.
//
// MESHNAMES_CPU_PROFILE=FILE writes a CPU profile of the whole run to FILE,
// and MESHNAMES_ALLOC_PROFILE=FILE a profile of what it allocated (read
// them with `go tool pprof`), and MESHNAMES_TRACE=FILE an execution trace
// (`go tool trace`): how the figures of docs/performance.md are
// explained.
package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"runtime/trace"

	"github.com/meshnames/meshnames/internal/cli"
)

func main() {
	var stop []func()
	if path := os.Getenv("MESHNAMES_CPU_PROFILE"); path != "" {
		f := create("MESHNAMES_CPU_PROFILE", path)
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "MESHNAMES_CPU_PROFILE:", err)
			os.Exit(2)
		}
		stop = append(stop, func() { pprof.StopCPUProfile(); f.Close() })
	}
	if path := os.Getenv("MESHNAMES_TRACE"); path != "" {
		f := create("MESHNAMES_TRACE", path)
		if err := trace.Start(f); err != nil {
			fmt.Fprintln(os.Stderr, "MESHNAMES_TRACE:", err)
			os.Exit(2)
		}
		stop = append(stop, func() { trace.Stop(); f.Close() })
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
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, env+":", err)
		os.Exit(2)
	}
	return f
}
