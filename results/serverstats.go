package results

import "sort"

// ServerStats is what the Redis nodes the engine's votes reach spent on
// the measured window, from their own counters (INFO cpu: used_cpu_user +
// used_cpu_sys; INFO commandstats: calls) read at the window's start and
// end, beside the load generator's process CPU time over the same span.
// Divided by the window's acquisitions they give each node's cost of a
// lock cycle, which the capacity plan's scaling model rests on.
type ServerStats struct {
	// WindowS is the time between the two readings, in seconds.
	WindowS float64 `json:"window_s"`
	// ClientCPUS is the CPU time (user + system) of the load generator's
	// process, in seconds: the engine's client side with the workers,
	// recorder and oracle that drive it.
	ClientCPUS float64 `json:"client_cpu_s"`
	// Nodes are the primaries of every vote: a plain master, or each
	// shard's primary of a cluster.
	Nodes []ServerNode `json:"nodes"`
}

// ServerNode is one node's share of the measured window.
type ServerNode struct {
	// Addr is the node's address.
	Addr string `json:"addr"`
	// Vote is the vote the node belongs to, from 0: the masters, then the
	// clusters.
	Vote int `json:"vote"`
	// CPUS is the node's CPU time, user + system, in seconds.
	CPUS float64 `json:"cpu_s"`
	// Calls is the number of commands it ran; Commands splits them by
	// command (evalsha, set, publish, ...).
	Calls    int64            `json:"calls"`
	Commands map[string]int64 `json:"commands,omitempty"`
	// Reads is how many socket reads brought it commands
	// (total_reads_processed of INFO stats; the readings' own included):
	// Calls / Reads is the batch one wake-up serves, scripts' own
	// commands counted in. Absent from Redis before 6.
	Reads int64 `json:"reads,omitempty"`
}

// serverVote is one vote's nodes, as the capacity plan reads them.
type serverVote struct {
	Vote  int
	Nodes []ServerNode
}

// votes groups the nodes by vote, in vote order.
func (s *ServerStats) votes() []serverVote {
	by := map[int][]ServerNode{}
	var order []int
	for _, n := range s.Nodes {
		if by[n.Vote] == nil {
			order = append(order, n.Vote)
		}
		by[n.Vote] = append(by[n.Vote], n)
	}
	sort.Ints(order)
	out := make([]serverVote, len(order))
	for i, v := range order {
		out[i] = serverVote{Vote: v, Nodes: by[v]}
	}
	return out
}

// cpuS and calls total the nodes.
func (s *ServerStats) cpuS() (cpu float64, calls int64) {
	for _, n := range s.Nodes {
		cpu += n.CPUS
		calls += n.Calls
	}
	return cpu, calls
}
