package multiplex

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redlock-bench/redlock/internal/quarantine"

	"github.com/redis/rueidis"

	"github.com/redlock-bench/redlock/internal/resp"
)

// Errors about a node's identity.
var (
	// ErrQuarantined is a node's vote while its yes cannot be counted: its
	// run_id changed (or, with quarantine.Always, it was young when first
	// seen) less than MaxTTL ago.
	// *quarantine.Error says until when and why.
	ErrQuarantined = quarantine.ErrQuarantined
	// ErrNotIndependent: two addresses reach the same server (they report
	// the same run_id), or a master is a replica. Either would let one
	// process, or one replication chain, cast several votes. Dial fails
	// with it, naming the addresses; a node that connects later in that
	// state is kept out, with the error in Node.Err.
	ErrNotIndependent = errors.New("masters not independent")
	// ErrClockSkew is the vote of a node whose clock, measured on its last
	// new connection, is Options.MaxClockSkew or more from the others'.
	ErrClockSkew = errors.New("clock too far from the other masters'")
)

// dependenceError is ErrNotIndependent with the addresses at fault.
type dependenceError struct{ detail string }

func (e *dependenceError) Error() string { return ErrNotIndependent.Error() + ": " + e.detail }
func (e *dependenceError) Unwrap() error { return ErrNotIndependent }

// NodeState is a node's condition as the pool sees it.
type NodeState string

const (
	StateUp          NodeState = "up"
	StateDown        NodeState = "down"
	StateQuarantined NodeState = "quarantined"
	// StateClockSkewed: kept out of the vote by Options.MaxClockSkew.
	StateClockSkewed NodeState = "clock-skewed"
)

// NodeStatus is a snapshot of one node, for operators and the bench.
type NodeStatus struct {
	Addr  string    `json:"addr"`
	State NodeState `json:"state"`
	// QuarantinedUntil is set while the node is quarantined.
	QuarantinedUntil time.Time `json:"quarantined_until,omitzero"`
	// QuarantinedSlots, for a cluster vote, is how many of its slots are
	// out of the vote (a shard's primary restarted or failed over), until
	// QuarantinedUntil at the latest; its other slots vote. State is
	// StateQuarantined while there are any.
	QuarantinedSlots int `json:"quarantined_slots,omitempty"`
	// Master, for a Sentinel vote, is the address of the master its
	// sentinels named when it last connected; it changes with a failover.
	Master  string `json:"master,omitempty"`
	RunID   string `json:"run_id,omitempty"`
	Version string `json:"version,omitempty"`
	// Role is "master", or what INFO replication says instead.
	Role string `json:"role,omitempty"`
	// ClockOffsetMS is the master's wall clock minus this process's, in
	// milliseconds, as last read (on the node's last new connection, or
	// when another's was judged); meaningful only when ClockKnown (Redis
	// 7.0 or later). ClockErrorMS is that reading's uncertainty: the true
	// offset was within it of ClockOffsetMS (half the reading's round
	// trip; for a cluster vote, its nodes' median's).
	ClockOffsetMS float64 `json:"clock_offset_ms"`
	ClockErrorMS  float64 `json:"clock_error_ms"`
	ClockKnown    bool    `json:"clock_known"`
	// Restarts counts run_id changes this pool observed.
	Restarts int64  `json:"restarts"`
	Err      string `json:"error,omitempty"`
	OK       int64  `json:"ok"`
	Refused  int64  `json:"refused"`
	Failed   int64  `json:"failed"`
	TimedOut int64  `json:"timed_out"`
}

