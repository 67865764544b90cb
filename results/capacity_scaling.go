package results

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// The scaling model of the capacity plan. A lock cycle costs every vote
// some server CPU time; on a vote that is a Redis Cluster, a resource's
// keys live on the shard of its slot, so with keys spread evenly each of
// the S shards carries 1/S of the cycles. A redis-server runs commands on
// one thread, so a node saturates at one core. Hence, per acquisition
// (from the run's readings, summary.json's server):
//
//	k_i  CPU time of node i;  K_v = Σ_{i in vote v} k_i;  K = Σ_v K_v
//	k_c  CPU time of the load generator (the engine's client side)
//
//	throughput ≈ min( C_client / k_c,        the client's cores
//	                  C_server / K,          the cores the servers share
//	                  min_i 1 / k_i )        each node's one thread
//
// and with S' shards per cluster, as K_v is spread over them,
// min_i 1/k_i becomes min_v S'_v / K_v (S'_v = 1 for a plain master).
// Assumptions, which the plan states: keys spread evenly over the slots;
// K_v and k_c per acquisition do not change with S' or with load (the
// runs at several S check the first); the network is not the limit; no
// replicas. One hot resource lives on one shard of each vote: its own
// cycles are bounded by 1/K_v and by its hold time, whatever S'.

// scalingShards are the shards per cluster the model projects.
var scalingShards = []int{1, 2, 4, 8, 16}

// capacityScaling is the plan's section on server CPU and shards, when a
// run with cluster votes recorded its nodes' readings; nil otherwise.
func capacityScaling(inputs []*Input) *capacitySection {
	var runs []*RunDir
	clusters := false
	for _, in := range inputs {
		for _, r := range in.Runs {
			if s := r.Summary; s.Server != nil && len(s.Server.Nodes) > 0 && s.Acquired > 0 {
				runs = append(runs, r)
				clusters = clusters || len(s.Clusters) > 0
			}
		}
	}
	if !clusters {
		return nil
	}
	sec := &capacitySection{Title: "Server CPU and scaling with shards", Lead: text{}.
		p("Each node's CPU time (").c("INFO cpu").p(": user + sys) and commands (").c("INFO commandstats").
		p(") over the measured window, and the load generator's CPU time, per successful acquisition (failed attempts' cost included). " +
			"A lock cycle costs every vote; on a Redis Cluster a resource's key lives on the shard of its slot.")}
	for _, r := range runs {
		sec.Items = append(sec.Items, scalingRun(r))
	}
	sec.Items = append(sec.Items, scalingAcross(runs)...)
	sec.Items = append(sec.Items, capacityItem{Text: text{}.b("The model:").
		p(" throughput ≈ min(C_client / k_c, C_server / K, min over nodes of 1 / k_i), where k_i is node i's CPU time per acquisition, " +
			"K their sum over every node, k_c the load generator's, and C the cores each side has: a redis-server runs commands on one thread, " +
			"so a node saturates at one core. With S shards per cluster and keys spread evenly, each shard of vote v costs K_v / S, " +
			"so the last term becomes min over votes of S / K_v (S = 1 for a plain master)."),
		More: []text{
			text{}.b("Assumptions:").p(" keys spread evenly over the slots; K_v and k_c per acquisition do not change with S or with load " +
				"(compare runs at several S to check); the network is not the limit; no replicas (a replica's own CPU is not counted). " +
				"Projections give each redis-server a core of its own and the load generator enough cores; " +
				"on a shared machine the C_server / K and C_client / k_c terms bind first."),
			text{}.b("Hot slot:").p(" one resource lives on one shard of each vote, so its own cycles stay bounded by 1 / K_v " +
				"(all of its vote's cost on one thread) and by its hold time, whatever S: shards scale many resources, not one hot key."),
		}})
	return sec
}

