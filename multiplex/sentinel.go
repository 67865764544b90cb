package multiplex

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlock-bench/redlock/internal/quarantine"
)

// A Sentinel vote (Options.Sentinels) is one rueidis client in sentinel
// mode: it asks the sentinels which server is the master, connects to it,
// and on a failover (+switch-master, or the periodic check below) connects
// to the new one. Every connection to a master goes through the pool's
// dialer as a plain master's does, so the checks follow the vote across
// failovers: a promoted replica reports a new run_id, which quarantines
// the vote for MaxTTL (it may lack the keys the old master took just
// before), the sentinels' account of when it became master keeps it out
// until MaxTTL after that (judgePromotion), and a server that is a
// replica, or another vote's, is refused.
// The connections to the sentinels themselves go through the dialer too
// (rueidis has one DialCtxFn), and pass unchecked: a sentinel is no
// master and casts no vote.

// sentinelRefresh is how often a Sentinel vote's client asks the
// sentinels for the master besides following their events, so that a
// missed +switch-master cannot leave it on a demoted master for long
// (rueidis's SentinelOption.TopologyRefreshInterval).
const sentinelRefresh = time.Second

// sentinelLabel names a Sentinel vote in Status and messages, as
// clusterLabel names a cluster vote.
func sentinelLabel(master string, addrs []string) string {
	return "sentinel(" + master + "@" + strings.Join(addrs, ",") + ")"
}

// sentinelResolver marks the net.Dialer rueidis dials the sentinels with
// (SentinelOption.Dialer), so that the dialer tells those connections
// from the master's: rueidis passes each connection's own Dialer. A
// Resolver's zero value resolves as net.DefaultResolver does.
var sentinelResolver = &net.Resolver{}

// sentinelResolvers are the marks made for resolvers Tune set.
var sentinelResolvers sync.Map

// markSentinelDialer marks d as the sentinels' dialer, keeping what a
// resolver Tune set there does.
func markSentinelDialer(d *net.Dialer) {
	if r := d.Resolver; r != nil && r != sentinelResolver {
		d.Resolver = &net.Resolver{PreferGo: r.PreferGo, StrictErrors: r.StrictErrors, Dial: r.Dial}
		sentinelResolvers.Store(d.Resolver, struct{}{})
		return
	}
	d.Resolver = sentinelResolver
}

// isSentinelDialer reports whether d is a sentinel's dialer, as
// markSentinelDialer marked it.
func isSentinelDialer(d *net.Dialer) bool {
	if d == nil || d.Resolver == nil {
		return false
	}
	if d.Resolver == sentinelResolver {
		return true
	}
	_, ok := sentinelResolvers.Load(d.Resolver)
	return ok
}

// A Sentinel vote's master is kept out of the vote until MaxTTL after
// it became master. Its run_id tells a client that saw the old master
// that the server changed, but a process that first connects after a
// failover sees no change, and a replica that has been up for long looks
// old to QuarantineAlways: yet it may lack the locks the old master
// granted just before the promotion, which are valid for up to MaxTTL
// after it. INFO does not say when a server became master; the sentinels
// do (SENTINEL MASTER's role-reported-time: the milliseconds since the
// sentinel saw the server report the master role, or since it reset its
// view of the master at the failover's switch, or began watching it,
// each at or after the promotion, so never too short). Every new
// connection to the master asks the sentinels, before a vote travels on
// it: a failback, or a failover this pool missed the middle of, resets
// their clocks too.

// sentinelView is one sentinel's answer to SENTINEL MASTER.
type sentinelView struct {
	// addr is where the sentinel says the master is (ip:port).
	addr string
	// master: the sentinel last saw that server report the master role.
	master bool
	// since is role-reported-time: how long ago the sentinel saw the
	// server's role become master, or began watching it.
	since time.Duration
	// epoch is config-epoch: 0 until the sentinels fail the master over.
	epoch int64
}

// judgePromotion quarantines Sentinel vote n, whose new connection
// reached addr, until MaxTTL after addr became master, as the sentinels
// tell (see promotionAge); when none can tell, for MaxTTL from now, as
// if just promoted. QuarantineObserved, which trusts a master first
// seen, trusts one the sentinels never failed over (configuration epoch
// 0: the master they were set to watch), but not a promoted one: a
// promotion the sentinels report is known, as a run_id change this pool
// saw is.
func (p *Pool) judgePromotion(ctx context.Context, n *node, opt *rueidis.ClientOption, custom func(context.Context, string) (net.Conn, error), addr string, deadline time.Time) {
	if p.policy == quarantine.Off || faults.SentinelPromotionUnchecked.On() {
		return
	}
	ago, known, epoch := promotionAge(p.askSentinels(ctx, n, opt, custom, deadline), addr)
	switch {
	case !known:
		p.quarantineFor(n, p.maxTTL, quarantine.Error{Promoted: true, PromotionUnknown: true})
	case p.policy == quarantine.Observed && epoch == 0:
	case ago < p.maxTTL:
		p.quarantineFor(n, p.maxTTL-ago, quarantine.Error{Promoted: true, PromotedAgo: ago})
	}
}

