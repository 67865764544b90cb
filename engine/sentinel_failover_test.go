package engine_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/mutation"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// A Sentinel failover promotes a replica that may lack the locks the old
// master granted (replication is asynchronous): seed problem 1 of
// Redlock. The votes are two shared masters and a Sentinel vote. A holds
// a resource on master 0 and the Sentinel vote only (its key is gone from
// master 1, as if its SET there had failed); the sentinels fail over to
// a replica that lacks the key (deleted on it after the promotion: the
// writes it had not received). B, whose Locker saw the old master, then
// asks: master 1 and the promoted master would say yes, a quorum. The
// promoted master's new run_id must keep the vote out for MaxTTL, so B
// is refused, and an Observer sees the vote quarantined; with the
// quarantine off (the control), B gets a second lease while A's is
// valid.
func TestSentinelFailoverKeepsThePromotedReplicaOut(t *testing.T) {
	for _, policy := range []engine.QuarantinePolicy{engine.QuarantineObserved, engine.QuarantineOff} {
		t.Run(policy.String(), func(t *testing.T) {
			double := sentinelDoubleGrant(t, policy)
			switch {
			case policy != engine.QuarantineOff && double:
				t.Fatal("B acquired while A held the lease: the promoted master's yes counted")
			case policy == engine.QuarantineOff && !double:
				t.Fatal("with the quarantine off, B was refused: the test cannot catch it")
			}
		})
	}
}

