package multiplex

import (
	"net"
	"strings"
	"sync"
	"time"
)

// A Sentinel vote (Options.Sentinels) is one rueidis client in sentinel
// mode: it asks the sentinels which server is the master, connects to it,
// and on a failover (+switch-master, or the periodic check below) connects
// to the new one. Every connection to a master goes through the pool's
// dialer as a plain master's does, so the checks follow the vote across
// failovers: a promoted replica reports a new run_id, which quarantines
// the vote for MaxTTL (it may lack the keys the old master took just
// before), and a server that is a replica, or another vote's, is refused.
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
