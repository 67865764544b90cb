// Package results is the measurement model of redlock-bench and every output
// format a run produces: HdrHistogram sets and their percentile statistics,
// the run Summary (summary.txt for people, summary.json for programs), the
// standard .hgrm percentile distribution, HdrHistogram interval logs
// (.hlog), and the one-line progress report.
//
// Latencies are recorded in microseconds, from 1 µs to one hour, with three
// significant figures, so that histograms from any run, on any machine, merge
// losslessly.
//
// results knows nothing about Redis or locks: it must not import engine,
// multiplex, bench or any Redis client. Those packages produce numbers;
// this one only keeps and prints them.
package results
