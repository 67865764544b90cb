package engine

import (
	"math"
	"strings"
	"testing"
	"time"
)

// FuzzConfigValidate: any combination of values is either accepted or
// rejected with an error naming the Config field, never a panic.
func FuzzConfigValidate(f *testing.F) {
	f.Add("127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", int64(10*time.Second), 0.01, int64(0), int64(0), int64(0), 0, uint8(0))
	f.Add("", int64(-1), 1.5, int64(-1), int64(5), int64(1), -1, uint8(9))
	f.Add("a:1,a:1", int64(time.Millisecond), math.Copysign(0, -1), int64(time.Hour), int64(0), int64(0), 9, uint8(2))
	f.Fuzz(func(t *testing.T, masters string, ttl int64, drift float64, nodeTimeout, retryMin, retryMax int64, pm int, q uint8) {
		c := Config{
			TTL:         time.Duration(ttl),
			DriftFactor: drift,
			NodeTimeout: time.Duration(nodeTimeout),
			Wait:        WaitOptions{RetryDelayMin: time.Duration(retryMin), RetryDelayMax: time.Duration(retryMax)},
			Conn:        ConnOptions{PipelineMultiplex: pm},
			Quarantine:  QuarantinePolicy(q),
		}
		if masters != "" {
			c.Masters = strings.Split(masters, ",")
		}
		c.fill()
		if err := c.Validate(); err != nil && !strings.Contains(err.Error(), "Config.") {
			t.Fatalf("error does not name the field: %v", err)
		}
	})
}
