package main

import (
	"context"
	"fmt"
	"io"
	"net"
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

// checkMetricsAddr refuses a --metrics-addr that cannot be an address to
// listen on, as bad input, before anything starts. A taken port is found
// only when the server starts, and is a failure.
func checkMetricsAddr(addr string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return badFlag("metrics-addr", addr, "want [HOST]:PORT such as :9464 or 127.0.0.1:9464")
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return badFlag("metrics-addr", addr, "port must be 0-65535 (0: any free port)")
	}
	return nil
}
