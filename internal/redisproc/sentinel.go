package redisproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// SentinelOptions shape a SentinelGroup.
type SentinelOptions struct {
	// Master is the name the sentinels monitor the master under. Default:
	// "mymaster".
	Master string
	// Replicas is the number of replicas of the master. Default: 1.
	Replicas int
	// Sentinels is the number of sentinel processes. Default: 3.
	Sentinels int
	// Quorum is how many sentinels must agree the master is down before
	// an automatic failover. Default: Sentinels/2+1.
	Quorum int
	// DownAfter is down-after-milliseconds: how long the master may not
	// answer before a sentinel thinks it down. Default: 5s, so that a
	// loaded machine's stall does not fail the master over unasked; a
	// failover the test wants is forced (Failover).
	DownAfter time.Duration
	// FailoverTimeout is failover-timeout. Default: 10s.
	FailoverTimeout time.Duration
}

func (so *SentinelOptions) fill() error {
	if so.Master == "" {
		so.Master = "mymaster"
	}
	if so.Replicas == 0 {
		so.Replicas = 1
	}
	if so.Sentinels == 0 {
		so.Sentinels = 3
	}
	if so.Quorum == 0 {
		so.Quorum = so.Sentinels/2 + 1
	}
	if so.DownAfter <= 0 {
		so.DownAfter = 5 * time.Second
	}
	if so.FailoverTimeout <= 0 {
		so.FailoverTimeout = 10 * time.Second
	}
	switch {
	case strings.ContainsAny(so.Master, " \t\r\n"):
		return fmt.Errorf("redisproc: sentinel master name %q has spaces", so.Master)
	case so.Replicas < 1 || so.Sentinels < 1 || so.Quorum < 1 || so.Quorum > so.Sentinels:
		return fmt.Errorf("redisproc: a sentinel group needs >= 1 replica, >= 1 sentinel and a quorum in 1-%d, got %d, %d and %d",
			so.Sentinels, so.Replicas, so.Sentinels, so.Quorum)
	}
	return nil
}

// SentinelGroup is one master with its replicas, monitored by Redis
// Sentinel processes (redis-server --sentinel) under one name. A failover
// changes which data node is the master; the sentinels say which
// (MasterAddr).
type SentinelGroup struct {
	Master string
	// Data are the redis-server processes: Data[0] started as the master,
	// the others as its replicas.
	Data []*Node
	// Sentinels are the sentinel processes.
	Sentinels []*Node
	opts      SentinelOptions
	root      string
}

