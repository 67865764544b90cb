package engine_test

import (
	"context"
	"regexp"
	"strconv"
	"testing"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// BenchmarkListMillionKeys walks three masters of a million keys each
// (DEBUG POPULATE) with List: for a prefix that few names match, and for
// every name. It reports, besides the time per List, what one SCAN call
// of List's held a master for, and one EXISTS (INFO latencystats, server
// side): the longest a command of another client waits behind List.
//
//	go test -run x -bench ListMillionKeys -benchtime=1x ./engine
func BenchmarkListMillionKeys(b *testing.B) {
	c := redistest.StartT(b, 3, redistest.Options{Args: []string{"--enable-debug-command", "yes"}})
	ctx := context.Background()
	for _, a := range c.Addrs() {
		cl, err := directClient(a)
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		if err := cl.Do(ctx, cl.B().Arbitrary("DEBUG", "POPULATE").Args("1000000", "lk").Build()).Error(); err != nil {
			b.Fatal(err)
		}
	}
	cfg := engine.DefaultConfig(c.Addrs()...)
	cfg.Quarantine = engine.QuarantineOff
	l, err := engine.New(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	for _, bc := range []struct {
		name, prefix string
		want         int
	}{{"few", "lk:99999", 11}, {"all", "lk:", 1000000}} {
		b.Run(bc.name, func(b *testing.B) {
			for _, a := range c.Addrs() {
				cl, _ := directClient(a)
				cl.Do(ctx, cl.B().ConfigResetstat().Build())
				cl.Close()
			}
			for b.Loop() {
				names, err := l.List(ctx, bc.prefix, 0)
				if err != nil || len(names) != bc.want {
					b.Fatalf("List(%q): %d names, %v; want %d", bc.prefix, len(names), err, bc.want)
				}
			}
			// List walks two of the three masters (votes − quorum + 1)
			// and asks the third with EXISTS.
			var p50, p99, e99 float64
			walked := 0
			for _, a := range c.Addrs() {
				cl, _ := directClient(a)
				info, err := cl.Do(ctx, cl.B().Info().Section("latencystats").Build()).ToString()
				cl.Close()
				if err != nil {
					b.Fatal(err)
				}
				if m := scanLatency.FindStringSubmatch(info); m != nil {
					walked++
					f50, _ := strconv.ParseFloat(m[1], 64)
					f99, _ := strconv.ParseFloat(m[2], 64)
					p50, p99 = max(p50, f50), max(p99, f99)
				}
				if m := existsLatency.FindStringSubmatch(info); m != nil {
					f99, _ := strconv.ParseFloat(m[1], 64)
					e99 = max(e99, f99)
				}
			}
			if walked != 2 {
				b.Fatalf("SCAN on %d masters, want 2", walked)
			}
			b.ReportMetric(p50, "scan-p50-µs")
			b.ReportMetric(p99, "scan-p99-µs")
			b.ReportMetric(e99, "exists-p99-µs")
		})
	}
}

var (
	scanLatency   = regexp.MustCompile(`latency_percentiles_usec_scan:p50=([0-9.]+),p99=([0-9.]+)`)
	existsLatency = regexp.MustCompile(`latency_percentiles_usec_exists:p50=[0-9.]+,p99=([0-9.]+)`)
)