// scalingRun is one run's readings and the model's figures from them.
func scalingRun(r *RunDir) capacityItem {
	s := r.Summary
	st := s.Server
	a := float64(s.Acquired)
	us := func(cpuS float64) float64 { return 1e6 * cpuS / a }
	cpu, calls := st.cpuS()
	scripts := int64(0)
	for _, n := range st.Nodes {
		for cmd, c := range n.Commands {
			if cmd == "evalsha" || cmd == "eval" || cmd == "evalsha_ro" || cmd == "eval_ro" || cmd == "fcall" || cmd == "fcall_ro" {
				scripts += c
			}
		}
	}
	K, kc := us(cpu), us(st.ClientCPUS)
	shape := fmt.Sprintf("%s: %s", counted(len(s.Masters)+len(s.Clusters), "vote"), counted(len(s.Masters), "master"))
	if len(s.Clusters) > 0 {
		shape += ", " + counted(len(s.Clusters), "Redis Cluster")
		if s.ClusterShards > 0 {
			shape += " of " + counted(s.ClusterShards, "shard")
		}
	}
	t := text{}.b("%s", r.Name()).p(" (").c(filepath.ToSlash(r.Dir)).
		p("; %s): %s acquisitions/s measured; per acquisition the servers spent %.1f µs of CPU in all, the load generator %.1f µs; "+
			"%.2f commands (%.2f script calls; a script's own commands count too).",
			shape, thousands(s.AcquiredPerSec), K, kc, float64(calls)/a, float64(scripts)/a)
	item := capacityItem{Text: t}

	// Per vote: its nodes' CPU and commands per acquisition.
	nodeBound, worstVote := 0.0, 0.0
	clusterVote := map[int]bool{}
	for i := range s.Clusters {
		clusterVote[len(s.Masters)+i] = true
	}
	var maxNode float64
	for _, v := range st.votes() {
		var cpus, cmds, batches []string
		kv := 0.0
		for _, n := range v.Nodes {
			k := us(n.CPUS)
			kv += k
			maxNode = max(maxNode, k)
			cpus = append(cpus, fmt.Sprintf("%.1f", k))
			cmds = append(cmds, fmt.Sprintf("%.2f", float64(n.Calls)/a))
			if n.Reads > 0 {
				batches = append(batches, fmt.Sprintf("%.1f", float64(n.Calls)/float64(n.Reads)))
			}
		}
		kind := "master"
		if clusterVote[v.Vote] {
			kind = "cluster of " + counted(len(v.Nodes), "shard")
			worstVote = max(worstVote, kv)
		}
		sub := text{}.p("vote %d (%s): %.1f µs of CPU per acquisition (per node: %s µs); commands per acquisition per node: %s",
			v.Vote+1, kind, kv, strings.Join(cpus, ", "), strings.Join(cmds, ", "))
		if len(batches) == len(v.Nodes) {
			sub = sub.p("; commands per socket read (the batch a wake-up serves): %s", strings.Join(batches, ", "))
		}
		item.Subs = append(item.Subs, capacityItem{Text: sub.p(".")})
	}
	if maxNode > 0 {
		nodeBound = 1e6 / maxNode
	}
	cores := s.Machine.CPUs
	more := text{}.p("Model: with each redis-server on a core of its own, the busiest node's thread allows %s acquisitions/s", thousands(nodeBound))
	if cores > 0 && K+kc > 0 {
		share := 1e6 * float64(cores) / (K + kc)
		more = more.p("; on this machine's %d cores, shared by every server and the load generator, %s acquisitions/s (measured: %.0f%% of it)",
			cores, thousands(share), 100*s.AcquiredPerSec/share)
	}
	item.More = append(item.More, more.p("."))
	if worstVote > 0 {
		// Plain masters keep their own bound: one thread each.
		masterBound := 0.0
		for _, v := range st.votes() {
			if !clusterVote[v.Vote] {
				kv := 0.0
				for _, n := range v.Nodes {
					kv += us(n.CPUS)
				}
				masterBound = max(masterBound, kv)
			}
		}
		var parts []string
		for _, sp := range scalingShards {
			tp := 1e6 * float64(sp) / worstVote
			if masterBound > 0 {
				tp = min(tp, 1e6/masterBound)
			}
			parts = append(parts, fmt.Sprintf("S=%d: %s/s on %d server cores and %.1f client cores",
				sp, thousands(tp), len(s.Clusters)*sp+len(s.Masters), tp*kc/1e6))
		}
		item.More = append(item.More, text{}.p("Projected with S shards per cluster (this run's cost per vote spread evenly over S): %s.", strings.Join(parts, "; ")))
	}
	return item
}

// scalingShape is one run's figures for the check across shard counts.
type scalingShape struct {
	shards        int // 0: plain masters
	perSec        float64
	perVote, node float64 // µs of server CPU per acquisition: a vote's mean, a node's mean
	batch         float64 // commands per socket read, over every node; 0 unknown
	reads         float64 // socket reads per acquisition, a node's mean
}

