package bench

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlock-bench/redlock/bench/masters"
	"github.com/redlock-bench/redlock/internal/redisproc"
	"github.com/redlock-bench/redlock/results"
)

// The server readings (summary.json's server): every primary the votes
// reach reports its CPU time (INFO cpu) and its commands (INFO
// commandstats) at the measured window's start and end, and the process
// its own CPU time (getrusage). Their differences, per acquisition, are the
// figures the capacity plan's scaling model needs: what a lock cycle costs
// each shard, and the client. The readings take a round trip to each node,
// all at once, over connections opened before the run.

// serverReadTimeout bounds one reading of one node.
const serverReadTimeout = 2 * time.Second

// serverNode is one node read, with its client.
type serverNode struct {
	addr string
	vote int
	c    rueidis.Client
}

// serverReading is one node's counters at one moment.
type serverReading struct {
	cpuS     float64
	calls    int64
	commands map[string]int64
	reads    int64 // total_reads_processed: socket reads that brought commands
}

// serverStats reads the nodes at the window's start and end.
type serverStats struct {
	nodes []serverNode
	// begin's readings, taken in the background; wg waits for them.
	wg         sync.WaitGroup
	start      []serverReading
	startErr   error
	startAt    time.Time
	clientCPUs float64
}

// newServerStats connects to every primary of the site's votes: each
// master, and each cluster's primaries (for local clusters their seeds;
// for given ones asked of the first seed that answers CLUSTER NODES, else
// the seeds). The caller closes it.
func newServerStats(ctx context.Context, conn redisproc.Conn, site runSite) (*serverStats, error) {
	st := &serverStats{}
	add := func(addr string, vote int) error {
		c, err := conn.NewClient(addr, masters.ProbeTimeout)
		if err != nil {
			return fmt.Errorf("%s: %w", addr, err)
		}
		st.nodes = append(st.nodes, serverNode{addr: addr, vote: vote, c: c})
		return nil
	}
	for i, a := range site.masters {
		if err := add(a, i); err != nil {
			st.close()
			return nil, err
		}
	}
	for i, seeds := range site.clusters {
		if site.shards == 0 {
			// Given clusters: their seeds may be some of their nodes.
			seeds = clusterPrimaries(ctx, conn, seeds)
		}
		for _, a := range seeds {
			if err := add(a, len(site.masters)+i); err != nil {
				st.close()
				return nil, err
			}
		}
	}
	return st, nil
}

// clusterPrimaries are the primaries that serve slots in the cluster of
// seeds, from CLUSTER NODES; the seeds themselves when no seed answers it.
func clusterPrimaries(ctx context.Context, conn redisproc.Conn, seeds []string) []string {
	for _, seed := range seeds {
		c, err := conn.NewClient(seed, masters.ProbeTimeout)
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(ctx, masters.ProbeTimeout)
		text, err := c.Do(ctx, c.B().ClusterNodes().Build()).ToString()
		cancel()
		c.Close()
		if err != nil {
			continue
		}
		host, _, _ := net.SplitHostPort(seed)
		if p := parseClusterPrimaries(text, host); len(p) > 0 {
			return p
		}
	}
	return seeds
}

// parseClusterPrimaries reads CLUSTER NODES: "<id> <ip:port@cport[,host]>
// <flags> <primary> <ping> <pong> <epoch> <link> <slot>...", and returns
// the addresses of the primaries that are not failing and serve slots. A
// node that knows no IP of its own (":port") is given seedHost.
func parseClusterPrimaries(text, seedHost string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 {
			continue // no slots, or no node
		}
		flags := "," + f[2] + ","
		if !strings.Contains(flags, ",master,") || strings.Contains(flags, ",fail,") {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			continue
		}
		if host == "" {
			host = seedHost
		}
		out = append(out, net.JoinHostPort(host, port))
	}
	return out
}

