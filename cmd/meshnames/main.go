// Command meshnames is the naming-and-addressing plane of a service mesh.
// See internal/cli for its commands.
package main

import (
	"os"

	"github.com/meshnames/meshnames/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
