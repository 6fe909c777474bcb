package e2e

// The tests run the meshnames binary, which the harness builds with
// `go build`: go test's cache does not see that. The blank import makes
// every package of the binary part of this package's inputs, so that a
// cached result is never reused after any of them changed.
import _ "github.com/meshnames/meshnames/internal/cli"