// Status returns every node's state, in node order.
func (p *Pool) Status() []NodeStatus {
	out := make([]NodeStatus, len(p.nodes))
	now := time.Now()
	for i, n := range p.nodes {
		info := n.Info()
		s := NodeStatus{Addr: n.Addr, State: StateUp, RunID: info.RunID, Version: info.Version, Role: info.Role,
			ClockKnown: info.ClockKnown, Restarts: n.restarts.Load()}
		if n.sentinels != nil {
			n.mu.Lock()
			s.Master = n.masterAddr
			n.mu.Unlock()
		}
		if info.ClockKnown {
			s.ClockOffsetMS = float64(info.ClockOffset) / float64(time.Millisecond)
			s.ClockErrorMS = float64(info.ClockError) / float64(time.Millisecond)
		}
		s.OK, s.Refused, s.Failed, s.TimedOut = n.Counts()
		if err := n.Err(); err != nil {
			s.Err = err.Error()
		}
		until := p.quarantinedUntil(n)
		if n.seeds != nil {
			var slotsUntil time.Time
			s.QuarantinedSlots, slotsUntil = p.slotsQuarantined(n)
			if !until.After(now) {
				until = slotsUntil
			}
		}
		switch {
		case n.Client() == nil || n.down.Load():
			s.State = StateDown
		case until.After(now):
			s.State, s.QuarantinedUntil = StateQuarantined, until
		case n.skew.Load() != nil:
			s.State, s.Err = StateClockSkewed, (*n.skew.Load()).Error()
		}
		out[i] = s
	}
	return out
}

func (p *Pool) quarantinedUntil(n *node) time.Time {
	q := n.quarantine.Load()
	if q == 0 {
		return time.Time{}
	}
	return p.epoch.Add(time.Duration(q))
}

// countable reports whether a yes from n to a command on key may count
// toward a quorum now: nil, or n's *quarantine.Error (for a cluster vote,
// that of key's slot, or of the whole vote).
func (p *Pool) countable(n *node, key string) error {
	if e := n.skew.Load(); e != nil {
		return *e
	}
	if p.policy == quarantine.Off {
		return nil
	}
	if q := n.quarantine.Load(); q != 0 && int64(time.Since(p.epoch)) < q {
		if e := n.qerr.Load(); e != nil {
			return e
		}
		return ErrQuarantined
	}
	if n.seeds != nil {
		if e := p.slotQuarantined(n, key); e != nil {
			return e
		}
	}
	return nil
}

// quarantineFor keeps n out of the vote for d from now; e says why, and
// is what n's votes fail with meanwhile.
func (p *Pool) quarantineFor(n *node, d time.Duration, e quarantine.Error) {
	if d <= 0 || p.policy == quarantine.Off {
		return
	}
	until := int64(time.Since(p.epoch) + d)
	e.Until, e.MaxTTL = p.epoch.Add(time.Duration(until)), p.maxTTL
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.quarantine.Load() < until {
		// The error first: a vote that sees the new deadline finds an
		// error at least as late.
		n.qerr.Store(&e)
		n.quarantine.Store(until)
	}
}

// firstSeen applies the policy to a node's first connection.
func (p *Pool) firstSeen(n *node, info serverInfo) {
	if p.policy == quarantine.Always && info.Uptime < p.maxTTL {
		p.quarantineFor(n, p.maxTTL-info.Uptime, quarantine.Error{Uptime: info.Uptime})
	}
}

