package multiplex_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/quarantine"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/multiplex"
)

var incrScript = multiplex.NewScript(`return redis.call("INCR", KEYS[1])`)

func classifyInt(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
	n, err := res.AsInt64()
	if err != nil {
		return multiplex.Failed, 0, err
	}
	if n > 0 {
		return multiplex.OK, n, nil
	}
	return multiplex.Refused, n, nil
}

// patientTimeout is the node and dial timeout of tests in which no master
// may time out: far past a round trip or a connect to a running master,
// however loaded the machine (under load, the engine's tests saw rounds
// outlast the default 100 ms and cluster dials the default 2 s). A
// healthy round takes no longer for it; only a test that times masters
// out on purpose needs a short one.
const patientTimeout = 30 * time.Second

func dial(t *testing.T, c *redistest.Cluster, timeout time.Duration) *multiplex.Pool {
	t.Helper()
	p, err := multiplex.Dial(context.Background(), multiplex.Options{Quarantine: quarantine.Off,
		Addrs: c.Addrs(), NodeTimeout: timeout, Scripts: []*multiplex.Script{incrScript},
	})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestScriptSHAMatchesServer(t *testing.T) {
	c := redistest.StartT(t, 1)
	sha, err := redistest.Do(c.Nodes[0].Addr(), 10*time.Second, "SCRIPT", "LOAD", incrScript.Body)
	if err != nil {
		t.Fatal(err)
	}
	// The reply is a bulk string: "$40" then the SHA on the next line, so
	// only its length is on the first line.
	if sha != "$40" {
		t.Fatalf("SCRIPT LOAD reply %q", sha)
	}
	p := dial(t, c, patientTimeout)
	cmd := multiplex.Command{Script: incrScript, Key: "k"}
	if n, err := p.Do(context.Background(), 0, cmd).AsInt64(); err != nil || n != 1 {
		t.Fatalf("EVALSHA by our SHA: %d, %v", n, err)
	}
}

func TestNoScriptReloads(t *testing.T) {
	c := redistest.StartT(t, 3)
	p := dial(t, c, patientTimeout)
	for _, a := range c.Addrs() {
		if _, err := redistest.Do(a, 10*time.Second, "SCRIPT", "FLUSH"); err != nil {
			t.Fatal(err)
		}
	}
	cmd := multiplex.Command{Script: incrScript, Key: "noscript"}
	tally := p.Fanout(context.Background(), cmd, classifyInt, nil, nil)
	if tally.OK < tally.Quorum {
		t.Fatalf("after SCRIPT FLUSH: %+v", tally)
	}
	for i, v := range tally.Votes {
		if v.Outcome == multiplex.OK && v.Value != 1 {
			t.Fatalf("node %d value %d", i, v.Value)
		}
	}
}

type lateCounter struct{ n atomic.Int32 }

func (l *lateCounter) Late(int, multiplex.Vote) { l.n.Add(1) }

func TestFanoutEarlyReturnAndLateReplies(t *testing.T) {
	c := redistest.StartT(t, 5)
	// Far above a round trip to a running master, however loaded the
	// machine: waiting for the paused ones would take all of it.
	const timeout = 30 * time.Second
	p := dial(t, c, timeout)
	c.Nodes[0].Pause()
	c.Nodes[1].Pause()
	defer c.Nodes[0].Resume()
	defer c.Nodes[1].Resume()

	late := &lateCounter{}
	start := time.Now()
	cmd := multiplex.Command{Script: incrScript, Key: "early"}
	tally := p.Fanout(context.Background(), cmd, classifyInt, late, nil)
	if !tally.Reached() || tally.Pending != 2 {
		t.Fatalf("want quorum with 2 pending, got %+v", tally)
	}
	if took := time.Since(start); took > timeout/2 {
		t.Fatalf("waited %s for paused nodes", took)
	}
	c.Nodes[0].Resume()
	c.Nodes[1].Resume()
	deadline := time.Now().Add(30 * time.Second)
	for late.n.Load() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("late replies seen: %d, want 2", late.n.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestFanoutStopsWhenQuorumImpossible(t *testing.T) {
	c := redistest.StartT(t, 3)
	// Far above a round trip to a running master, however loaded the
	// machine: waiting for the paused ones would take all of it.
	const timeout = 30 * time.Second
	p := dial(t, c, timeout)
	c.Nodes[0].Kill()
	c.Nodes[1].Pause()
	defer c.Nodes[1].Resume()
	// Node 2 refuses (INCR of a key decremented to -1 gives 0).
	if _, err := redistest.Do(c.Nodes[2].Addr(), 10*time.Second, "SET", "imp", "-1"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cmd := multiplex.Command{Script: incrScript, Key: "imp"}
	tally := p.Fanout(context.Background(), cmd, classifyInt, nil, nil)
	if tally.Reached() || tally.Failed != 1 || tally.Refused != 1 || tally.Pending != 1 {
		t.Fatalf("want 1 failed, 1 refused, 1 pending: %+v", tally)
	}
	if took := time.Since(start); took > timeout/2 {
		t.Fatalf("waited %s although quorum was impossible", took)
	}
}

func TestFanoutTimeoutAndContext(t *testing.T) {
	t.Parallel() // it mostly waits: for timeouts, or for servers to age
	c := redistest.StartT(t, 3)
	// The running master must answer within it, however loaded the
	// machine; the paused ones time out.
	p := dial(t, c, time.Second)
	c.Nodes[0].Pause()
	c.Nodes[1].Pause()
	defer c.Nodes[0].Resume()
	defer c.Nodes[1].Resume()
	cmd := multiplex.Command{Script: incrScript, Key: "to"}
	tally := p.Fanout(context.Background(), cmd, classifyInt, nil, nil)
	if tally.Timeout != 2 || !errors.Is(tally.Votes[0].Err, multiplex.ErrTimeout) {
		t.Fatalf("want 2 timeouts: %+v", tally)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cmd = multiplex.Command{Script: incrScript, Key: "to"}
	if tally := p.Fanout(ctx, cmd, classifyInt, nil, nil); !errors.Is(tally.Err, context.Canceled) {
		t.Fatalf("cancelled ctx: %+v", tally)
	}
}

// A timed-out round leaves its slot to the next one, possibly with a stale
// wake-up from the watchdog in it; no round may end before its own timeout
// because of that, nor report a paused node as anything but timed out.
func TestTimeoutsInAReusedSlot(t *testing.T) {
	t.Parallel() // it mostly waits: for timeouts, or for servers to age
	c := redistest.StartT(t, 3)
	// The running master must answer within it, every round, however
	// loaded the machine.
	const timeout = 250 * time.Millisecond
	p, err := multiplex.Dial(context.Background(), multiplex.Tuned(multiplex.Options{Quarantine: quarantine.Off,
		Addrs: c.Addrs(), NodeTimeout: timeout, Scripts: []*multiplex.Script{incrScript},
	}, 0, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c.Nodes[0].Pause()
	c.Nodes[1].Pause()
	defer c.Nodes[0].Resume()
	defer c.Nodes[1].Resume()
	for i := 0; i < 10; i++ {
		start := time.Now()
		tally := p.Fanout(context.Background(), multiplex.Command{Script: incrScript, Key: "slot"}, classifyInt, nil, nil)
		if took := time.Since(start); took < timeout {
			t.Fatalf("round %d decided after %v, before its %v timeout: %+v", i, took, timeout, tally)
		}
		if tally.Timeout != 2 || tally.OK != 1 || tally.Pending != 0 {
			t.Fatalf("round %d: want 2 timeouts and 1 ok, got %+v", i, tally)
		}
	}
}

func TestDialMajorityUnreachableNamesAddresses(t *testing.T) {
	c := redistest.StartT(t, 3)
	c.Nodes[1].Kill()
	c.Nodes[2].Kill()
	_, err := multiplex.Dial(context.Background(), multiplex.Options{Quarantine: quarantine.Off, Addrs: c.Addrs(), DialTimeout: time.Second})
	if !errors.Is(err, multiplex.ErrUnreachable) {
		t.Fatalf("want ErrUnreachable, got %v", err)
	}
	for _, n := range c.Nodes[1:] {
		if !strings.Contains(err.Error(), n.Addr()) || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("error should name %s and why: %v", n.Addr(), err)
		}
	}
}

func TestNodeDownAtStartIsReconnected(t *testing.T) {
	c := redistest.StartT(t, 3)
	c.Nodes[2].Kill()
	p, err := multiplex.Dial(context.Background(), multiplex.Tuned(multiplex.Options{Quarantine: quarantine.Off,
		Addrs: c.Addrs(), NodeTimeout: patientTimeout, Scripts: []*multiplex.Script{incrScript},
	}, 20*time.Millisecond, 0, 0))
	if err != nil {
		t.Fatalf("Dial with a minority down: %v", err)
	}
	defer p.Close()
	if p.Nodes()[2].Err() == nil {
		t.Fatal("node 2 should report why it is down")
	}
	if err := c.Nodes[2].Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for p.Nodes()[2].Client() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("node 2 not reconnected: %v", p.Nodes()[2].Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd := multiplex.Command{Script: incrScript, Key: "re"}
	if tally := p.Fanout(context.Background(), cmd, classifyInt, nil, nil); tally.OK+tally.Pending != 3 {
		t.Fatalf("after reconnect: %+v", tally)
	}
}

func TestBadOptions(t *testing.T) {
	for _, tc := range []struct {
		addrs []string
		want  string
	}{
		{nil, "no master addresses"},
		{[]string{"nohost"}, `"nohost": want host:port`},
		{[]string{"127.0.0.1:0"}, "port must be 1-65535"},
		{[]string{"127.0.0.1:7", "127.0.0.1:7"}, "given twice"},
	} {
		_, err := multiplex.Dial(context.Background(), multiplex.Options{Quarantine: quarantine.Off, Addrs: tc.addrs})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.addrs, err, tc.want)
		}
	}
}

func TestPasswordProtectedMastersAndRestartCheck(t *testing.T) {
	c := redistest.StartT(t, 3, redistest.Options{Args: []string{"--requirepass", "s3cret"}})
	p, err := multiplex.Dial(context.Background(), multiplex.Options{
		Addrs: c.Addrs(), Quarantine: quarantine.Observed, MaxTTL: 10 * time.Second, NodeTimeout: patientTimeout,
		Scripts: []*multiplex.Script{incrScript},
		Tune:    func(o *rueidis.ClientOption) { o.Password = "s3cret" },
	})
	if err != nil {
		t.Fatalf("Dial with a password: %v", err)
	}
	defer p.Close()
	cmd := multiplex.Command{Script: incrScript, Key: "auth"}
	if tally := p.Fanout(context.Background(), cmd, classifyInt, nil, nil); !tally.Reached() {
		t.Fatalf("with a password: %+v", tally)
	}
	if err := c.Nodes[0].Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for p.Status()[0].State != multiplex.StateQuarantined {
		if time.Now().After(deadline) {
			t.Fatalf("restart behind a password not detected: %+v", p.Status()[0])
		}
		p.Fanout(context.Background(), cmd, classifyInt, nil, nil)
		time.Sleep(20 * time.Millisecond)
	}
}
