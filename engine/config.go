package engine

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"time"

	"github.com/redlock-bench/redlock/internal/addrcheck"
	"github.com/redlock-bench/redlock/internal/quarantine"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/multiplex"
)

// Defaults used by DefaultConfig and for zero fields.
const (
	// DefaultTTL is how long a lock lives on a master unless released or
	// extended.
	DefaultTTL = 10 * time.Second
	// DefaultDriftFactor is the share of the TTL subtracted from validity
	// for clock drift between this process and the masters.
	DefaultDriftFactor = 0.01
	// DriftFloor is added to the drift: it covers timer granularity on the
	// masters, where a PX expiry can fire up to about a millisecond early.
	DriftFloor = 2 * time.Millisecond
	// DefaultNodeTimeoutDivisor: the default node timeout is TTL/100 (100 ms
	// for the default TTL), far below the TTL so that a dead master costs
	// little validity, and far above a loopback or LAN round trip.
	DefaultNodeTimeoutDivisor = 100
	// MinNodeTimeout bounds the default node timeout from below for short
	// TTLs (but never above TTL/10): a loaded two-core host can take tens of
	// milliseconds to answer.
	MinNodeTimeout = 50 * time.Millisecond
	// DefaultRetryDelayMin and DefaultRetryDelayMax bound Lock's random
	// delay between attempts. Random, so that competing clients drift
	// apart instead of splitting the vote again.
	DefaultRetryDelayMin = 5 * time.Millisecond
	DefaultRetryDelayMax = 50 * time.Millisecond
	// DefaultFallbackMin and DefaultFallbackMax bound a Lock waiter's
	// fallback retry when release notifications are on.
	DefaultFallbackMin = 50 * time.Millisecond
	DefaultFallbackMax = 250 * time.Millisecond
	// DefaultNotifyLinger: see Config.Wait.NotifyLinger.
	DefaultNotifyLinger = time.Second
	// MaxLingering bounds the subscriptions that outlive their waiters
	// (Config.Wait.NotifyLinger), and so what they cost the masters.
	MaxLingering = 1024
	// DefaultMaxHandoffs bounds in-process hand-offs in a row.
	DefaultMaxHandoffs = 16
	// MaxMasters is the most masters a Locker accepts; the usual count is 5.
	MaxMasters = 63
)