// dialer wraps every connection a node's client opens, and reads INFO
// server and replication on it before rueidis sends anything: a connection
// after the first may reach a restarted server, another node's server or a
// replica, and INFO says so before any vote can travel on it. The cost is
// one round trip per new connection.
func (p *Pool) dialer(n *node, opt *rueidis.ClientOption, custom func(context.Context, string) (net.Conn, error)) func(ctx context.Context, addr string, d *net.Dialer, tc *tls.Config) (net.Conn, error) {
	return func(ctx context.Context, addr string, d *net.Dialer, tc *tls.Config) (net.Conn, error) {
		// Close ends a dial too: one to a master behind a partition that
		// drops what is sent to it would hold Close up until the dial
		// timeout.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-p.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		if n.sentinels != nil && isSentinelDialer(d) {
			// A sentinel: nothing to check, but Close cuts it too.
			raw, err := dial(ctx, addr, d, tc, custom)
			if err != nil {
				return nil, err
			}
			return p.track(raw, n, addr), nil
		}
		raw, err := dial(ctx, addr, d, tc, custom)
		if err != nil {
			if n.seeds == nil { // one node of a cluster is not the vote
				n.down.Store(true)
			}
			// A plain server that answered the TLS handshake at all is
			// not a master (one waits for a line); say what it is, as
			// redlock-bench's probe does.
			if rh := (tls.RecordHeaderError{}); tc != nil && errors.As(err, &rh) {
				if answer := sniff(ctx, addr, d, nil, custom, time.Now().Add(d.Timeout)); len(answer) > 0 && !resp.IsReply(answer) {
					err = resp.NotRedis(answer, false)
				}
			}
			return nil, err
		}
		// Tracked from now on: Close cuts a connection whose INFO a hung
		// master never answers, too.
		conn := p.track(raw, n, addr)
		deadline := time.Now().Add(d.Timeout)
		if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
			deadline = dl
		}
		user, pass := opt.Username, opt.Password
		if opt.AuthCredentialsFn != nil {
			cred, err := opt.AuthCredentialsFn(rueidis.AuthCredentialsContext{Address: conn.RemoteAddr()})
			if err != nil {
				conn.Close()
				return nil, fmt.Errorf("credentials: %w", err)
			}
			user, pass = cred.Username, cred.Password
		}
		info, err := rawInfo(conn, deadline, user, pass, n.seeds != nil)
		if err != nil {
			conn.Close()
			if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
				// A TLS-only port drops a connection that speaks plain
				// RESP to it; a TLS 1.3 server drops one without the
				// client certificate it wants only after the handshake.
				switch {
				case tc == nil:
					// An HTTPS server is TLS-only too: say so when it
					// is one, as redlock-bench's probe does.
					if answer := sniff(ctx, addr, d, &tls.Config{InsecureSkipVerify: true}, custom, deadline); len(answer) > 0 && !resp.IsReply(answer) { // nothing but PING is sent
						err = resp.NotRedis(answer, true)
						break
					}
					err = fmt.Errorf("%w (does the master want TLS?)", err)
				case len(tc.Certificates) == 0 && tc.GetClientCertificate == nil:
					err = fmt.Errorf("%w (does the master want a client certificate?)", err)
				}
			}
			return nil, err
		}
		if n.seeds != nil {
			// Every connection of a cluster's: the dialer cannot tell
			// which are new to a restarted or promoted node.
			demoted, err := p.observeMember(n, addr, info)
			if err != nil {
				conn.Close()
				if errors.Is(err, ErrNotIndependent) || errors.Is(err, ErrWrongMode) {
					n.setErr(err)
				}
				return nil, err
			}
			p.cutMembers(n, demoted, conn)
			if err := p.judgeMemberClock(n, addr, info); err != nil {
				conn.Close()
				return nil, err
			}
			if err := rawLoadScripts(conn, deadline, p.clusterScripts); err != nil {
				conn.Close()
				return nil, err
			}
			return conn, nil
		}
		prev := n.Info().RunID
		if err := p.observe(n, info); err != nil {
			conn.Close()
			// A connected node's client redials on its next command, so
			// the node stays out, and says why, until the address again
			// reaches an independent master.
			n.down.Store(true)
			n.setErr(err)
			return nil, err
		}
		// A master that restarted has forgotten the scripts, and rueidis
		// reconnects on its own. Loaded here, before the connection carries
		// a command, a script does not answer NOSCRIPT after a restart: its
		// retry as EVAL would run after the commands sent behind it in the
		// same batch, out of order on their keys. (The first connection
		// loads them in connect.)
		if prev != "" && info.RunID != prev {
			if err := rawLoadScripts(conn, deadline, p.scriptList); err != nil {
				conn.Close()
				n.setErr(err)
				return nil, err
			}
		}
		if n.sentinels != nil {
			p.judgePromotion(ctx, n, opt, custom, addr, deadline)
			n.mu.Lock()
			n.masterAddr = addr
			n.mu.Unlock()
		}
		if n.client.Load() != nil {
			n.setErr(nil)
		}
		return conn, nil
	}
}

