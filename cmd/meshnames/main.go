// Command meshnames is the naming-and-addressing plane of a service mesh.
// See internal/cli for its commands.
//
// MESHNAMES_CPU_PROFILE=FILE writes a CPU profile of the whole run to FILE
// (read it with `go tool pprof`): how the figures of docs/performance.md
// are explained.
package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/meshnames/meshnames/internal/cli"
)

func main() {
	if path := os.Getenv("MESHNAMES_CPU_PROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "MESHNAMES_CPU_PROFILE:", err)
			os.Exit(2)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "MESHNAMES_CPU_PROFILE:", err)
			os.Exit(2)
		}
		code := cli.Main(os.Args[1:])
		pprof.StopCPUProfile()
		f.Close()
		os.Exit(code)
	}
	os.Exit(cli.Main(os.Args[1:]))
}
