package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/redlock-bench/redlock/bench/chaos"
	"github.com/redlock-bench/redlock/bench/engines"
	"github.com/redlock-bench/redlock/bench/fault"
	"github.com/redlock-bench/redlock/bench/masters"
	"github.com/redlock-bench/redlock/cmd/internal/connflags"
)

// chaosOptions are the flags of `redlock-bench chaos`.
type chaosOptions struct {
	cfg        chaos.Config
	engine     string
	lock       string
	quarantine string
	masters    string
	out        string
	conn       *connflags.Flags
	output     outputFlags

	metricsAddr string // --metrics-addr
}

func newChaosFlags(o *chaosOptions) *pflag.FlagSet {
	fs := newFlagSet("chaos")
	c := &o.cfg
	fs.DurationVar(&c.Duration, "duration", chaos.DefaultDuration, fmt.Sprintf("how long the load and the faults run, at most %s", fault.MaxDuration))
	fs.Uint64Var(&c.Seed, "seed", 0, "seed of the fault schedule and the workers' choices; 0 picks one (always printed, to replay a run)")
	fs.IntVar(&c.Clients, "clients", chaos.DefaultClients, "lock clients, each its own engine.Locker with its own connections (1-64)")
	fs.IntVar(&c.Workers, "workers", chaos.DefaultWorkers, "goroutines per client (1-256)")
	fs.IntVar(&c.Resources, "resources", 0, "hot resources all workers contend for (1-1000; default 3, 1 with --lock semaphore:P, 2K with --lock multi:K)")
	fs.StringVar(&o.lock, "lock", "mutex", "what each worker takes: mutex; semaphore:P, a permit of the resource's semaphore of P permits (in model only); multi:K, one lease on K distinct resources drawn uniformly; rw:F, the resource's read/write lock, each lock a read with probability F")
	fs.DurationVar(&c.TTL, "ttl", chaos.DefaultTTL, "lock TTL (50ms-1m); some holds last longer, kept by auto-extension")
	fs.StringVar(&c.Class, "class", chaos.InModel, "faults: in-model (Redlock must stay safe) or out-of-model (keys deleted on a majority, clock jumps: fencing must reject stale writes)")
	fs.StringVar(&o.engine, "engine", "redlock", "redlock, or nolock: the control that grants every request, which the oracle must catch")
	fs.StringVar(&o.masters, "masters", "", "comma-separated host:port of masters to use instead of starting 5 local ones (no process faults then)")
	fs.IntVar(&c.LocalMasters, "local-masters", 0, "votes to start when --masters is not given (default 5, 3 with --cluster-shards)")
	fs.IntVar(&c.ClusterShards, "cluster-shards", 0, fmt.Sprintf("make each local vote a Redis Cluster of S shards, each a primary with one replica (1-%d; 0: plain masters), and add faults inside a cluster: a shard's primary killed or paused, a shard failed over to its replica, a hot slot migrated under load (in model only)", masters.MaxClusterShards))
	fs.IntVar(&c.SentinelVotes, "sentinel-votes", 0, "make the last K of the local votes masters Redis Sentinel manages, each a master with one replica under 3 sentinels, which the clients find through the sentinels, and add forced failovers of them (SENTINEL FAILOVER), some losing a hold's write, to the schedule; restarts and pauses stay on the plain masters (1 to --local-masters less 1, at most 4; in model, local votes only)")
	fs.StringVar(&o.quarantine, "quarantine", "always", "restart quarantine: off, observed or always; always, the engine's own default, also on the local masters the soak starts, where run defaults to observed: the soak tests the engine as a library user gets it (its first TTL, while the young masters are out of the vote, is load like the rest), a run measures a window that the quarantine would only empty")
	fs.DurationVar(&c.Jump, "jump", 0, "out-of-model: how far a master's clock jumps, shortening every key's TTL (0: the TTL)")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", metricsAddrUsage)
	fs.StringVar(&o.out, "out", "", "directory for chaos.json, chaos.txt and history.jsonl (default results/runs/<UTC timestamp>-chaos)")
	o.output.register(fs, "chaos.json", "print one line: the class, the verdict, the locks checked, the faults and the seed")
	o.conn = connflags.Register(fs)
	addVersionFlag(fs)
	return fs
}

