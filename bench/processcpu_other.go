//go:build !unix

package bench

// processCPU is not read on this system: 0.
func processCPU() float64 { return 0 }