func sentinelDoubleGrant(t *testing.T, policy engine.QuarantinePolicy) bool {
	g := redistest.StartSentinelsT(t, redistest.SentinelOptions{})
	e := newEnv(t, 2)
	ctx := context.Background()
	quarantined := make(chan engine.NodeStateEvent, 1)
	mk := func(observe bool) *engine.Locker {
		return e.locker(func(c *engine.Config) {
			c.Sentinels = []engine.SentinelVote{{Master: g.Master, Addrs: g.SentinelAddrs()}}
			// A's lease outlives anything the test waits for.
			c.TTL, c.Quarantine = time.Minute, policy
			patient(c)
			if observe {
				c.Observer = &engine.Observer{NodeState: func(ev engine.NodeStateEvent) {
					if ev.Node == 2 && ev.State == engine.StateQuarantined {
						select {
						case quarantined <- ev:
						default:
						}
					}
				}}
			}
		})
	}
	a, b := mk(false), mk(true)
	const res = "sentinel-fo"
	held, err := a.TryLock(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	key := e.key(res)
	// TryLock returns at quorum: master 1's SET may still be on its way.
	eventually(t, 30*time.Second, "A's key on master 1", func() bool { return e.get(1, key) == held.Value() })
	e.del(1, key)
	old := g.Data[0].Addr()
	if st := b.Nodes()[2]; st.Master != old || st.State != engine.StateUp {
		t.Fatalf("B's Sentinel vote before the failover: %+v, want up on %s", st, old)
	}
	fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	promoted, err := g.Failover(fctx)
	if err != nil {
		t.Fatal(err)
	}
	directDo(t, promoted, func(b rueidis.Builder) rueidis.Completed { return b.Del().Key(key).Build() })
	// The event: B's client follows the sentinels to the promoted master.
	eventually(t, time.Minute, "B's Sentinel vote on the promoted master", func() bool { return b.Nodes()[2].Master == promoted })
	// The vote names the promoted master once its connection there is
	// accepted, and the client swaps that connection in a moment later:
	// until then B's commands still reach the old master, a master until
	// the sentinels demote it, and A's key there refuses B, whatever the
	// quarantine (which only keeps a yes from counting).
	awaitSentinelVoteOn(t, e, b, promoted)
	second, err := b.TryLock(ctx, res)
	if err == nil {
		t.Logf("B acquired %q while A's lease (validity %s) is valid", res, held.Validity())
		second.Release(ctx)
		return held.Validity() > 0
	}
	if !errors.Is(err, engine.ErrNotAcquired) && !errors.Is(err, engine.ErrNoQuorum) {
		t.Fatalf("B's TryLock: %v", err)
	}
	t.Logf("B refused: %v", err)
	if policy != engine.QuarantineOff {
		if !errors.Is(err, engine.ErrQuarantined) {
			t.Errorf("B's refusal does not name the quarantine: %v", err)
		}
		if st := b.Nodes()[2]; st.State != engine.StateQuarantined || st.Restarts != 1 {
			t.Errorf("B's Sentinel vote: %+v, want quarantined after 1 run_id change", st)
		}
		select {
		case ev := <-quarantined:
			if ev.QuarantinedUntil.IsZero() {
				t.Errorf("NodeState event without QuarantinedUntil: %+v", ev)
			}
		case <-time.After(time.Minute): // the watcher polls every NodeWatchInterval
			t.Error("no NodeState event for the quarantined Sentinel vote")
		}
	}
	return false
}

// awaitSentinelVoteOn waits until l's commands on its Sentinel vote
// (vote 2 of e's two masters and the vote) reach the master at addr: a
// lock l takes on a fresh resource is set there. Each probe is
// answered by every vote (its SET there has run, or failed) before the
// key is looked for. A quarantined vote's SET runs too: the quarantine
// keeps its yes from counting.
func awaitSentinelVoteOn(t *testing.T, e *env, l *engine.Locker, addr string) {
	t.Helper()
	ctx := context.Background()
	c, err := directClient(addr)
	if err != nil {
		t.Fatalf("direct client %s: %v", addr, err)
	}
	defer c.Close()
	probes := 0
	eventually(t, time.Minute, "B's commands on the Sentinel vote reaching "+addr, func() bool {
		// A name of its own each time: the last probe's release may
		// still be on its way.
		probes++
		probe := fmt.Sprintf("sentinel-probe-%d", probes)
		le, err := l.TryLock(ctx, probe)
		if err != nil {
			t.Fatalf("probe on the masters, free: %v", err)
		}
		defer le.Release(ctx)
		awaitAnswered(t, le)
		v, err := c.Do(ctx, c.B().Get().Key(e.key(probe)).Build()).ToString()
		return err == nil && v == le.Value()
	})
}

// The same hazard, seen by a process that starts after the failover: B's
// Locker, with the default QuarantineAlways, first sees the promoted
// replica, which has been up for long (a replica usually has: here its
// uptime is read as a day, through oldMasters), so no run_id change and
// no youth tells it that the server lacks the keys the old master
// granted within MaxTTL. The sentinels know when they promoted it: B
// must keep the vote out until MaxTTL after that, so master 1 and the
// promoted master cannot give B a quorum while A's lease is valid. With
// sentinel-promotion-unchecked on (the control), B gets a second lease.
func TestSentinelFailoverSeenFirstByANewProcess(t *testing.T) {
	mutation.Require(t)
	for _, unchecked := range []bool{false, true} {
		name := map[bool]string{false: "quarantined", true: "control"}[unchecked]
		t.Run(name, func(t *testing.T) {
			defer mutation.SentinelPromotionUnchecked.Set(unchecked)()
			double := sentinelNewProcessDoubleGrant(t)
			switch {
			case !unchecked && double:
				t.Fatal("B acquired while A held the lease: the promoted master's yes counted")
			case unchecked && !double:
				t.Fatal("with sentinel-promotion-unchecked on, B was refused: the test cannot catch it")
			}
		})
	}
}

func sentinelNewProcessDoubleGrant(t *testing.T) bool {
	g := redistest.StartSentinelsT(t, redistest.SentinelOptions{})
	e := newEnv(t, 2)
	ctx := context.Background()
	mk := func(policy engine.QuarantinePolicy) *engine.Locker {
		return e.locker(func(c *engine.Config) {
			c.Sentinels = []engine.SentinelVote{{Master: g.Master, Addrs: g.SentinelAddrs()}}
			c.TTL, c.Quarantine = time.Minute, policy
			patient(c)
			oldMasters(c)
		})
	}
	// A's Locker trusts the masters at once (they hold no locks yet, and
	// the sentinels never failed this one over).
	a := mk(engine.QuarantineObserved)
	const res = "sentinel-fo-new"
	held, err := a.TryLock(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	key := e.key(res)
	eventually(t, 30*time.Second, "A's key on master 1", func() bool { return e.get(1, key) == held.Value() })
	e.del(1, key)
	fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	promoted, err := g.Failover(fctx)
	if err != nil {
		t.Fatal(err)
	}
	directDo(t, promoted, func(b rueidis.Builder) rueidis.Completed { return b.Del().Key(key).Build() })
	b := mk(engine.QuarantineAlways)
	if st := b.Nodes()[2]; st.Master != promoted {
		t.Fatalf("B's Sentinel vote: %+v, want it on the promoted master %s", st, promoted)
	}
	second, err := b.TryLock(ctx, res)
	if err == nil {
		t.Logf("B acquired %q while A's lease (validity %s) is valid", res, held.Validity())
		second.Release(ctx)
		if held.Validity() <= 0 {
			t.Fatalf("A's lease of a minute ran out during the test")
		}
		return true
	}
	var qe *engine.QuarantineError
	if !errors.As(err, &qe) || !qe.Promoted || qe.PromotionUnknown || qe.PromotedAgo >= time.Minute {
		t.Fatalf("B's TryLock: %v, want it refused for the Sentinel vote promoted less than MaxTTL ago", err)
	}
	t.Logf("B refused: %v", err)
	if !strings.Contains(err.Error(), "its sentinels saw it become master") {
		t.Errorf("B's refusal does not say why: %v", err)
	}
	if st := b.Nodes()[2]; st.State != engine.StateQuarantined || st.Restarts != 0 {
		t.Errorf("B's Sentinel vote: %+v, want quarantined with no run_id change seen", st)
	}
	return false
}

// oldMasters makes every master reached through c read as up for a day:
// the first reply on each new connection to a master (the restart check's
// INFO server) has its uptime_in_seconds rewritten, as a server up that
// long reports it. The connections to the sentinels, whose first reply
// is no bulk string, pass untouched.
func oldMasters(c *engine.Config) {
	var d net.Dialer
	c.Conn.DialContext = func(ctx context.Context, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return &uptimeConn{Conn: conn, r: bufio.NewReader(conn)}, nil
	}
}

// uptimeConn rewrites uptime_in_seconds in its first reply when that is a
// bulk string (see oldMasters).
type uptimeConn struct {
	net.Conn
	r       *bufio.Reader
	first   bool
	pending []byte
}

var uptimeField = regexp.MustCompile(`uptime_in_seconds:\d+`)

func (c *uptimeConn) Read(p []byte) (int, error) {
	if !c.first {
		c.first = true
		if b, err := c.r.Peek(1); err == nil && b[0] == '$' {
			line, err := c.r.ReadString('\n')
			size, aerr := strconv.Atoi(strings.TrimSpace(line[1:]))
			if err != nil || aerr != nil {
				c.pending = []byte(line)
			} else {
				body := make([]byte, size+2)
				if _, err := io.ReadFull(c.r, body); err != nil {
					return 0, err
				}
				txt := uptimeField.ReplaceAllString(string(body[:size]), "uptime_in_seconds:86400")
				c.pending = []byte("$" + strconv.Itoa(len(txt)) + "\r\n" + txt + "\r\n")
			}
		}
	}
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.r.Read(p)
}

// A failback that this process never saw the middle of: its Locker (B)
// cannot reach the replica the sentinels promote (a partition between
// B and that server), so its Sentinel vote stays on the old master,
// refused while that is a replica. H, another process, takes a lock
// through the promoted replica meanwhile. The sentinels then fail back:
// the old master, which resynced from the promoted one, is master again,
// under the run_id B last saw, and lacks H's key (a write it had not
// received). The sentinels kill a server's client connections when they
// change its role, so B reconnects to the old master, and the sentinels
// say it became master again moments ago: B must keep the vote out until
// MaxTTL after that, or master 1 and the old master give B a quorum
// while H holds the lock. With sentinel-promotion-unchecked on (the
// control), B sees the run_id it knew and gets a second lease.
func TestSentinelFailbackUnseenKeepsTheVoteOut(t *testing.T) {
	mutation.Require(t)
	for _, unchecked := range []bool{false, true} {
		name := map[bool]string{false: "quarantined", true: "control"}[unchecked]
		t.Run(name, func(t *testing.T) {
			defer mutation.SentinelPromotionUnchecked.Set(unchecked)()
			double := sentinelFailbackDoubleGrant(t)
			switch {
			case !unchecked && double:
				t.Fatal("B acquired while H held the lease: the old master, back after a failback B never saw, voted at once")
			case unchecked && !double:
				t.Fatal("with sentinel-promotion-unchecked on, B was refused: the test cannot catch it")
			}
		})
	}
}

func sentinelFailbackDoubleGrant(t *testing.T) bool {
	g := redistest.StartSentinelsT(t, redistest.SentinelOptions{})
	e := newEnv(t, 2)
	ctx := context.Background()
	first, replica := g.Data[0].Addr(), g.Data[1].Addr()
	mk := func(unreachable string) *engine.Locker {
		return e.locker(func(c *engine.Config) {
			c.Sentinels = []engine.SentinelVote{{Master: g.Master, Addrs: g.SentinelAddrs()}}
			c.TTL = time.Minute
			patient(c)
			var d net.Dialer
			c.Conn.DialContext = func(ctx context.Context, addr string) (net.Conn, error) {
				if addr == unreachable {
					return nil, errors.New("partitioned from " + addr)
				}
				return d.DialContext(ctx, "tcp", addr)
			}
		})
	}
	b := mk(replica)
	if st := b.Nodes()[2]; st.Master != first || st.State != engine.StateUp {
		t.Fatalf("B's Sentinel vote: %+v, want up on %s", st, first)
	}
	fctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	if promoted, err := g.Failover(fctx); err != nil || promoted != replica {
		t.Fatalf("failover: %s, %v; want %s", promoted, err, replica)
	}
	h := mk("")
	const res = "sentinel-failback"
	held, err := h.TryLock(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	key := e.key(res)
	eventually(t, 30*time.Second, "H's key on master 1", func() bool { return e.get(1, key) == held.Value() })
	e.del(1, key)
	if back, err := g.Failover(fctx); err != nil || back != first {
		t.Fatalf("failback: %s, %v; want %s", back, err, first)
	}
	directDo(t, first, func(b rueidis.Builder) rueidis.Completed { return b.Del().Key(key).Build() })
	// B's client reconnects to the old master once it is master again.
	// B's client reaches the old master again once it is master: until
	// then its vote fails on the connection (the sentinels' events and
	// B's dials take their time). Each attempt is the test itself: a
	// grant is the double grant, a refusal naming the quarantine the fix.
	eventually(t, 2*time.Minute, "B's vote answered by the old master, master again", func() bool {
		var second *engine.Lease
		second, err = b.TryLock(ctx, res)
		if err == nil {
			second.Release(ctx)
			return true
		}
		var ve *engine.VotesError
		return errors.As(err, &ve) && (ve.Votes[2].Outcome == engine.OutcomeRefused || errors.Is(ve.Votes[2].Err, engine.ErrQuarantined))
	})
	if err == nil {
		t.Logf("B acquired %q while H's lease (validity %s) is valid (status %+v)", res, held.Validity(), b.Nodes()[2])
		if held.Validity() <= 0 {
			t.Fatalf("H's lease of a minute ran out during the test")
		}
		return true
	}
	var qe *engine.QuarantineError
	if !errors.As(err, &qe) || !qe.Promoted || qe.PromotedAgo >= time.Minute {
		t.Fatalf("B's TryLock: %v, want it refused for the Sentinel vote promoted less than MaxTTL ago", err)
	}
	t.Logf("B refused: %v", qe)
	return false
}