// Config configures a Locker. Build one with DefaultConfig, then change
// fields; New fills remaining zero values and rejects bad ones.
type Config struct {
	// Masters are the independent Redis masters, host:port each. Required
	// unless Clusters is set; an odd count of votes (usually 5) wastes no
	// node. No duplicates.
	Masters []string
	// Clusters are votes that are Redis Clusters, each given by the
	// host:port of one or more of its nodes; they vote after Masters, in
	// order, and the quorum is over all votes: len(Masters)+len(Clusters).
	// A cluster's vote on a resource is that of the shard that owns the
	// resource key's slot. No node may serve two votes. See
	// docs/library.md, "Cluster masters".
	Clusters [][]string
	// Sentinels are votes that are masters Redis Sentinel manages, each
	// given by its master name and some of its sentinels' addresses; they
	// vote after Clusters, and count in the quorum as the others do.
	// After a failover the vote is the promoted replica, which may lack
	// the locks the old master took just before: its new run_id keeps the
	// vote out for MaxTTL, as a restart does. See docs/library.md,
	// "Sentinel-managed votes".
	Sentinels []SentinelVote
	// TTL is the lock's lifetime on the masters. Must be > 0;
	// DefaultConfig sets DefaultTTL.
	TTL time.Duration
	// DriftFactor times the TTL, plus DriftFloor, is subtracted from each
	// lease's validity. Must be in [0, 1). Zero selects DefaultDriftFactor.
	DriftFactor float64
	// NodeTimeout bounds how long one attempt waits for the masters (it is
	// checked every quarter of it, at most 25ms, so an attempt may end up
	// to that much after it; validity is measured from the attempt's
	// start all the same). Zero selects
	// max(TTL/DefaultNodeTimeoutDivisor, min(MinNodeTimeout, TTL/10)) at
	// New, so it follows the TTL. Must be below TTL/2.
	NodeTimeout time.Duration
	// Quarantine is the restart policy:
	// QuarantineOff, QuarantineObserved or QuarantineAlways. Zero selects
	// QuarantineAlways: a master younger than MaxTTL is kept out of the
	// vote until it is MaxTTL old, even when first seen, because this
	// process cannot know which locks it forgot.
	Quarantine QuarantinePolicy
	// MaxTTL is the longest TTL any Locker uses on these masters (leases
	// extended past TTL count too). Zero selects TTL.
	MaxTTL time.Duration
	// AutoExtend makes every lease extend itself to TTL every ExtendEvery
	// while it is held, so that work may take longer than the TTL; if an
	// extension misses the quorum, the lease's Done channel closes at once.
	// Default: off.
	AutoExtend bool
	// ExtendEvery is the auto-extension period. Zero selects TTL/3, which
	// renews a lease while two thirds of its validity remain. The first
	// extension that misses the quorum ends the lease (ErrLockLost) rather
	// than trying again on a lock it can no longer vouch for.
	ExtendEvery time.Duration
	// MaxExtensions caps auto-extensions per lease; 0 means no cap.
	MaxExtensions int
	// Fencing gives each lease a token that only increases per resource
	// (Lease.Token), for the protected resource to reject stale holders.
	// It costs one extra round trip per acquisition. Default: off.
	Fencing bool
	// DisableTracking turns off the at-once notice of a lost lease: by
	// default a lease whose Done or Context is used, or that
	// auto-extends, has its keys watched on every master through
	// client-side-caching invalidations (CLIENT TRACKING, Redis 6 or
	// later, on one more connection per master), and ends with
	// ErrLockLost as soon as they are gone or another's on too many
	// masters for a quorum, instead of at its next extension. A master
	// that refuses tracking (older than Redis 6, or an ACL user without
	// CLIENT, GET and PTTL on the keys) is left to the extensions.
	DisableTracking bool
	// KeyPrefix is prepended to every resource name to form the key.
	// Default: none.
	KeyPrefix string
	// Owner is the owner metadata attached to every lease of this Locker
	// unless WithOwner gives another for the acquisition: a short label
	// ("host=a pid=12") that Locker.Inspect shows next to the holder's
	// value. At most MaxOwnerLen bytes of valid UTF-8. Default: none,
	// which adds nothing to the value.
	Owner string
	// Observer receives every acquire, release, extend, wait, hand-off,
	// lost lease and node state change, for metrics and traces (see
	// Observer and package otelredlock). Default: none, which costs nothing.
	Observer *Observer
	// Wait tunes how Lock waits for a held resource: retries, the
	// in-process gate and hand-offs, release notifications. The defaults
	// suit most uses.
	Wait WaitOptions
	// Conn configures the connections to the masters: authentication,
	// TLS, custom transports, timeouts and rueidis's pipelining.
	Conn ConnOptions
}

// WaitOptions tunes how Lock waits (Config.Wait). Zero values select the
// defaults.
type WaitOptions struct {
	// RetryDelayMin and RetryDelayMax bound Lock's random delay between
	// attempts. Zero selects DefaultRetryDelayMin/Max.
	RetryDelayMin, RetryDelayMax time.Duration
	// FallbackMin and FallbackMax bound the random wait of a Lock waiter
	// between attempts when the resource is held: the retry that covers a
	// missed notification (or an expiry, which publishes nothing). Capped
	// at the TTL (a read/write lock's waiters: at the call's TTL too, half
	// of it the lowest). Zero selects 50ms and 250ms (the wait is usually ended
	// by the notification long before); with DisableNotify, zero selects
	// RetryDelayMin/Max.
	FallbackMin, FallbackMax time.Duration
	// DisableGate turns off the in-process gate: by default, goroutines of
	// one Locker that Lock the same resource queue locally in FIFO order
	// and only the head competes for it on the masters. It also turns off
	// the readers' share: by default, read locks of one RWMutex name in one
	// Locker share one entry on the masters (see RWMutex).
	DisableGate bool
	// MaxHandoffs caps how many times in a row a lease is passed from one
	// goroutine of this Locker to the next one queued at the gate, without
	// a round trip to the masters. After that the lease is released on the
	// masters, so that other processes get their turn. Zero selects
	// DefaultMaxHandoffs; negative turns hand-offs off.
	MaxHandoffs int
	// DisableNotify turns off release notifications: by default Lock
	// waiters subscribe to the resource's channel and mark the holder's
	// value, its release PUBLISHes on the channel, and they retry at once
	// instead of polling.
	DisableNotify bool
	// NotifyLinger is how long a Locker stays subscribed to a resource's
	// releases after its last waiter left, so that a resource waited for
	// again and again is not subscribed and unsubscribed for every lock,
	// and its next waiter queues on the masters at once. At most
	// MaxLingering subscriptions linger. Zero selects DefaultNotifyLinger;
	// negative unsubscribes at once.
	NotifyLinger time.Duration
	// Rand, when set, is where Lock's random delays come from (the back-off
	// after a split vote, the fallback retry, the undo's retry), so that a
	// test or a simulation seeded once gets the same delays again. The
	// engine serializes its use. Lease values come from crypto/rand
	// whatever this is. Default: nil, math/rand/v2's global source.
	Rand *rand.Rand
}

