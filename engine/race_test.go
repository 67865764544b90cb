//go:build race

package engine_test

// raceEnabled: the race detector's own allocations make allocation counts
// noisy.
const raceEnabled = true
