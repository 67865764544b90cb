package engine

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/multiplex"
)

// Locker acquires leases on resources across the masters. It is safe for
// concurrent use; one Locker per process is the intended use.
type Locker struct {
	cfg    Config
	pool   *multiplex.Pool
	addrs  []string
	ttlStr string // TTL in ms, formatted once
	// rwFallback and rwLife are rwWaitLife for the TTL, formatted once:
	// every waiting reader of a read/write lock needs them.
	rwFallback time.Duration
	rwLife     string
	// ownerSuffix is Config.Owner encoded as a lease value's suffix (see
	// encodeOwner), once.
	ownerSuffix string
	// maxTTLStr is MaxTTL in ms, formatted once: how long a fencing
	// counter outlives its value on its master's clock (see fence.go).
	maxTTLStr string
	drift     time.Duration
	// votes are the masters and cluster votes, in Config order; quorum
	// is votes/2+1.
	votes, quorum int
	// epoch is when the Locker was made: instants kept as numbers (a
	// handle's checkClock) count from it on the monotonic clock, which a
	// step of the system clock does not move.
	epoch  time.Time
	setGet bool // masters support SET NX GET (Redis >= 7.0)
	// clustered: some votes are Redis Clusters, whose keys need a
	// resource's slot (see key).
	clustered bool
	gate      *gate
	// semGate queues this Locker's Acquire callers that wait for a full
	// semaphore, by its keys' base: only the head waits on the masters.
	semGate *gate
	notify  *notifier
	track   *tracker // nil with DisableTracking
	// shares are this Locker's readers' shared entries, by lock key (see
	// rwShare); nil with the gate off.
	shareMu sync.Mutex
	shares  map[string]*rwShare
	// flights are the lock keys a reader of this Locker is acquiring on
	// the masters, with that attempt (see RWMutex.flight).
	flights map[string]*rwFlight
	closed  atomic.Bool
	// done closes with Close: Lock callers asleep between attempts wake.
	done chan struct{}
	// remote counts Lock callers (at the gate or past it), attempts and
	// Releases handing their lease on, whom Close waits for, bounded, so
	// that their clean-up still reaches the masters.
	remote atomic.Int32
	// tickets are this Locker's waiters' places in the masters' queues,
	// with their resources. Whoever takes a ticket out sends its leave (the
	// waiter, or Close for a waiter it could not wait for), once, and while
	// holding tmu: Close takes tmu before it closes the pool, which then
	// drains what was posted.
	tmu     sync.Mutex
	tickets map[*ticket]string
	randMu  sync.Mutex // Config.Wait.Rand is not safe for concurrent use
	nodes   *nodeWatch // for Observer.NodeState
	// id and seq name this Locker's waiters in the masters' queues.
	id  string
	seq atomic.Uint64
	// listBatch (0: ListBatch), listPending, listScan and listAsk are the
	// tests' handles on Walk's batches, its memory, the keys SCAN answers
	// and the other masters' answers (export_test.go).
	listBatch   int
	listPending func(int)
	listScan    func(m int, keys []string) []string
	listAsk     func(j int) error
}

