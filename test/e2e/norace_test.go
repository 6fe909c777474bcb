//go:build !race

package e2e

// raceEnabled: the tests run without -race, and so does the binary they
// start, which then links the packages go test has already compiled.
const raceEnabled = false