// dial opens a connection to addr: through custom (Options.DialContext)
// when set, with TLS on top when tc is set, else TCP or TLS.
func dial(ctx context.Context, addr string, d *net.Dialer, tc *tls.Config, custom func(context.Context, string) (net.Conn, error)) (net.Conn, error) {
	switch {
	case custom == nil && tc != nil:
		return (&tls.Dialer{NetDialer: d, Config: tc}).DialContext(ctx, "tcp", addr)
	case custom == nil:
		return d.DialContext(ctx, "tcp", addr)
	}
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	conn, err := custom(ctx, addr)
	if err != nil || tc == nil {
		return conn, err
	}
	if tc.ServerName == "" {
		// As tls.Dialer does: verify the address's host.
		tc = tc.Clone()
		tc.ServerName, _, _ = net.SplitHostPort(addr)
	}
	tconn := tls.Client(conn, tc)
	if err := tconn.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tconn, nil
}

// rawLoadScripts sends SCRIPT LOAD for each script, pipelined, on a new
// connection, and checks each SHA.
func rawLoadScripts(conn net.Conn, deadline time.Time, scripts []*Script) error {
	if len(scripts) == 0 {
		return nil
	}
	conn.SetDeadline(deadline)
	defer conn.SetDeadline(time.Time{})
	var out []byte
	for _, s := range scripts {
		out = append(out, respCommand("SCRIPT", "LOAD", s.Body)...)
	}
	if _, err := conn.Write(out); err != nil {
		return fmt.Errorf("SCRIPT LOAD: %w", err)
	}
	var first error
	for _, s := range scripts {
		line, err := readReply(conn)
		switch {
		case err != nil:
			return fmt.Errorf("SCRIPT LOAD: %w", err)
		case strings.HasPrefix(line, "-"):
			first = cmp.Or(first, fmt.Errorf("SCRIPT LOAD: %s", line[1:]))
			continue
		case line != "$40":
			return fmt.Errorf("SCRIPT LOAD: unexpected reply %q", line)
		}
		sha, err := readLine(conn)
		if err != nil {
			return fmt.Errorf("SCRIPT LOAD: %w", err)
		}
		if sha != s.SHA && first == nil {
			first = fmt.Errorf("SCRIPT LOAD returned %s, want %s", sha, s.SHA)
		}
	}
	return first
}

// observe records what a new connection found, or refuses it when the
// server is not an independent master. Any run_id change quarantines the
// node for a full MaxTTL: the server now at the address may have been up
// for long, yet it never saw the locks the previous one granted (an
// address moved by failover, a VIP or DNS). The first connection applies
// the policy to young nodes.
func (p *Pool) observe(n *node, info serverInfo) error {
	if info.Role != "" && info.Role != "master" {
		of := ""
		if info.MasterAddr != "" {
			of = " of " + info.MasterAddr
		}
		return &dependenceError{fmt.Sprintf("%s is a replica (role %s%s, run_id %s)", n.Addr, info.Role, of, info.RunID)}
	}
	if info.Mode == "cluster" {
		return &modeError{fmt.Sprintf("%s runs in cluster mode: give its cluster as one vote (Clusters)", n.Addr)}
	}
	// One lock across the check and the update, so that two nodes that
	// connect at once to the same server cannot both pass.
	p.ids.Lock()
	defer p.ids.Unlock()
	if o, addr := p.sameServer(n, info.RunID); o != nil {
		if o.seeds == nil {
			return &dependenceError{fmt.Sprintf("%s and %s report the same run_id %s: one server under two addresses", n.Addr, o.Addr, info.RunID)}
		}
		return &dependenceError{fmt.Sprintf("%s and %s report the same run_id %s: one server in two votes", voteName(n, n.Addr), voteName(o, addr), info.RunID)}
	}
	n.mu.Lock()
	first := n.info.RunID == ""
	restarted := !first && info.RunID != n.info.RunID
	n.info = info
	n.mu.Unlock()
	switch {
	case restarted:
		n.restarts.Add(1)
		p.quarantineFor(n, p.maxTTL, quarantine.Error{Restarted: true})
	case first:
		p.firstSeen(n, info)
	}
	p.judgeClock(n, info)
	return nil
}

