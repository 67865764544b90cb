// Package enginelua hands engine's scripts to the tools of this
// repository that measure what the masters can sustain (the bench's
// ceiling), without making them part of engine's API. engine sets each
// variable when it is initialised, so any package that imports engine
// reads them filled.
package enginelua

// Release is the Lua every Release runs on every master: one key, and
// ARGV[1] the lease's value.
var Release string