// New validates cfg, connects to every master and loads the scripts. A
// minority of masters may be down; if a quorum cannot be reached it fails
// with an error naming every unreachable address and why.
func New(ctx context.Context, cfg Config) (*Locker, error) {
	cfg.Masters = append([]string(nil), cfg.Masters...)
	cfg.Clusters = cloneClusters(cfg.Clusters)
	cfg.Sentinels = cloneSentinels(cfg.Sentinels)
	cfg.fill()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pool, err := multiplex.Dial(ctx, multiplex.Options{
		Addrs:             cfg.Masters,
		Clusters:          cfg.Clusters,
		Sentinels:         sentinelOptions(cfg.Sentinels),
		NodeTimeout:       cfg.NodeTimeout,
		DialTimeout:       cfg.Conn.DialTimeout,
		ConnTimeout:       cfg.Conn.ConnTimeout,
		MaxFlushDelay:     cfg.Conn.MaxFlushDelay,
		PipelineMultiplex: cfg.Conn.PipelineMultiplex,
		Scripts:           append(allScripts[:len(allScripts):len(allScripts)], multiScripts...),
		Quarantine:        cfg.Quarantine,
		MaxTTL:            cfg.MaxTTL,
		DisableCoalesce:   cfg.Conn.DisableCoalesce,
		MaxClockSkew:      maxClockSkew(cfg),
		Username:          cfg.Conn.Username,
		Password:          cfg.Conn.Password,
		TLS:               cfg.Conn.TLS,
		DialContext:       cfg.Conn.DialContext,
		Tune:              cfg.Conn.Tune,
	})
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	l := &Locker{
		cfg:         cfg,
		pool:        pool,
		addrs:       voteNames(pool),
		clustered:   len(cfg.Clusters) > 0,
		ttlStr:      itoa(cfg.TTL.Milliseconds()),
		ownerSuffix: encodeOwner(cfg.Owner),
		maxTTLStr:   itoa(cfg.MaxTTL.Milliseconds()),
		drift:       drift(cfg.TTL, cfg.DriftFactor),
		votes:       cfg.votes(),
		quorum:      cfg.votes()/2 + 1,
		epoch:       time.Now(),
		setGet:      true,
		id:          newValue()[:11],
		done:        make(chan struct{}),
		tickets:     make(map[*ticket]string),
	}
	l.rwFallback, l.rwLife = rwWaitLife(&cfg, cfg.TTL)
	for _, n := range pool.Status() {
		if v := n.Version; v != "" && !atLeast(v, 7, 0) {
			l.setGet = false
		}
	}
	if cfg.Fencing {
		if err := checkClocks(pool, cfg.MaxTTL); err != nil {
			pool.Close()
			return nil, err
		}
	}
	if !cfg.Wait.DisableGate {
		l.gate = newGate()
		l.semGate = newGate()
		l.shares = make(map[string]*rwShare)
		l.flights = make(map[string]*rwFlight)
	}
	if !cfg.Wait.DisableNotify {
		l.notify = newNotifier(pool, l.votes, len(cfg.Masters), len(cfg.Clusters), cfg.NodeTimeout, cfg.Wait.NotifyLinger)
	}
	if !cfg.DisableTracking {
		l.track = newTracker(pool, cfg.Masters, l.votes, l.quorum, cfg.NodeTimeout)
	}
	l.nodes = l.watchNodes()
	return l, nil
}

var allScripts = []*multiplex.Script{releaseScript, undoScript, extendScript, leaveScript, quitScript, acquireMarkScript, acquireFenceScript, fenceScript,
	semAcquireScript, semReleaseScript, semUndoScript, semSweepScript}

// Config returns the effective configuration, defaults filled in.
func (l *Locker) Config() Config { return l.cfg }

// Quorum is the number of masters that must agree: N/2+1.
func (l *Locker) Quorum() int { return l.quorum }

// Nodes reports each master's state: up, down, or quarantined (and until
// when), with its outcome counts.
func (l *Locker) Nodes() []NodeStatus { return l.pool.Status() }

// NodeState is a master's condition as the Locker sees it.
type NodeState = multiplex.NodeState

// The states of a master.
const (
	StateUp          = multiplex.StateUp
	StateDown        = multiplex.StateDown
	StateQuarantined = multiplex.StateQuarantined
	// StateClockSkewed: with Fencing, a master whose clock, measured on a
	// new connection, is provably MaxTTL/2 or more from the others' (its
	// reading's uncertainty counted: NodeStatus.ClockErrorMS) is kept out
	// of the vote until a new connection finds it not provably so.
	StateClockSkewed = multiplex.StateClockSkewed
)

// NodeStatus is a snapshot of one master, for operators and the bench.
type NodeStatus = multiplex.NodeStatus

// Subscriptions is the number of resources this Locker is subscribed to
// for release notifications right now: one per resource with waiters, or
// waited for within Config.Wait.NotifyLinger.
func (l *Locker) Subscriptions() int {
	if l.notify == nil {
		return 0
	}
	return l.notify.subscriptions()
}