// ConnOptions configures the connections to the masters (Config.Conn).
// Zero values select the defaults.
type ConnOptions struct {
	// Username and Password authenticate every connection to the masters:
	// the pool's, the release notifications' and the restart check's.
	// Password alone is for requirepass (the default user); with Username
	// it is an ACL user's, which needs +@all or at least the commands the
	// engine sends (EVALSHA, SCRIPT LOAD, INFO, TIME, SUBSCRIBE, ...).
	// Default: none.
	Username, Password string
	// TLS, when set, makes every connection to the masters TLS with this
	// configuration: RootCAs to verify the masters (nil: the system's),
	// Certificates for a client certificate, ServerName to verify a name
	// other than each master's host. Default: plain TCP.
	TLS *tls.Config
	// DialContext, when set, opens every connection to a master (the
	// pool's, the release notifications', the restart check's) instead of
	// TCP, for custom transports: SSH tunnels, unix sockets, in-memory
	// connections for simulation. It gets the address from Masters and a
	// ctx bounded by DialTimeout; TLS, when set, runs on top of the
	// connection it returns, and the restart check reads INFO on it
	// before any command, as on TCP. Default: nil, TCP.
	DialContext func(ctx context.Context, addr string) (net.Conn, error)
	// DialTimeout bounds connecting to each master at start-up. Zero
	// selects multiplex.DefaultDialTimeout.
	DialTimeout time.Duration
	// ConnTimeout: a connection silent for this long is closed. Zero
	// selects multiplex.DefaultConnTimeout.
	ConnTimeout time.Duration
	// MaxFlushDelay is rueidis's pause after a flush while several calls
	// share a master's connection. Concurrent lockers' commands already
	// share writes without it: each master has one batch in flight, and
	// what arrives meanwhile leaves together as the next. Zero selects
	// multiplex.DefaultMaxFlushDelay (none); negative flushes at once.
	MaxFlushDelay time.Duration
	// PipelineMultiplex is rueidis's log2 of connections per master. Zero
	// selects multiplex.DefaultPipelineMultiplex (one connection).
	PipelineMultiplex int
	// DisableCoalesce sends each release, extend, undo and waiter's
	// acquire as its own script call. By default, those queued for a
	// master at the same moment go as one call over many keys, with each
	// key's outcome the same as alone, which costs the master several
	// times less per key.
	DisableCoalesce bool
	// Tune may adjust each master's rueidis.ClientOption, for what has no
	// field here; it runs after Username, Password and TLS are set.
	// Optional.
	Tune func(*rueidis.ClientOption)
}

// QuarantinePolicy says when a restarted master's votes are ignored. A
// master that restarts without persistence has forgotten every lock it
// held; if its yes counted at once, a second client could win a quorum
// for a resource that is still held. The reference's answer is to keep a
// restarted master out for one TTL ("delayed restart"); the engine
// enforces it from the client side, with one of the policies below.
type QuarantinePolicy = quarantine.Policy

// The restart quarantine policies.
const (
	QuarantineOff      = quarantine.Off
	QuarantineObserved = quarantine.Observed
	QuarantineAlways   = quarantine.Always
)

