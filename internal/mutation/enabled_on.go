//go:build redlock_faults

package mutation

// Enabled reports whether the engine's fault points are compiled in (the
// redlock_faults build tag), so that a switch changes what it names.
const Enabled = true