// Close releases the connections. Leases still held are left to expire;
// their Done channels close then. Lock callers still waiting return
// ErrClosed: Close wakes them and waits (at most a few node timeouts) for
// them to undo an attempt that took the key after Close began and to leave
// the masters' queues, passing on a turn that may have been theirs, so
// that the waiters of other Lockers are woken by the next release instead
// of their fallback. A TryLock whose attempt succeeds after Close began
// undoes it too, and returns ErrClosed.
func (l *Locker) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	close(l.done)
	if l.gate != nil {
		l.gate.close()
		l.semGate.close()
	}
	// A waiter may be in an attempt (and its fencing round) or
	// subscribing: each is bounded by a round's span.
	deadline := time.Now().Add(3 * l.pool.MaxRoundSpan())
	for l.remote.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	l.tmu.Lock()
	for tk, resource := range l.tickets {
		if tk.held {
			// A lease still valid leaves the queues, but passes on no
			// turn: its keys hold the resource until they expire, and a
			// waiter woken now would only be refused by them.
			l.leaveQueue(resource, tk, uint64(1)<<l.votes-1, false)
			continue
		}
		l.postQuit(resource, tk)
	}
	l.tickets = nil
	l.tmu.Unlock()
	if l.notify != nil {
		l.notify.shut()
	}
	if l.track != nil {
		l.track.shut()
	}
	l.nodes.close()
	// The pool cuts the connections still waiting on a hung master, the
	// notifier's pub/sub ones too, which lets its goroutines end.
	l.pool.Close()
	if l.notify != nil {
		l.notify.close()
	}
	if l.track != nil {
		l.track.close()
	}
	return nil
}

// validity is how long a lease acquired now is trusted from its
// attempt's start: the TTL less the drift allowance (see drift).
func (l *Locker) validity() time.Duration { return l.validityFor(0) }

// validityFor is validity for a lease whose TTL is ttlMS ms (0:
// Config.TTL).
func (l *Locker) validityFor(ttlMS uint32) time.Duration {
	if ttlMS == 0 {
		if faults.ValidityIgnoresDrift.On() {
			return l.cfg.TTL - DriftFloor
		}
		return l.cfg.TTL - l.drift
	}
	ttl := time.Duration(ttlMS) * time.Millisecond
	return ttl - drift(ttl, l.cfg.DriftFactor)
}

// roundSpan is the longest a round can go on counting votes.
// mono is t as a checkClock reading: nanoseconds since the Locker's
// epoch on the monotonic clock, plus one, so that it is above zero (see
// checkClock).
func (l *Locker) mono(t time.Time) int64 { return int64(t.Sub(l.epoch)) + 1 }

func (l *Locker) roundSpan() time.Duration { return l.pool.MaxRoundSpan() }

// scriptCall is a call of script on key with args, its ARGV in order:
// each script's first line names them, as its constructor's or caller's
// arguments do.
func scriptCall(script *multiplex.Script, key string, args ...string) multiplex.Command {
	c := multiplex.Command{Script: script, Key: key, NArgs: uint8(len(args))}
	copy(c.Args[:], args)
	return c
}

// plainCall is the command name on key with args.
func plainCall(name, key string, args ...string) multiplex.Command {
	c := multiplex.Command{Name: name, Key: key, NArgs: uint8(len(args))}
	copy(c.Args[:], args)
	return c
}

func classifyInt(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
	n, err := res.AsInt64()
	switch {
	case err != nil:
		return multiplex.Failed, 0, err
	case n > 0:
		return multiplex.OK, n, nil
	}
	return multiplex.Refused, n, nil
}

// jitter is a random delay in [lo, hi), from Config.Wait.Rand if set.
func (l *Locker) jitter(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	if l.cfg.Wait.Rand == nil {
		return lo + mrand.N(hi-lo)
	}
	l.randMu.Lock()
	defer l.randMu.Unlock()
	return lo + time.Duration(l.cfg.Wait.Rand.Int64N(int64(hi-lo)))
}

// newValue returns 128 random bits, base64url-encoded (22 bytes).
func newValue() string {
	var b [16]byte
	rand.Read(b[:]) // never fails on Linux (Go 1.24+ crashes instead)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// atLeast compares a "major.minor.patch" version.
func atLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
