package main

import (
	"net"

	"github.com/redlock-bench/redlock/bench"
)

// metricsAddrUsage is the help of --metrics-addr, shared by the commands
// that take it. The server is the session's (openSession).
const metricsAddrUsage = "serve live Prometheus metrics of the redlock engine at http://ADDR" + bench.MetricsPath + " while the command runs (e.g. :9464)"

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
