// Command redlock-bench drives lock engines under load, checks that mutual
// exclusion held, and writes the results. It holds no logic of its own:
// flags become a bench.Config (or a sweep's, comparison's or soak's), and
// files come from package results.
//
// Each subcommand lives in its own file with its own flag set and options
// struct, and states only what sets it apart; the frame they share is in
// command.go (flag parsing and its messages, the session: the connection
// warning, the --metrics-addr server, the results directory, progress and
// log) and main.go (dispatch, help, --version, exit statuses). Only main
// exits; subcommands return errors, and exitCode turns them into a status:
// 2 for bad input, 1 for failures (violations included), 3 for a missed
// --slo objective, 130 for an interrupted run.
//
// It imports bench (with bench/fault for --fault and bench/scenario for
// the scenario command), results, internal/version, cmd/internal/connflags
// and pflag. It does not import engine or multiplex: engines, and what the
// command needs of them (bench.ParseMasters, the metrics server's
// Observer), are reached through bench.
package main
