// Package addrcheck holds the one rule for a vote's address (host:port,
// the port in 1-65535) and the checks of a whole list of votes: none bad,
// none given twice, since two votes from one server would fake a quorum.
// engine checks its Config with it, and multiplex its Options, so both
// name the same fault the same way.
package addrcheck

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// AddrError is a master address that cannot be used: not host:port with a
// port in 1-65535, or listed twice (two votes from one server would fake a
// quorum).
type AddrError struct {
	Index int // the address's position in the list
	Addr  string
	// First is the position of the address's first listing when this is a
	// duplicate, else -1.
	First int
	// Reason is what is wrong, without the address: "want host:port",
	// "port must be 1-65535", or "given twice".
	Reason string
}

func (e *AddrError) Error() string {
	if e.First >= 0 {
		return fmt.Sprintf("address %q given twice (Addrs[%d] and Addrs[%d]): masters must be distinct", e.Addr, e.First, e.Index)
	}
	return fmt.Sprintf("address %q: %s", e.Addr, e.Reason)
}

// addrProblem is the one rule for a master's address: host:port with a
// host free of spaces and slashes and a port written as a number in
// 1-65535. It returns what is wrong, or "".
func addrProblem(a string) string {
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" || strings.ContainsAny(host, " /\t\r\n") {
		return "want host:port"
	}
	if pn, err := strconv.Atoi(port); err != nil || pn <= 0 || pn > 65535 || strconv.Itoa(pn) != port {
		return "port must be 1-65535"
	}
	return ""
}

// Masters checks a list of master addresses as multiplex.Dial does: at least
// one, each as addrProblem wants, none twice. A bad address is reported as
// an *AddrError.
func Masters(addrs []string) error {
	if len(addrs) == 0 {
		return errors.New("no master addresses: at least one is needed")
	}
	seen := make(map[string]int, len(addrs))
	for i, a := range addrs {
		if why := addrProblem(a); why != "" {
			return &AddrError{Index: i, Addr: a, First: -1, Reason: why}
		}
		if j, dup := seen[a]; dup {
			return &AddrError{Index: i, Addr: a, First: j, Reason: "given twice"}
		}
		seen[a] = i
	}
	return nil
}

// Parse reads a comma-separated list of master addresses, as command
// lines and environment variables give them, with the rules of
// Masters. Its errors name the address without a package prefix, for
// a flag's message.
func Parse(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, errors.New("empty list")
	}
	parts := strings.Split(list, ",")
	out := make([]string, 0, len(parts))
	for _, a := range parts {
		a = strings.TrimSpace(a)
		if why := addrProblem(a); why != "" {
			return nil, fmt.Errorf("address %q: %s", a, why)
		}
		if slices.Contains(out, a) {
			return nil, fmt.Errorf("address %q is listed twice", a)
		}
		out = append(out, a)
	}
	return out, nil
}

// ClusterAddrError is a cluster vote's address that cannot be used: not
// host:port with a port in 1-65535, or given twice (within the cluster,
// or also as a master or in another cluster), or a cluster with none.
type ClusterAddrError struct {
	Cluster, Seed int // Clusters[Cluster][Seed]; Seed is -1 for an empty cluster
	Addr          string
	// Dup names the address's other listing when it is given twice:
	// "Addrs[2]", "Clusters[0][1]".
	Dup string
	// Reason is what is wrong, without the address.
	Reason string
}

func (e *ClusterAddrError) Error() string {
	switch {
	case e.Seed < 0:
		return fmt.Sprintf("Clusters[%d] has no addresses", e.Cluster)
	case e.Dup != "":
		return fmt.Sprintf("address %q given twice (%s and Clusters[%d][%d]): votes must be distinct", e.Addr, e.Dup, e.Cluster, e.Seed)
	}
	return fmt.Sprintf("address %q (Clusters[%d][%d]): %s", e.Addr, e.Cluster, e.Seed, e.Reason)
}

// Votes checks masters and cluster votes as multiplex.Dial does: at least
// one vote, the masters as Masters wants, each cluster with
// addresses, none of them bad or given twice anywhere (a cluster's bad
// address is a *ClusterAddrError).
func Votes(addrs []string, clusters [][]string) error { return AllVotes(addrs, clusters, nil) }