// judgeClock checks n's clock, as its new connection measured it,
// against the other masters' clocks read again at once (see
// refreshClocks, two node timeouts at most), in the background: the
// dialer must not wait on the other masters' connections, which may be
// dialling too. First, at once, it keeps n out when the reading is
// provably too far from the others' last readings (see suspectSkew), so
// that no yes of a far clock counts while the background check runs: a
// master first seen on a reconnect (down when New checked the clocks,
// and old enough that no quarantine keeps it out) would otherwise hand
// a far token to its quorum's counters. Otherwise n votes as before
// meanwhile. A vague reading that the check lets through is taken again
// once the new connection is up, and judged again (see sharpenClock).
// The caller holds p.ids.
func (p *Pool) judgeClock(n *node, info serverInfo) {
	if p.maxSkew <= 0 || !info.ClockKnown {
		return
	}
	if !faults.ClockJudgedLate.On() {
		p.suspectSkew(n, info)
	}
	p.gate.RLock()
	defer p.gate.RUnlock()
	if p.closing.Load() {
		return
	}
	gen := n.clockGen.Add(1)
	p.clockChecks.Add(1)
	go func() {
		defer p.clockChecks.Done()
		p.refreshClocks(n)
		if !p.judgeReading(n, gen, info, false) || !p.vague(info) {
			return
		}
		// Vague, and not provably off: read it again on the new
		// connection, which the client reaches once its dial is done (a
		// first connection's is read again by connect), and judge the
		// sharper reading.
		if c := n.Client(); c != nil {
			if sharp := p.sharpenClock(c, info); sharp.ClockError < info.ClockError {
				p.judgeReading(n, gen, sharp, true)
			}
		}
	}()
}

// judgeReading judges n's clock reading (checkSkew), unless a newer
// connection of n's has been measured since the one of gen (see
// judgeClock), and records it as n's when record is set; false when
// newer. The caller holds no lock.
func (p *Pool) judgeReading(n *node, gen uint64, info serverInfo, record bool) bool {
	p.ids.Lock()
	defer p.ids.Unlock()
	if n.clockGen.Load() != gen {
		return false
	}
	if record {
		n.mu.Lock()
		n.info.ServerTime, n.info.ClockOffset, n.info.ClockError = info.ServerTime, info.ClockOffset, info.ClockError
		n.mu.Unlock()
	}
	p.checkSkew(n, info)
	return n.skew.Load() == nil
}

// refreshClocks measures again, at once, the clocks of the masters
// other than n that vote (INFO server on their open connections, within
// the node timeout, all at once, each sharpened: see sharpenClock), for
// checkSkew to judge n's new reading against readings of the same
// moment; a master that does not answer in time keeps its earlier
// reading. Only with MaxClockSkew.
func (p *Pool) refreshClocks(n *node) {
	var wg sync.WaitGroup
	for _, o := range p.nodes {
		c := o.Client()
		if o == n || c == nil || o.skew.Load() != nil || !o.Info().ClockKnown {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
			fresh, err := readClock(ctx, c)
			cancel()
			if err != nil || !fresh.ClockKnown {
				return
			}
			fresh = p.sharpenClock(c, fresh)
			o.mu.Lock()
			o.info.ServerTime, o.info.ClockOffset, o.info.ClockError = fresh.ServerTime, fresh.ClockOffset, fresh.ClockError
			o.mu.Unlock()
		}()
	}
	wg.Wait()
}