// scalingAcross checks the model's assumption that a vote's cost does
// not change with its shards: for each workload run at several shard
// counts (plain masters counting as one), the medians of throughput and
// of the CPU per acquisition of a vote and of a node, per count.
func scalingAcross(runs []*RunDir) []capacityItem {
	groups := map[string]map[int][]scalingShape{}
	var keys []string
	for _, r := range runs {
		s := r.Summary
		c := s.Config
		votes := len(s.Masters) + len(s.Clusters)
		if len(s.Masters) > 0 && len(s.Clusters) > 0 || votes == 0 {
			continue // mixed votes: no single shard count
		}
		key := fmt.Sprintf("%s, %d votes, %d workers, %d resources (%s), mode %s, hold %s", s.Engine, votes, c.Workers, c.Resources, c.Distribution, s.Mode, c.Hold)
		shards := 0
		if len(s.Clusters) > 0 {
			if shards = s.ClusterShards; shards == 0 {
				shards = len(s.Server.Nodes) / votes
			}
		}
		cpu, calls := s.Server.cpuS()
		us := 1e6 * cpu / float64(s.Acquired)
		batch, reads := 0.0, int64(0)
		for _, n := range s.Server.Nodes {
			reads += n.Reads
		}
		if reads > 0 {
			batch = float64(calls) / float64(reads)
		}
		if groups[key] == nil {
			groups[key] = map[int][]scalingShape{}
			keys = append(keys, key)
		}
		groups[key][shards] = append(groups[key][shards], scalingShape{shards: shards, perSec: s.AcquiredPerSec,
			perVote: us / float64(votes), node: us / float64(len(s.Server.Nodes)), batch: batch,
			reads: float64(reads) / float64(s.Acquired) / float64(len(s.Server.Nodes))})
	}
	var items []capacityItem
	for _, key := range keys {
		g := groups[key]
		if len(g) < 2 {
			continue
		}
		counts := make([]int, 0, len(g))
		for n := range g {
			counts = append(counts, n)
		}
		sort.Ints(counts)
		item := capacityItem{Text: text{}.b("Across shard counts").p(" (%s; medians of each count's runs):", key)}
		var first, last, firstReads, lastReads float64
		for i, n := range counts {
			sh := g[n]
			med := func(f func(scalingShape) float64) float64 {
				v := make([]float64, len(sh))
				for j, x := range sh {
					v[j] = f(x)
				}
				slices.Sort(v)
				if len(v)%2 == 1 {
					return v[len(v)/2]
				}
				return (v[len(v)/2-1] + v[len(v)/2]) / 2
			}
			perVote := med(func(x scalingShape) float64 { return x.perVote })
			what := fmt.Sprintf("S=%d", n)
			if n == 0 {
				what = "plain masters"
			}
			line := text{}.p("%s (%s): %s acquisitions/s; %.1f µs of server CPU per acquisition per vote, %.1f per node",
				what, counted(len(sh), "run"), thousands(med(func(x scalingShape) float64 { return x.perSec })), perVote, med(func(x scalingShape) float64 { return x.node }))
			if b := med(func(x scalingShape) float64 { return x.batch }); b > 0 {
				line = line.p("; %.1f commands per socket read, %.3f reads per acquisition per node", b, med(func(x scalingShape) float64 { return x.reads }))
			}
			item.Subs = append(item.Subs, capacityItem{Text: line.p(".")})
			reads := med(func(x scalingShape) float64 { return x.reads })
			if n > 0 && first == 0 {
				first, firstReads = perVote, reads
			}
			if i == len(counts)-1 {
				last, lastReads = perVote, reads
			}
		}
		if lo, hi := counts[0], counts[len(counts)-1]; first > 0 && hi > max(lo, 1) {
			ratio := last / first
			verdict := "it held, within 20%: the projections above stand on it"
			switch {
			case ratio <= 1.2:
			case firstReads > 0 && lastReads/firstReads > 0.8 && lastReads/firstReads < 1.25:
				verdict = fmt.Sprintf("it did not hold here, so the projections above overstate what more shards give at this load. "+
					"Each node was woken about as often per acquisition (%.3f reads, then %.3f) while it served 1/S of the commands: "+
					"the client writes to every node in each round, so each added shard adds wake-ups, and batches refill only nearer saturation",
					firstReads, lastReads)
			default:
				verdict = "it did not hold here, so the projections above overstate what more shards give at this load " +
					"(likely: each node's share of the commands, and with it the batch each wake-up serves, shrinks as S grows)"
			}
			item.More = append(item.More, text{}.p("A vote's CPU per acquisition went from %.1f µs on the fewest shards to %.1f µs on S=%d (%.2f×); the model assumes it stays: %s.",
				first, last, hi, ratio, verdict))
		}
		items = append(items, item)
	}
	return items
}

// counted is "1 vote", "3 votes".
func counted(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