// Sentinel is a vote that is a master Redis Sentinel manages: the name
// the sentinels monitor it under, and some of the sentinels' addresses.
type Sentinel struct {
	Master string
	Addrs  []string
}

// SentinelError is a Sentinel vote that cannot be used: a bad master
// name, no sentinel addresses, a bad address, an address given twice (in
// the vote, or also as a master or a cluster's node: a sentinel is
// neither), or a master named twice through the same sentinels.
type SentinelError struct {
	Vote int // Sentinels[Vote]
	// Sentinel is the address's position in the vote's Addrs, -1 when the
	// fault is the vote's.
	Sentinel int
	Addr     string
	// Reason is what is wrong, without the vote's position.
	Reason string
}

func (e *SentinelError) Error() string {
	if e.Sentinel < 0 {
		return fmt.Sprintf("Sentinels[%d]: %s", e.Vote, e.Reason)
	}
	return fmt.Sprintf("Sentinels[%d].Addrs[%d] %q: %s", e.Vote, e.Sentinel, e.Addr, e.Reason)
}

// AllVotes checks masters, cluster votes and Sentinel votes as
// multiplex.Dial does: Votes's rules, and each Sentinel vote with a
// master name (no spaces) and sentinel addresses, none bad, none given
// twice in the vote or also as a master or a cluster's node. Two Sentinel
// votes may share sentinels (one sentinel set may watch many masters),
// but not with the same master name: that is one master twice. A bad
// Sentinel vote is a *SentinelError.
func AllVotes(addrs []string, clusters [][]string, sentinels []Sentinel) error {
	if (len(clusters) == 0 && len(sentinels) == 0) || len(addrs) > 0 {
		if err := Masters(addrs); err != nil {
			return err
		}
	}
	seen := make(map[string]string)
	for i, a := range addrs {
		seen[a] = fmt.Sprintf("Addrs[%d]", i)
	}
	for c, seeds := range clusters {
		if len(seeds) == 0 {
			return &ClusterAddrError{Cluster: c, Seed: -1}
		}
		for s, a := range seeds {
			if why := addrProblem(a); why != "" {
				return &ClusterAddrError{Cluster: c, Seed: s, Addr: a, Reason: why}
			}
			if where, dup := seen[a]; dup {
				return &ClusterAddrError{Cluster: c, Seed: s, Addr: a, Dup: where, Reason: "given twice"}
			}
			seen[a] = fmt.Sprintf("Clusters[%d][%d]", c, s)
		}
	}
	for v, st := range sentinels {
		switch {
		case st.Master == "" || strings.ContainsAny(st.Master, " \t\r\n"):
			return &SentinelError{Vote: v, Sentinel: -1, Reason: fmt.Sprintf("master name %q: want a name without spaces", st.Master)}
		case len(st.Addrs) == 0:
			return &SentinelError{Vote: v, Sentinel: -1, Reason: "no sentinel addresses: give one or more of the sentinels that monitor " + strconv.Quote(st.Master)}
		}
		for i, a := range st.Addrs {
			if why := addrProblem(a); why != "" {
				return &SentinelError{Vote: v, Sentinel: i, Addr: a, Reason: why}
			}
			if where, dup := seen[a]; dup {
				return &SentinelError{Vote: v, Sentinel: i, Addr: a, Reason: "also given as " + where + ": a sentinel is not a master"}
			}
			if j := slices.Index(st.Addrs[:i], a); j >= 0 {
				return &SentinelError{Vote: v, Sentinel: i, Addr: a, Reason: fmt.Sprintf("given twice (Addrs[%d])", j)}
			}
		}
		for w, o := range sentinels[:v] {
			if o.Master == st.Master && slices.ContainsFunc(o.Addrs, func(a string) bool { return slices.Contains(st.Addrs, a) }) {
				return &SentinelError{Vote: v, Sentinel: -1, Reason: fmt.Sprintf("master %q through the same sentinels as Sentinels[%d]: one master cannot vote twice", st.Master, w)}
			}
		}
	}
	return nil
}