// promotionAge is how long ago the server at addr became master, as the
// sentinels that answered (views) tell: the shortest time any of them
// saw it master for, so that a sentinel that missed a role change (it
// was cut off) cannot make it look older. Unknown (false) when none
// names addr master, or when one of the latest configuration epoch names
// another server, or another role: the failover that promoted addr, if
// any, is not over. epoch is the latest configuration epoch seen.
func promotionAge(views []sentinelView, addr string) (ago time.Duration, known bool, epoch int64) {
	for _, v := range views {
		epoch = max(epoch, v.epoch)
	}
	for _, v := range views {
		named := v.addr == addr && v.master
		if !named && v.epoch == epoch {
			return 0, false, epoch
		}
		if named && (!known || v.since < ago) {
			ago, known = v.since, true
		}
	}
	return ago, known, epoch
}

// askSentinels asks each of n's sentinels, at once, SENTINEL MASTER
// until deadline, over the sentinels' dialer, TLS and credentials, and
// returns the answers it got.
func (p *Pool) askSentinels(ctx context.Context, n *node, opt *rueidis.ClientOption, custom func(context.Context, string) (net.Conn, error), deadline time.Time) []sentinelView {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	d := opt.Sentinel.Dialer
	ch := make(chan []sentinelView, len(n.sentinels))
	for _, a := range n.sentinels {
		go func() {
			v, err := askSentinel(ctx, a, &d, &opt.Sentinel, custom, n.master, deadline)
			if err != nil {
				ch <- nil
				return
			}
			ch <- []sentinelView{v}
		}()
	}
	var out []sentinelView
	for range n.sentinels {
		out = append(out, <-ch...)
	}
	return out
}

// askSentinel reads one sentinel's view of master (SENTINEL MASTER, in
// RESP2: an array of field names and values).
func askSentinel(ctx context.Context, addr string, d *net.Dialer, so *rueidis.SentinelOption, custom func(context.Context, string) (net.Conn, error), master string, deadline time.Time) (sentinelView, error) {
	conn, err := dial(ctx, addr, d, so.TLSConfig, custom)
	if err != nil {
		return sentinelView{}, err
	}
	defer conn.Close()
	// The pool's Close ends the read too.
	defer context.AfterFunc(ctx, func() { conn.Close() })()
	conn.SetDeadline(deadline)
	var out []byte
	auth := so.Username != "" || so.Password != ""
	if auth {
		args := []string{"AUTH", so.Password}
		if so.Username != "" {
			args = []string{"AUTH", so.Username, so.Password}
		}
		out = respCommand(args...)
	}
	out = append(out, respCommand("SENTINEL", "MASTER", master)...)
	if _, err := conn.Write(out); err != nil {
		return sentinelView{}, err
	}
	if auth {
		if line, err := readReply(conn); err != nil || strings.HasPrefix(line, "-") {
			return sentinelView{}, fmt.Errorf("sentinel %s: AUTH: %v %s", addr, err, line)
		}
	}
	line, err := readReply(conn)
	if err != nil {
		return sentinelView{}, err
	}
	size, err := strconv.Atoi(strings.TrimPrefix(line, "*"))
	if !strings.HasPrefix(line, "*") || err != nil || size%2 != 0 || size > 256 {
		return sentinelView{}, fmt.Errorf("sentinel %s: SENTINEL MASTER: unexpected reply %q", addr, line)
	}
	fields := make(map[string]string, size/2)
	for range size / 2 {
		k, err := readBulk(conn)
		if err != nil {
			return sentinelView{}, err
		}
		v, err := readBulk(conn)
		if err != nil {
			return sentinelView{}, err
		}
		fields[k] = v
	}
	since, err1 := strconv.ParseInt(fields["role-reported-time"], 10, 64)
	epoch, err2 := strconv.ParseInt(fields["config-epoch"], 10, 64)
	if err1 != nil || err2 != nil || since < 0 || fields["ip"] == "" || fields["port"] == "" {
		return sentinelView{}, fmt.Errorf("sentinel %s: SENTINEL MASTER: no role-reported-time, config-epoch or address in %v", addr, fields)
	}
	return sentinelView{addr: net.JoinHostPort(fields["ip"], fields["port"]), master: fields["role-reported"] == "master",
		since: time.Duration(since) * time.Millisecond, epoch: epoch}, nil
}
