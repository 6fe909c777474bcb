//go:build race

package e2e

// raceEnabled: the tests run with -race, so the binary they start is built
// with it too.
const raceEnabled = true
