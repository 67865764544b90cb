// Command redlock-bench drives lock engines under load, checks that mutual
// exclusion held, and writes the results. It holds no logic of its own:
// flags become a bench.Config, and files come from package results.
//
// Each subcommand lives in its own file with its own flag set and options
// struct. Only main exits; subcommands return errors, and exitCode turns
// them into a status: 2 for bad input, 1 for failures (violations
// included), 3 for a missed --slo objective, 130 for an interrupted run.
//
// It imports bench (with bench/fault for --fault and bench/scenario for
// the scenario command) and results (and pflag); it must not import engine
// or multiplex directly: engines are reached through bench.
package main
