//go:build !race

package sim

// raceEnabled: the race detector is on, and changes the schedules a seed
// replays (see TestMutationsFound).
const raceEnabled = false
