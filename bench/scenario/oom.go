package scenario

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// oom-node: a master that answers every write with an error (here OOM:
// CONFIG SET maxmemory 1 with noeviction) is a failing master, not a
// refusing one. One such master among five costs a vote and nothing else;
// a majority of them is an outage, reported as ErrNoQuorum with each
// master's OOM error attached, never as ErrNotAcquired, which would send
// callers waiting for a holder that does not exist.

const oomMasters = 5

func oomAttempts(short bool) int {
	if short {
		return 50
	}
	return 300
}

// oomMinSuccess is the share of acquires that must succeed when a quorum
// of masters works: not all, since on a loaded host two of the four good
// masters may now and then miss the node timeout together.
const oomMinSuccess = 0.99

// oomStage is a phase of the script: the masters answering OOM in it.
type oomStage struct {
	name string
	oom  []int
}

func oomStages() []oomStage {
	return []oomStage{
		{"one-oom", []int{0}},
		{"majority-oom", []int{0, 1, 2}},
		{"recovered", nil},
	}
}

func expectOOMNode(o Options) string {
	return fmt.Sprintf("%d uncontended TryLock+Release per phase. With master 0 answering OOM, acquires succeed on the "+
		"other 4 (at least %.0f%%, none refused), and master 0's answers count as node errors, never as ok or refused. With "+
		"masters 0-2 answering OOM, every attempt fails with ErrNoQuorum carrying the OOM replies, and none with "+
		"ErrNotAcquired: an erroring master is failing, not contended. With maxmemory lifted, acquires succeed again "+
		"(at least %.0f%%).", oomAttempts(o.Short), oomMinSuccess*100, oomMinSuccess*100)
}

// oomPhase is one phase of oom-node.
type oomPhase struct {
	Phase       string `json:"phase"`
	OOMNodes    []int  `json:"oom_nodes"`
	Attempts    int    `json:"attempts"`
	Acquired    int    `json:"acquired"`
	NotAcquired int    `json:"not_acquired"`
	NoQuorum    int    `json:"no_quorum"`
	Other       int    `json:"other_errors"`
	// NamedOOM counts failed attempts whose error carries a master's OOM
	// reply.
	NamedOOM int `json:"errors_naming_oom"`
	// NodeOK, NodeRefused and NodeFailed are each master's votes in the
	// phase (acquires and releases), as the locker's Nodes() counted them;
	// NodeFailed includes timeouts.
	NodeOK      []int64 `json:"node_ok"`
	NodeRefused []int64 `json:"node_refused"`
	NodeFailed  []int64 `json:"node_failed"`
	Example     string  `json:"example_error,omitempty"`
}

// oomObs is what oom-node observed; it is also its figures.
type oomObs struct {
	Phases []oomPhase `json:"phases"`
}

func runOOMNode(ctx context.Context, e *env) (outcome, error) {
	var obs oomObs
	fail := func(err error) (outcome, error) { return outcome{figures: obs}, err }
	cluster, err := e.masters(ctx, oomMasters)
	if err != nil {
		return fail(err)
	}
	defer cluster.Stop()
	addrs := cluster.Addrs()
	l, err := e.locker(ctx, addrs, nil)
	if err != nil {
		return fail(err)
	}
	defer l.Close()
	n := oomAttempts(e.o.Short)

	for _, ph := range oomStages() {
		for i, a := range addrs {
			mem := "0"
			for _, j := range ph.oom {
				if j == i {
					mem = "1" // below what any server uses: every write is refused
				}
			}
			if err := direct(a, "CONFIG", "SET", "maxmemory-policy", "noeviction"); err != nil {
				return fail(err)
			}
			if err := direct(a, "CONFIG", "SET", "maxmemory", mem); err != nil {
				return fail(err)
			}
		}
		e.step("phase %s: masters %v answer writes with OOM", ph.name, ph.oom)
		p := oomPhase{Phase: ph.name, OOMNodes: append([]int{}, ph.oom...)}
		before := l.Nodes()
		for k := range n {
			le, err := l.TryLock(ctx, "scenario:oom-node:"+ph.name+":"+strconv.Itoa(k))
			if err != nil && ctx.Err() != nil {
				return fail(ctx.Err())
			}
			p.Attempts++
			switch classify(err) {
			case kindAcquired:
				p.Acquired++
				le.Release(ctx)
				continue
			case kindNotAcquired:
				p.NotAcquired++
			case kindNoQuorum:
				p.NoQuorum++
			default:
				p.Other++
			}
			if namesOOM(err) {
				p.NamedOOM++
			}
			if p.Example == "" {
				p.Example = err.Error()
			}
		}
		// Replies that came after a decision are counted when they arrive;
		// give the last ones a moment.
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return fail(err)
		}
		for i, s := range l.Nodes() {
			b := before[i]
			p.NodeOK = append(p.NodeOK, s.OK-b.OK)
			p.NodeRefused = append(p.NodeRefused, s.Refused-b.Refused)
			p.NodeFailed = append(p.NodeFailed, s.Failed+s.TimedOut-b.Failed-b.TimedOut)
		}
		e.step("phase %s: %d acquired, %d ErrNotAcquired, %d ErrNoQuorum (%d naming OOM), %d other; failed votes per master %v",
			ph.name, p.Acquired, p.NotAcquired, p.NoQuorum, p.NamedOOM, p.Other, p.NodeFailed)
		obs.Phases = append(obs.Phases, p)
	}
	passed, why := judgeOOMNode(obs)
	return outcome{figures: obs, passed: passed, observed: why}, nil
}