// read reads every node at once.
func (st *serverStats) read(ctx context.Context) ([]serverReading, error) {
	out := make([]serverReading, len(st.nodes))
	errs := make([]error, len(st.nodes))
	var wg sync.WaitGroup
	for i, n := range st.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = readNode(ctx, n.c)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("%s: %w", n.addr, errs[i])
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readNode reads one node's CPU time and command counts.
func readNode(ctx context.Context, c rueidis.Client) (serverReading, error) {
	ctx, cancel := context.WithTimeout(ctx, serverReadTimeout)
	defer cancel()
	res := c.DoMulti(ctx, c.B().Info().Section("cpu").Build(), c.B().Info().Section("commandstats").Build(),
		c.B().Info().Section("stats").Build())
	var info []string
	for _, r := range res {
		s, err := r.ToString()
		if err != nil {
			return serverReading{}, err
		}
		info = append(info, s)
	}
	return parseServerInfo(strings.Join(info, "\n"))
}

// parseServerInfo reads used_cpu_user + used_cpu_sys, every
// "cmdstat_<name>:calls=N,..." line and total_reads_processed of INFO.
func parseServerInfo(info string) (serverReading, error) {
	r := serverReading{commands: map[string]int64{}}
	seen := 0
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case key == "used_cpu_user" || key == "used_cpu_sys":
			v, err := strconv.ParseFloat(val, 64)
			if err != nil {
				return r, fmt.Errorf("INFO cpu: %s: %w", line, err)
			}
			r.cpuS += v
			seen++
		case key == "total_reads_processed":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				return r, fmt.Errorf("INFO stats: %s: %w", line, err)
			}
			r.reads = n
		case strings.HasPrefix(key, "cmdstat_"):
			calls, _, _ := strings.Cut(strings.TrimPrefix(val, "calls="), ",")
			n, err := strconv.ParseInt(calls, 10, 64)
			if err != nil {
				return r, fmt.Errorf("INFO commandstats: %s: %w", line, err)
			}
			r.commands[strings.TrimPrefix(key, "cmdstat_")] = n
			r.calls += n
		}
	}
	if seen != 2 {
		return r, fmt.Errorf("INFO cpu has no used_cpu_user and used_cpu_sys")
	}
	return r, nil
}

// begin takes the start readings in the background.
func (st *serverStats) begin(ctx context.Context) {
	st.startAt = time.Now()
	st.clientCPUs = processCPU()
	st.wg.Add(1)
	go func() {
		defer st.wg.Done()
		st.start, st.startErr = st.read(ctx)
	}()
}

// end takes the end readings and returns the differences; nil and the
// reason when a reading failed or begin never ran.
func (st *serverStats) end(ctx context.Context) (*results.ServerStats, error) {
	if st.startAt.IsZero() {
		return nil, nil
	}
	// The start readings first: taken in the background, on a loaded
	// machine they can come late, and an end reading taken before them
	// read every counter as having gone down, so zero.
	st.wg.Wait()
	at, client := time.Now(), processCPU()
	end, err := st.read(ctx)
	if err == nil {
		err = st.startErr
	}
	if err != nil {
		return nil, err
	}
	out := &results.ServerStats{WindowS: at.Sub(st.startAt).Seconds(), ClientCPUS: max(0, client-st.clientCPUs)}
	for i, n := range st.nodes {
		sn := results.ServerNode{Addr: n.addr, Vote: n.vote, CPUS: max(0, end[i].cpuS-st.start[i].cpuS),
			Reads: max(0, end[i].reads-st.start[i].reads), Commands: map[string]int64{}}
		for cmd, calls := range end[i].commands {
			if cmd == "info" {
				continue // the readings' own
			}
			if d := calls - st.start[i].commands[cmd]; d > 0 {
				sn.Commands[cmd] = d
				sn.Calls += d
			}
		}
		out.Nodes = append(out.Nodes, sn)
	}
	return out, nil
}

func (st *serverStats) close() {
	if st == nil {
		return
	}
	st.wg.Wait()
	for _, n := range st.nodes {
		n.c.Close()
	}
}

// endServerStats takes the end readings, when the window was read.
func (r *runner) endServerStats() {
	if r.server == nil || !r.measured {
		return
	}
	out, err := r.server.end(context.Background())
	if err != nil && r.cfg.Log != nil {
		fmt.Fprintf(r.cfg.Log, "warning: the nodes' CPU and commands are not recorded: %v\n", err)
	}
	r.serverOut = out
}
