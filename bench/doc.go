// Package bench holds meshnames' end-to-end benchmarks (testing.B, run
// with go test -bench and compared with benchstat) and, beside them, shell
// load scripts that drive real processes. Figures are recorded in
// docs/performance.md.
package bench