// namesOOM reports whether err carries a master's OOM error reply.
func namesOOM(err error) bool {
	var ve *engine.VotesError
	if !errors.As(err, &ve) {
		return false
	}
	for _, v := range ve.Votes {
		if v.Err != nil && strings.HasPrefix(v.Err.Error(), "OOM") {
			return true
		}
	}
	return false
}

// judgeOOMNode decides oom-node.
func judgeOOMNode(obs oomObs) (bool, string) {
	get := func(name string) (oomPhase, bool) {
		for _, p := range obs.Phases {
			if p.Phase == name {
				return p, true
			}
		}
		return oomPhase{}, false
	}
	one, ok1 := get("one-oom")
	maj, ok2 := get("majority-oom")
	rec, ok3 := get("recovered")
	switch {
	case !ok1 || !ok2 || !ok3 || one.Attempts == 0 || maj.Attempts == 0 || rec.Attempts == 0:
		return false, "set-up failed: a phase is missing or made no attempt"
	case one.NotAcquired > 0 || float64(one.Acquired) < oomMinSuccess*float64(one.Attempts):
		return false, fmt.Sprintf("with one master answering OOM, %d of %d acquires failed (%d ErrNotAcquired, %d ErrNoQuorum): one erroring master must cost a vote, not the lock (%s)",
			one.Attempts-one.Acquired, one.Attempts, one.NotAcquired, one.NoQuorum, one.Example)
	}
	for _, i := range one.OOMNodes {
		switch {
		case i >= len(one.NodeFailed):
			return false, fmt.Sprintf("set-up failed: no vote counts for master %d", i)
		case one.NodeOK[i] > 0 || one.NodeRefused[i] > 0:
			return false, fmt.Sprintf("master %d answered OOM, yet %d of its votes counted as ok and %d as refused", i, one.NodeOK[i], one.NodeRefused[i])
		case one.NodeFailed[i] == 0:
			return false, fmt.Sprintf("master %d answered OOM, yet none of its votes counted as an error", i)
		}
	}
	switch {
	case maj.Acquired > 0:
		return false, fmt.Sprintf("%d acquire(s) succeeded with 3 of 5 masters answering OOM", maj.Acquired)
	case maj.NotAcquired > 0:
		return false, fmt.Sprintf("%d of %d attempts with 3 of 5 masters answering OOM were reported as ErrNotAcquired (contention) instead of ErrNoQuorum (%s)",
			maj.NotAcquired, maj.Attempts, maj.Example)
	case maj.NoQuorum != maj.Attempts:
		return false, fmt.Sprintf("%d of %d attempts with 3 of 5 masters answering OOM failed with another error (%s)", maj.Other, maj.Attempts, maj.Example)
	case maj.NamedOOM != maj.NoQuorum:
		return false, fmt.Sprintf("only %d of %d ErrNoQuorum errors carry the masters' OOM replies", maj.NamedOOM, maj.NoQuorum)
	case float64(rec.Acquired) < oomMinSuccess*float64(rec.Attempts):
		return false, fmt.Sprintf("after maxmemory was lifted, %d of %d acquires still failed (%s)", rec.Attempts-rec.Acquired, rec.Attempts, rec.Example)
	}
	return true, fmt.Sprintf("With master 0 answering OOM, %d of %d acquires succeeded and its %d answers counted as errors. With masters 0-2 "+
		"answering OOM, all %d attempts failed with ErrNoQuorum naming the OOM replies, none with ErrNotAcquired. After, %d of %d succeeded.",
		one.Acquired, one.Attempts, one.NodeFailed[0], maj.Attempts, rec.Acquired, rec.Attempts)
}