// ParseMasters reads a comma-separated list of master addresses, as a
// command line or an environment variable gives them: host:port each,
// none twice, checked as New checks Config.Masters.
func ParseMasters(list string) ([]string, error) { return addrcheck.Parse(list) }

// ParseQuarantinePolicy reads "off", "observed" or "always", in any case.
func ParseQuarantinePolicy(s string) (QuarantinePolicy, error) {
	return quarantine.Parse(s)
}

// DefaultConfig returns a Config for the given masters with every default
// filled in.
func DefaultConfig(masters ...string) Config {
	c := Config{Masters: masters, TTL: DefaultTTL}
	c.fill()
	// Derived from the TTL at New, so that changing TTL afterwards keeps
	// them in proportion.
	c.NodeTimeout, c.ExtendEvery, c.MaxTTL = 0, 0, 0
	return c
}

func (c *Config) fill() {
	if c.DriftFactor == 0 {
		c.DriftFactor = DefaultDriftFactor
	}
	if c.NodeTimeout == 0 && c.TTL > 0 {
		c.NodeTimeout = max(c.TTL/DefaultNodeTimeoutDivisor, min(MinNodeTimeout, c.TTL/10))
	}
	if c.Wait.RetryDelayMin == 0 {
		c.Wait.RetryDelayMin = DefaultRetryDelayMin
	}
	if c.Wait.RetryDelayMax == 0 {
		c.Wait.RetryDelayMax = max(DefaultRetryDelayMax, c.Wait.RetryDelayMin)
	}
	if c.Wait.MaxHandoffs == 0 {
		c.Wait.MaxHandoffs = DefaultMaxHandoffs
	}
	if c.Wait.NotifyLinger == 0 {
		c.Wait.NotifyLinger = DefaultNotifyLinger
	}
	if c.Quarantine == 0 {
		c.Quarantine = QuarantineAlways
	}
	if c.MaxTTL == 0 {
		c.MaxTTL = c.TTL
	}
	if c.ExtendEvery == 0 && c.TTL > 0 {
		c.ExtendEvery = c.TTL / 3
	}
	if c.Wait.FallbackMin == 0 {
		c.Wait.FallbackMin = DefaultFallbackMin
		if c.Wait.DisableNotify {
			c.Wait.FallbackMin = c.Wait.RetryDelayMin
		}
	}
	if c.Wait.FallbackMax == 0 {
		c.Wait.FallbackMax = max(DefaultFallbackMax, c.Wait.FallbackMin)
		if c.Wait.DisableNotify {
			c.Wait.FallbackMax = max(c.Wait.RetryDelayMax, c.Wait.FallbackMin)
		}
	}
	if c.Conn.DialTimeout == 0 {
		c.Conn.DialTimeout = multiplex.DefaultDialTimeout
	}
	if c.Conn.ConnTimeout == 0 {
		c.Conn.ConnTimeout = multiplex.DefaultConnTimeout
	}
	if c.Conn.PipelineMultiplex == 0 {
		c.Conn.PipelineMultiplex = multiplex.DefaultPipelineMultiplex
	}
}