// readClock reads the clock of c's server (INFO server).
func readClock(ctx context.Context, c rueidis.Client) (serverInfo, error) {
	sent := time.Now()
	txt, err := c.Do(ctx, c.B().Info().Section("server").Build()).ToString()
	if err != nil {
		return serverInfo{}, err
	}
	info := parseServerInfo(txt)
	info.measureClock(sent, time.Now())
	return info, nil
}

// sharpenClock reads the clock of c's server again while r, its reading,
// is vague (uncertain by a quarter of MaxClockSkew or more), at most
// twice, and returns the least uncertain reading: NTP's minimum-delay
// filter, so that a round trip slowed for a moment (a loaded host) does
// not leave the judgement to a vague reading where a sharp one can be
// had. Two readings sharper than that let clocks through (see checkSkew)
// only when they are less than twice MaxClockSkew apart. The reads wait
// a node timeout in all, and each no longer than the best round trip so
// far, a slower one being no better. Only readings moments apart are
// compared: one kept from an earlier connection or refresh could hide a
// clock's step behind its uncertainty, and claim a precision it no
// longer has.
func (p *Pool) sharpenClock(c rueidis.Client, r serverInfo) serverInfo {
	deadline := time.Now().Add(p.timeout)
	for range 2 {
		if !p.vague(r) {
			break
		}
		dl := time.Now().Add(2 * r.ClockError)
		if deadline.Before(dl) {
			dl = deadline
		}
		ctx, cancel := context.WithDeadline(context.Background(), dl)
		fresh, err := readClock(ctx, c)
		cancel()
		if err == nil && fresh.ClockKnown && fresh.ClockError < r.ClockError {
			r.ServerTime, r.ClockOffset, r.ClockError = fresh.ServerTime, fresh.ClockOffset, fresh.ClockError
		}
	}
	return r
}

// vague reports whether reading r is worth taking again (sharpenClock):
// uncertain by a quarter of MaxClockSkew or more.
func (p *Pool) vague(r serverInfo) bool {
	if faults.ClockReadOnce.On() {
		return false
	}
	return p.maxSkew > 0 && r.ClockKnown && r.ClockError >= p.maxSkew/4
}

// checkSkew keeps n out of the vote while its clock, as a new connection
// measured it, is provably MaxClockSkew or more from the median of the
// other nodes' (as last read; see clockReading.apart), and lets it back
// once a new connection finds it within or cannot tell. Nodes kept out
// for their own clocks are not among the others: with three masters the
// median of the two others is their mean, and one bad clock would move
// it far enough to keep out every healthy master that reconnects. The
// caller holds p.ids.
func (p *Pool) checkSkew(n *node, info serverInfo) {
	if p.maxSkew <= 0 || !info.ClockKnown {
		return
	}
	var others []clockReading
	for _, o := range p.nodes {
		if oi := o.Info(); o != n && oi.ClockKnown && o.skew.Load() == nil {
			others = append(others, oi.clock())
		}
	}
	ref, ok := medianClock(others)
	if !ok {
		return
	}
	if d, beyond := info.clock().apart(ref, p.maxSkew); beyond {
		err := fmt.Errorf("%w: its clock is %s from theirs (±%s as read; at most %s)", ErrClockSkew,
			d.Round(time.Millisecond), (info.ClockError + ref.err).Round(100*time.Microsecond), p.maxSkew)
		n.skew.Store(&err)
		return
	}
	n.skew.Store(nil)
}