// StartSentinels launches a master and its replicas, waits until every
// replica's link is up, then launches the sentinels monitoring the master
// and waits until each of them knows every replica and the other
// sentinels: from then on a forced failover (Failover) has a replica to
// promote and every sentinel learns of it. On error every process
// already started is stopped. TLS and passwords are not supported.
func StartSentinels(ctx context.Context, so SentinelOptions, opts Options) (*SentinelGroup, error) {
	if err := so.fill(); err != nil {
		return nil, err
	}
	if err := opts.fill(); err != nil {
		return nil, err
	}
	if opts.TLS != nil || opts.Password != "" {
		return nil, errors.New("redisproc: TLS and passwords are not supported for a SentinelGroup")
	}
	if _, err := findBin(opts.Bin); err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "redissentinel-")
	if err != nil {
		return nil, fmt.Errorf("redisproc: %w", err)
	}
	g := &SentinelGroup{Master: so.Master, opts: so, root: root}
	fail := func(err error) (*SentinelGroup, error) {
		g.Stop()
		return nil, err
	}
	start := func(name string, o Options, conf string) (*Node, error) {
		dir := filepath.Join(root, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			return nil, fmt.Errorf("redisproc: %w", err)
		}
		n := &Node{opts: o, Dir: dir}
		if conf != "" {
			n.sentinelConf = filepath.Join(dir, "sentinel.conf")
			if err := os.WriteFile(n.sentinelConf, []byte(conf), 0o600); err != nil {
				return nil, fmt.Errorf("redisproc: %w", err)
			}
		}
		return n, n.startOnFreePort(ctx)
	}
	master, err := start("data-0", opts, "")
	if master != nil {
		g.Data = append(g.Data, master)
	}
	if err != nil {
		return fail(err)
	}
	for i := 1; i <= so.Replicas; i++ {
		o := opts
		// A replica's first sync starts at once, not after the default
		// 5s wait for more replicas.
		o.Args = append([]string{"--replicaof", opts.Host, strconv.Itoa(master.Port), "--repl-diskless-sync-delay", "0"}, opts.Args...)
		n, err := start("data-"+strconv.Itoa(i), o, "")
		if n != nil {
			g.Data = append(g.Data, n)
		}
		if err != nil {
			return fail(err)
		}
	}
	// The sentinels learn the replicas from the master's INFO, which they
	// read at once on connecting and then only every 10s: replicas that
	// are not linked yet would be found late.
	if err := g.await(ctx, "the replicas to sync", func() error {
		for _, r := range g.Data[1:] {
			repl, err := r.cmd1(ctx, "INFO", "replication")
			if err != nil {
				return err
			}
			if !strings.Contains(repl, "master_link_status:up") {
				return fmt.Errorf("%s: link to the master not up", r.Addr())
			}
		}
		return nil
	}); err != nil {
		return fail(err)
	}
	conf := fmt.Sprintf("sentinel monitor %s %s %d %d\nsentinel down-after-milliseconds %s %d\nsentinel failover-timeout %s %d\n",
		so.Master, opts.Host, master.Port, so.Quorum,
		so.Master, so.DownAfter.Milliseconds(), so.Master, so.FailoverTimeout.Milliseconds())
	for i := 0; i < so.Sentinels; i++ {
		n, err := start("sentinel-"+strconv.Itoa(i), Options{Bin: opts.Bin, Host: opts.Host, StartTimeout: opts.StartTimeout}, conf)
		if n != nil {
			g.Sentinels = append(g.Sentinels, n)
		}
		if err != nil {
			return fail(err)
		}
	}
	if err := g.await(ctx, "the sentinels to know the replicas and each other", func() error {
		for _, s := range g.Sentinels {
			if err := g.knows(ctx, s); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return fail(err)
	}
	return g, nil
}

// knows checks that sentinel s lists every replica, linked to the master
// and not down, and every other sentinel.
func (g *SentinelGroup) knows(ctx context.Context, s *Node) error {
	replicas, err := s.sentinelMaps(ctx, "REPLICAS", g.Master)
	if err != nil {
		return err
	}
	good := 0
	for _, r := range replicas {
		if r["master-link-status"] == "ok" && !strings.Contains(r["flags"], "down") && !strings.Contains(r["flags"], "disconnected") {
			good++
		}
	}
	if good < len(g.Data)-1 {
		return fmt.Errorf("sentinel %s knows %d of %d replicas in sync", s.Addr(), good, len(g.Data)-1)
	}
	others, err := s.sentinelMaps(ctx, "SENTINELS", g.Master)
	if err != nil {
		return err
	}
	if len(others) < len(g.Sentinels)-1 {
		return fmt.Errorf("sentinel %s knows %d of %d other sentinels", s.Addr(), len(others), len(g.Sentinels)-1)
	}
	return nil
}

// sentinelMaps sends SENTINEL sub master (sub alone when master is
// empty) to sentinel n and returns the reply's entries as maps.
func (n *Node) sentinelMaps(ctx context.Context, sub, master string) ([]map[string]string, error) {
	const timeout = 2 * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, err := n.Conn().NewClient(n.Addr(), timeout)
	if err != nil {
		return nil, fmt.Errorf("redisproc: sentinel %s: %w", n.Addr(), err)
	}
	defer cl.Close()
	args := []string{sub, master}
	if master == "" { // MASTERS takes none
		args = args[:1]
	}
	arr, err := cl.Do(ctx, cl.B().Arbitrary("SENTINEL").Args(args...).Build()).ToArray()
	if err != nil {
		return nil, fmt.Errorf("redisproc: sentinel %s: SENTINEL %s %s: %w", n.Addr(), sub, master, err)
	}
	out := make([]map[string]string, 0, len(arr))
	for _, e := range arr {
		if m, err := e.AsStrMap(); err == nil {
			out = append(out, m)
		}
	}
	return out, nil
}

// SentinelAddrs returns the sentinels' host:port, in order: what a
// client is given to find the master.
func (g *SentinelGroup) SentinelAddrs() []string {
	out := make([]string, len(g.Sentinels))
	for i, s := range g.Sentinels {
		out[i] = s.Addr()
	}
	return out
}

// MasterAddr returns the master's address as every running sentinel
// reports it (SENTINEL GET-MASTER-ADDR-BY-NAME), or an error when they
// disagree or none answers.
func (g *SentinelGroup) MasterAddr(ctx context.Context) (string, error) {
	var addr string
	for _, s := range g.Sentinels {
		if !s.Running() {
			continue
		}
		a, err := s.masterAddr(ctx, g.Master)
		if err != nil {
			return "", err
		}
		if addr != "" && a != addr {
			return "", fmt.Errorf("redisproc: sentinels disagree on the master of %s: %s and %s", g.Master, addr, a)
		}
		addr = a
	}
	if addr == "" {
		return "", fmt.Errorf("redisproc: no sentinel of %s runs", g.Master)
	}
	return addr, nil
}

func (n *Node) masterAddr(ctx context.Context, master string) (string, error) {
	const timeout = 2 * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, err := n.Conn().NewClient(n.Addr(), timeout)
	if err != nil {
		return "", fmt.Errorf("redisproc: sentinel %s: %w", n.Addr(), err)
	}
	defer cl.Close()
	hp, err := cl.Do(ctx, cl.B().SentinelGetMasterAddrByName().Master(master).Build()).AsStrSlice()
	if err != nil || len(hp) != 2 {
		return "", fmt.Errorf("redisproc: sentinel %s: GET-MASTER-ADDR-BY-NAME %s: %v %v", n.Addr(), master, hp, err)
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

// MasterRoleAge is how long every running sentinel has seen the master
// in its role (SENTINEL MASTER's role-reported-time: since it saw the
// server become master, or began watching it), the shortest of theirs.
// A client that judges a Sentinel vote's master by when it became master
// keeps it out until MaxTTL after that.
func (g *SentinelGroup) MasterRoleAge(ctx context.Context) (time.Duration, error) {
	age := time.Duration(-1)
	for _, s := range g.Sentinels {
		if !s.Running() {
			continue
		}
		m, err := s.sentinelMaps(ctx, "MASTERS", "")
		if err != nil {
			return 0, err
		}
		found := false
		for _, e := range m {
			if e["name"] != g.Master {
				continue
			}
			ms, err := strconv.ParseInt(e["role-reported-time"], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("redisproc: sentinel %s: role-reported-time %q", s.Addr(), e["role-reported-time"])
			}
			if d := time.Duration(ms) * time.Millisecond; age < 0 || d < age {
				age = d
			}
			found = true
		}
		if !found {
			return 0, fmt.Errorf("redisproc: sentinel %s does not monitor %s", s.Addr(), g.Master)
		}
	}
	if age < 0 {
		return 0, fmt.Errorf("redisproc: no sentinel of %s runs", g.Master)
	}
	return age, nil
}

// DataNode returns the data node at addr, or nil.
func (g *SentinelGroup) DataNode(addr string) *Node {
	for _, n := range g.Data {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// Failover forces a failover (SENTINEL FAILOVER on the first running
// sentinel, which promotes a replica without asking the others) and
// waits until every running sentinel reports a new master address and
// that node says it is a master. It returns the new master's address.
// The replica promoted has whatever it had replicated: writes the old
// master took just before are lost. The old master is demoted to a
// replica by the sentinels some seconds later (they wait before
// reconfiguring a node that still claims to be a master); Failover does
// not wait for that.
func (g *SentinelGroup) Failover(ctx context.Context) (string, error) {
	old, err := g.MasterAddr(ctx)
	if err != nil {
		return "", err
	}
	var s *Node
	for _, n := range g.Sentinels {
		if n.Running() {
			s = n
			break
		}
	}
	if s == nil {
		return "", fmt.Errorf("redisproc: no sentinel of %s runs", g.Master)
	}
	// A sentinel refuses while it sees no replica fit to promote
	// (NOGOODSLAVE: it has not heard from it lately) or while an earlier
	// failover is still in progress (INPROG): both are states that pass,
	// so the call is repeated until it is taken or the wait runs out.
	if err := g.await(ctx, "SENTINEL FAILOVER "+g.Master+" to be taken", func() error {
		_, err := s.cmd1(ctx, "SENTINEL", "FAILOVER", g.Master)
		if err != nil && !strings.Contains(err.Error(), "NOGOODSLAVE") && !strings.Contains(err.Error(), "INPROG") {
			return backoffStop{err}
		}
		return err
	}); err != nil {
		return "", err
	}
	var addr string
	err = g.await(ctx, "every sentinel to report a new master of "+g.Master, func() error {
		a, err := g.MasterAddr(ctx)
		if err != nil {
			return err
		}
		if a == old {
			return fmt.Errorf("the master of %s is still %s", g.Master, old)
		}
		n := g.DataNode(a)
		if n == nil {
			return fmt.Errorf("the sentinels report %s, not a node of the group", a)
		}
		repl, err := n.cmd1(ctx, "INFO", "replication")
		if err != nil {
			return err
		}
		if !strings.Contains(repl, "role:master") {
			return fmt.Errorf("%s is not a master yet", a)
		}
		addr = a
		return nil
	})
	return addr, err
}

// WaitSettled waits until the group is whole again after a failover:
// every data node but the master the sentinels name replicates from it
// with its link up, and every running sentinel knows every replica in
// sync and the other sentinels. The sentinels demote an old master that
// still runs some seconds after the failover (Failover); until then a
// next Failover would have no replica of the new master to promote. It
// waits as long as ctx allows, at most settleWait.
func (g *SentinelGroup) WaitSettled(ctx context.Context) error {
	return g.awaitUntil(ctx, time.Now().Add(settleWait), "the sentinels of "+g.Master+" to settle", func() error {
		m, err := g.MasterAddr(ctx)
		if err != nil {
			return err
		}
		_, port, _ := net.SplitHostPort(m)
		for _, n := range g.Data {
			if n.Addr() == m {
				continue
			}
			repl, err := n.cmd1(ctx, "INFO", "replication")
			if err != nil {
				return err
			}
			if !strings.Contains(repl, "master_port:"+port+"\r\n") || !strings.Contains(repl, "master_link_status:up") {
				return fmt.Errorf("%s: not yet a replica of %s with its link up (%s)", n.Addr(), m, replicationState(repl))
			}
		}
		for _, s := range g.Sentinels {
			if !s.Running() {
				continue
			}
			if err := g.knows(ctx, s); err != nil {
				return err
			}
		}
		return nil
	})
}

// replicationState is the lines of INFO replication that say what a node
// replicates from: its role, and a replica's master and link.
func replicationState(info string) string {
	var out []string
	for _, line := range strings.Split(info, "\r\n") {
		k, _, _ := strings.Cut(line, ":")
		switch k {
		case "role", "master_host", "master_port", "master_link_status":
			out = append(out, line)
		}
	}
	return strings.Join(out, " ")
}

// backoffStop ends an await at once with its error.
type backoffStop struct{ error }

func (b backoffStop) Unwrap() error { return b.error }

// await retries check every 50ms until it passes, fails with a
// backoffStop, ctx ends, or awaitCluster (or Options.StartTimeout, if
// longer) has passed: the sentinels gossip and fail over in their own
// time, which a loaded machine stretches.
func (g *SentinelGroup) await(ctx context.Context, what string, check func() error) error {
	return g.awaitUntil(ctx, time.Now().Add(max(g.Data[0].opts.StartTimeout, awaitCluster)), what, check)
}

// settleWait bounds WaitSettled. The demotion takes some twenty seconds
// (the sentinels wait 8s after seeing the old master claim the role, and
// read a replica's INFO every 10s); a sentinel whose timer stalled for
// over 2s, as on a starved machine, stops acting for 30s (TILT).
const settleWait = 2 * time.Minute

// awaitUntil is await with its own deadline.
func (g *SentinelGroup) awaitUntil(ctx context.Context, deadline time.Time, what string, check func() error) error {
	for {
		err := check()
		if err == nil {
			return nil
		}
		var stop backoffStop
		if errors.As(err, &stop) {
			return fmt.Errorf("redisproc: %s: %w", what, stop.error)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redisproc: waiting for %s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redisproc: waiting for %s: %w", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop kills every process and removes the directories. It is safe to
// call more than once.
func (g *SentinelGroup) Stop() error {
	var errs []error
	for _, n := range append(append([]*Node(nil), g.Sentinels...), g.Data...) {
		if err := n.stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if g.root != "" {
		if err := os.RemoveAll(g.root); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