// Validate reports the first bad field, naming it and its value. It does
// not fill defaults; New does that first.
func (c *Config) Validate() error {
	switch {
	case len(c.Masters) == 0 && len(c.Clusters) == 0 && len(c.Sentinels) == 0:
		return fmt.Errorf("engine: Config.Masters is empty: at least one master is needed")
	case c.votes() > MaxMasters:
		return fmt.Errorf("engine: Config.Masters, Clusters and Sentinels have %d votes, at most %d are supported", c.votes(), MaxMasters)
	case c.TTL <= 0:
		return fmt.Errorf("engine: Config.TTL must be > 0, got %s", c.TTL)
	case c.TTL%time.Millisecond != 0:
		return fmt.Errorf("engine: Config.TTL must be whole milliseconds (PX), got %s", c.TTL)
	case math.IsNaN(c.DriftFactor) || c.DriftFactor < 0 || c.DriftFactor >= 1:
		return fmt.Errorf("engine: Config.DriftFactor must be in [0, 1), got %v", c.DriftFactor)
	case drift(c.TTL, c.DriftFactor) >= c.TTL:
		return fmt.Errorf("engine: Config.TTL (%s) leaves no validity after drift (%s)", c.TTL, drift(c.TTL, c.DriftFactor))
	case c.NodeTimeout < 0:
		return fmt.Errorf("engine: Config.NodeTimeout must be > 0, got %s", c.NodeTimeout)
	case c.NodeTimeout >= c.TTL/2:
		return fmt.Errorf("engine: Config.NodeTimeout (%s) must be below half the TTL (%s)", c.NodeTimeout, c.TTL)
	case c.Quarantine > QuarantineAlways:
		return fmt.Errorf("engine: Config.Quarantine %d is not a policy (off, observed, always)", c.Quarantine)
	case c.MaxTTL < c.TTL && c.MaxTTL != 0:
		return fmt.Errorf("engine: Config.MaxTTL (%s) is below TTL (%s)", c.MaxTTL, c.TTL)
	case c.Wait.RetryDelayMin < 0:
		return fmt.Errorf("engine: Config.Wait.RetryDelayMin must be >= 0, got %s", c.Wait.RetryDelayMin)
	case c.Wait.RetryDelayMax < c.Wait.RetryDelayMin:
		return fmt.Errorf("engine: Config.Wait.RetryDelayMax (%s) is below RetryDelayMin (%s)", c.Wait.RetryDelayMax, c.Wait.RetryDelayMin)
	case c.ExtendEvery < 0 || (c.AutoExtend && c.ExtendEvery >= c.TTL):
		return fmt.Errorf("engine: Config.ExtendEvery (%s) must be in (0, TTL %s)", c.ExtendEvery, c.TTL)
	case c.MaxExtensions < 0:
		return fmt.Errorf("engine: Config.MaxExtensions must be >= 0, got %d", c.MaxExtensions)
	case c.Wait.FallbackMin < 0:
		return fmt.Errorf("engine: Config.Wait.FallbackMin must be >= 0, got %s", c.Wait.FallbackMin)
	case c.Wait.FallbackMax < c.Wait.FallbackMin:
		return fmt.Errorf("engine: Config.Wait.FallbackMax (%s) is below FallbackMin (%s)", c.Wait.FallbackMax, c.Wait.FallbackMin)
	case c.Conn.DialTimeout < 0:
		return fmt.Errorf("engine: Config.Conn.DialTimeout must be >= 0, got %s", c.Conn.DialTimeout)
	case c.Conn.ConnTimeout < 0:
		return fmt.Errorf("engine: Config.Conn.ConnTimeout must be >= 0, got %s", c.Conn.ConnTimeout)
	case checkOwner(c.Owner) != nil:
		return fmt.Errorf("engine: Config.Owner: %v", checkOwner(c.Owner))
	case c.Conn.PipelineMultiplex > rueidis.MaxPipelineMultiplex:
		return fmt.Errorf("engine: Config.Conn.PipelineMultiplex must be <= %d, got %d", rueidis.MaxPipelineMultiplex, c.Conn.PipelineMultiplex)
	}
	if len(c.Masters) == 0 {
		return cmp.Or(c.validateClusters(), c.validateSentinels())
	}
	if err := addrcheck.Masters(c.Masters); err != nil {
		var ae *addrcheck.AddrError
		switch {
		case !errors.As(err, &ae):
			return fmt.Errorf("engine: Config.Masters: %w", err)
		case ae.First >= 0:
			return fmt.Errorf("engine: Config.Masters[%d] %q duplicates Masters[%d]: masters must be distinct", ae.Index, ae.Addr, ae.First)
		}
		return fmt.Errorf("engine: Config.Masters[%d] %q: %s", ae.Index, ae.Addr, ae.Reason)
	}
	return cmp.Or(c.validateClusters(), c.validateSentinels())
}

// drift is the allowance a validity of ttl leaves for the masters'
// clocks running fast: ttl × factor + DriftFloor (the floor alone with
// mutation.ValidityIgnoresDrift).
func drift(ttl time.Duration, factor float64) time.Duration {
	if faults.ValidityIgnoresDrift.On() {
		return DriftFloor
	}
	return time.Duration(float64(ttl)*factor) + DriftFloor
}