// suspectSkew keeps n out of the vote, as checkSkew does, when its
// reading is provably MaxClockSkew or more from the median of the other
// nodes' last readings, taken before this moment; it never lets n back
// in, which only a judgement against readings of the same moment does
// (checkSkew after refreshClocks). The caller holds p.ids.
func (p *Pool) suspectSkew(n *node, info serverInfo) {
	var others []clockReading
	for _, o := range p.nodes {
		if oi := o.Info(); o != n && oi.ClockKnown && o.skew.Load() == nil {
			others = append(others, oi.clock())
		}
	}
	ref, ok := medianClock(others)
	if !ok {
		return
	}
	if d, beyond := info.clock().apart(ref, p.maxSkew); beyond {
		err := fmt.Errorf("%w: its clock is %s from theirs as last read (±%s; at most %s)", ErrClockSkew,
			d.Round(time.Millisecond), (info.ClockError + ref.err).Round(100*time.Microsecond), p.maxSkew)
		n.skew.Store(&err)
	}
}

// rawInfo sends INFO server and INFO replication (one section each, which
// every server version accepts) in one write on a bare connection, after
// AUTH when credentials are set (as rueidis sends them: user and password
// when a user is named, else the password alone), and parses the replies.
// rueidis authenticates the same connection again with HELLO afterwards,
// which is harmless. The clock offset is taken against the middle of the
// first reply's round trip.
//
// With topology (a cluster vote's node), CLUSTER NODES goes in the same
// write, and the node's view of the cluster is parsed into the info
// (see parseClusterNodes): read with INFO, from one pass of the node's
// event loop, it says which slots the node served in the role INFO gives.
func rawInfo(conn net.Conn, deadline time.Time, user, pass string, topology bool) (serverInfo, error) {
	conn.SetDeadline(deadline)
	defer conn.SetDeadline(time.Time{})
	if user != "" || pass != "" {
		args := []string{"AUTH", pass}
		if user != "" {
			args = []string{"AUTH", user, pass}
		}
		if err := writeOrAlert(conn, respCommand(args...)); err != nil {
			return serverInfo{}, fmt.Errorf("AUTH: %w", err)
		}
		line, err := readReply(conn)
		if err != nil {
			return serverInfo{}, during("AUTH", err)
		}
		if strings.HasPrefix(line, "-") {
			who := "the default user"
			if user != "" {
				who = "user " + strconv.Quote(user)
			}
			hint := ""
			if strings.Contains(line, "without any password configured") {
				hint = " (the master has no password: give none)"
			}
			return serverInfo{}, fmt.Errorf("AUTH as %s refused: %s%s", who, line[1:], hint)
		}
	}
	sent := time.Now()
	out := append(respCommand("INFO", "server"), respCommand("INFO", "replication")...)
	if topology {
		out = append(out, respCommand("CLUSTER", "NODES")...)
	}
	if err := writeOrAlert(conn, out); err != nil {
		return serverInfo{}, during("INFO server", err)
	}
	server, err := readBulk(conn)
	if err != nil {
		if user == "" && pass == "" && strings.HasPrefix(err.Error(), "NOAUTH") {
			return serverInfo{}, fmt.Errorf("INFO server: %w (the master wants a password: set one)", err)
		}
		return serverInfo{}, during("INFO server", err)
	}
	received := time.Now()
	replication, err := readBulk(conn)
	if err != nil {
		return serverInfo{}, fmt.Errorf("INFO replication: %w", err)
	}
	info := parseServerInfo(server + "\r\n" + replication)
	info.measureClock(sent, received)
	if topology {
		// A node out of cluster mode refuses it; observeMember says why.
		if nodes, err := readBulkMax(conn, 64<<20); err == nil {
			info.view = parseClusterNodes(nodes)
		}
	}
	return info, nil
}

// writeOrAlert writes b to conn; when the write fails, it returns the TLS
// alert the master sent before it closed, if one is waiting, rather than
// the write's error. A TLS 1.3 master judges the client's certificate only
// after the client's side of the handshake is over: it sends its alert
// ("certificate required", "unknown certificate authority") and resets
// the connection, and whether the first write after the handshake comes
// before the reset or after it (then failing with "connection reset by
// peer", which says nothing of the certificate) is a matter of timing. The
// alert arrived before the reset, so it can still be read.
func writeOrAlert(conn net.Conn, b []byte) error {
	_, err := conn.Write(b)
	if err == nil {
		return nil
	}
	var one [1]byte
	_, rerr := conn.Read(one[:])
	if op := (*net.OpError)(nil); errors.As(rerr, &op) && op.Op == "remote error" {
		return rerr
	}
	return err
}