const chaosUsageHead = `Usage:
  redlock-bench chaos [flags]

A seeded nemesis soak: several clients, every engine feature on (gate,
hand-off, auto-extension, fencing, notifications), lock a few hot resources
while a schedule drawn from --seed injects faults, and the oracle checks
every hold (mutual exclusion within reported validity), every fencing token
(strictly increasing per resource), every lease's Done (fired before the
next holder acquired) and every write to a fenced store.

In model (default): a minority of masters killed and restarted without
persistence, stopped (SIGSTOP), slowed, cut off, dropping connections, and
clients frozen past their TTL. With --cluster-shards S each vote is a local
Redis Cluster (a replica per primary) and, besides those faults on whole
votes, a shard's primary is killed or stopped, a shard fails over to its
replica, or a hot resource's slot migrates under load. With
--sentinel-votes K the last K votes are masters Redis Sentinel manages
(a replica and 3 sentinels each), and the sentinels fail one over to its
replica now and then, some of the failovers losing a hold's write on
exactly a quorum (the soak's own two clients, sentinel.a and sentinel.b):
the restart quarantine keeps the promoted master out for a TTL, and with
--quarantine off the second client is granted the lock the first holds.
A minority of votes is affected at any time. Expected: 0 violations, 0 stale tokens, 0
stale writes accepted.
Out of model (--class out-of-model): the keys deleted on a majority, a
master's clock jumping forward. Redlock alone cannot prevent the overlap;
expected: fencing rejects every stale write (0 stale writes accepted).

Exit status 0 when the expected outcome held, 1 when it did not (the
history of the failing window is in history.jsonl; replay with --seed), 2
for bad flags, 130 when interrupted (partial results written).

Flags:
`

// chaosUsage is chaos's help.
func chaosUsage() string { return chaosUsageHead + newChaosFlags(&chaosOptions{}).FlagUsages() }

// chaosCommand is `redlock-bench chaos`.
func chaosCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o chaosOptions
	fs := newChaosFlags(&o)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if err := checkMetricsAddr(o.metricsAddr); err != nil {
		return err
	}
	if err := o.output.check(); err != nil {
		return err
	}
	cfg := o.cfg
	e, err := engines.Parse(o.engine)
	if err != nil {
		return badFlag("engine", o.engine, err.Error())
	}
	cfg.Engine = e
	if cfg.Quarantine, err = engines.ParseQuarantine(o.quarantine); err != nil {
		return badFlag("quarantine", o.quarantine, err.Error())
	}
	l, err := engines.ParseLock(o.lock)
	if err != nil {
		return badFlag("lock", o.lock, err.Error())
	}
	cfg.Lock = l
	if !fs.Changed("resources") {
		cfg.Resources = chaos.DefaultResources(l)
	}
	if o.masters != "" {
		cfg.Masters = strings.Split(o.masters, ",")
	}
	switch {
	case len(cfg.Masters) > 0 && fs.Changed("local-masters"):
		return badFlag("local-masters", strconv.Itoa(cfg.LocalMasters), "cannot be combined with --masters")
	case len(cfg.Masters) > 0:
		cfg.LocalMasters = 0
	case !fs.Changed("local-masters") && cfg.ClusterShards > 0:
		cfg.LocalMasters = 3
	case !fs.Changed("local-masters"):
		cfg.LocalMasters = 5
	}
	conn, err := o.conn.Settings(len(cfg.Masters) > 0)
	if err != nil {
		return asUsage(err)
	}
	cfg.Conn = engines.Conn{Username: conn.Username, Password: conn.Password, TLS: conn.TLS}
	if cfg.Jump == 0 {
		cfg.Jump = cfg.TTL
	}
	if err := cfg.Validate(); err != nil {
		return asUsage(err)
	}
	if o.metricsAddr != "" && !cfg.Engine.IsRedlock() {
		return badFlag("metrics-addr", o.metricsAddr, "applies to --engine redlock only (its metrics are the engine's), not "+cfg.Engine.String())
	}
	if cfg.Seed == 0 {
		cfg.Seed = newSeed()
	}
	sess, err := openSession(stderr, sessionSpec{warning: o.conn.Warning(), metricsAddr: o.metricsAddr,
		out: o.out, parent: runsDir, label: "chaos", holds: []string{chaos.JSONFile}, quiet: o.output.quiet || o.output.json})
	if err != nil {
		return err
	}
	defer sess.close()
	if m := sess.metrics; m != nil {
		cfg.Observer = m.Observer
	}
	seedTo := stdout
	if o.output.json || o.output.quiet {
		// stdout is the JSON or the one line alone.
		seedTo = prefixWriter{w: stderr}
	}
	fmt.Fprintf(seedTo, "seed: %d\n", cfg.Seed)
	cfg.Log = sess.log
	r, err := chaos.Run(ctx, cfg)
	if err != nil {
		return sess.notStarted(ctx, "chaos soak", err)
	}
	if err := chaos.Write(sess.dir, r); err != nil {
		return err
	}
	err = o.output.show(stdout, stderr, sess.dir, shown{
		json:  r.WriteJSON,
		lines: func() []string { return []string{r.Line()} },
		text:  r.WriteText,
	})
	if err != nil {
		return err
	}
	switch {
	case r.Interrupted:
		return sess.interrupted()
	case !r.Passed:
		return &exitError{code: 1, msg: fmt.Sprintf("chaos: %s (seed %d; see %s)", r.Verdict, r.Seed, filepath.Join(sess.dir, chaos.TextFile))}
	}
	return nil
}

// newSeed picks a seed that is never 0, which means "pick one".
func newSeed() uint64 {
	for {
		if s := rand.Uint64(); s != 0 {
			return s
		}
	}
}
