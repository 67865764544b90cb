package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/redlock-bench/redlock/bench"
	"github.com/redlock-bench/redlock/engine"
)

// metricsAddrUsage is the help of --metrics-addr, shared by the commands
// that take it.
const metricsAddrUsage = "serve live Prometheus metrics of the redlock engine at http://ADDR" + bench.MetricsPath + " while the command runs (e.g. :9464)"

// serveMetrics starts the --metrics-addr server when addr is set, and
// points *obs at its observer. stop shuts it down; call it once the
// command's work is over (it returns at once with no server).
func serveMetrics(addr string, obs **engine.Observer, stderr io.Writer) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	m, err := bench.StartMetrics(addr)
	if err != nil {
		return nil, err
	}
	*obs = m.Observer
	fmt.Fprintf(prefixWriter{w: stderr}, "serving metrics at http://%s%s\n", m.Addr, bench.MetricsPath)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			fmt.Fprintf(prefixWriter{w: stderr}, "metrics server: %v\n", err)
		}
	}, nil
}