// readBulk reads one bulk-string reply, of at most 1 MiB.
func readBulk(conn net.Conn) (string, error) { return readBulkMax(conn, 1<<20) }

// readBulkMax reads one bulk-string reply of at most max bytes.
func readBulkMax(conn net.Conn, max int) (string, error) {
	line, err := readReply(conn)
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(line, "-") {
		return "", errors.New(line[1:])
	}
	size, err := strconv.Atoi(strings.TrimPrefix(line, "$"))
	if !strings.HasPrefix(line, "$") || err != nil || size < 0 || size > max {
		return "", fmt.Errorf("unexpected reply %q", line)
	}
	body := make([]byte, size+2)
	if _, err := io.ReadFull(conn, body); err != nil {
		return "", err
	}
	return string(body[:size]), nil
}

// respCommand encodes a command as a RESP array of bulk strings.
func respCommand(args ...string) []byte {
	b := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b = append(b, "$"+strconv.Itoa(len(a))+"\r\n"+a+"\r\n"...)
	}
	return b
}

// readReply reads the first line of a reply as readLine does. An answer
// that does not start as a Redis reply does is read no further than
// resp.ReadAnswer reads, and fails as notRedis says.
func readReply(conn net.Conn) (string, error) {
	first := make([]byte, 1)
	if _, err := io.ReadFull(conn, first); err != nil {
		return "", err
	}
	if !resp.IsReply(first) {
		return "", notRedis(conn, resp.ReadAnswer(conn, first))
	}
	rest, err := readLine(conn)
	return string(first) + rest, err
}

// readLine reads one line byte by byte, so that nothing meant for
// rueidis afterwards is consumed.
func readLine(conn net.Conn) (string, error) {
	var line []byte
	one := make([]byte, 1)
	for len(line) < 512 {
		if _, err := io.ReadFull(conn, one); err != nil {
			return "", err
		}
		line = append(line, one[0])
		if one[0] == '\n' {
			break
		}
	}
	return strings.TrimRight(string(line), "\r\n"), nil
}

// errTLSRecord is the error of a plain connection answered with a TLS
// record (an alert): the port serves TLS.
var errTLSRecord = errors.New("it answered with a TLS record (does the master want TLS?)")

// notRedis is the error of a connection whose server answered with
// answer, which is not a Redis reply: a TLS server's record on a plain
// connection, or another server altogether (resp.NotRedis, which
// redlock-bench's probe gives too).
func notRedis(conn net.Conn, answer []byte) error {
	if t, ok := conn.(*trackedConn); ok {
		conn = t.Conn
	}
	_, overTLS := conn.(*tls.Conn)
	if !overTLS && resp.IsTLSRecord(answer) {
		return errTLSRecord
	}
	return resp.NotRedis(answer, overTLS)
}

// during is err, read in answer to cmd, prefixed with cmd; a server that
// is not Redis at all is said as it is, as redlock-bench says it.
func during(cmd string, err error) error {
	if nr := (*resp.NotRedisError)(nil); errors.As(err, &nr) {
		return err
	}
	return fmt.Errorf("%s: %w", cmd, err)
}

// sniff is the answer to PING of a server a connection failed on, over
// tc when set; nothing when the dial, the handshake or the read fails
// before deadline. It only tells another server from a master, and sends
// nothing but PING.
func sniff(ctx context.Context, addr string, d *net.Dialer, tc *tls.Config, custom func(context.Context, string) (net.Conn, error), deadline time.Time) []byte {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	c, err := dial(ctx, addr, d, tc, custom)
	if err != nil {
		return nil
	}
	defer c.Close()
	return resp.PingConn(ctx, c)
}
