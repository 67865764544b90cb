package engines

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Base is a lock implementation: the redlock engine in one of its
// variants, a baseline, or the nolock control.
type Base uint8

// The implementations of --engine. The zero Base is none: DefaultSpec
// sets Redlock.
const (
	// Redlock is package engine, every feature as --gate, --notify,
	// --extend and --fencing set them.
	Redlock Base = iota + 1
	// RedlockPerCommand is the redlock engine with coalescing off: every
	// release, extend and waiter's acquire is its own script call. Beside
	// Redlock it shows what coalescing gains.
	RedlockPerCommand
	// RedlockSequential is the redlock engine taking --lock multi:K as K
	// mutexes one after another, in the order of their names, as a user
	// without TryLockAll would: beside Redlock it shows what one lease on
	// K resources gains. It takes no other lock.
	RedlockSequential
	// RedlockMutex is the redlock engine taking --lock rw:F on its mutex:
	// every operation, read or write, exclusive. Beside Redlock it shows
	// what the read/write lock gains; no baseline has one. It takes no
	// other lock.
	RedlockMutex
	// Nolock is the control: it grants every request at once, without
	// Redis. Under contention two workers hold one resource, so a run
	// with it must report violations; if it does not, the oracle is
	// broken.
	Nolock
	// RedsyncRueidis and RedsyncGoredis are go-redsync over rueidis and
	// over go-redis: Redlock over N masters (redsync.go).
	RedsyncRueidis
	RedsyncGoredis
	// Rueidislock is rueidis's own lock, on one master or one cluster
	// (rueidislock.go).
	Rueidislock
	// BsmRedislock is bsm/redislock, on one master (bsmredislock.go).
	BsmRedislock
)

// bases are the implementations in the order --engine lists them.
var bases = []Base{Redlock, RedlockPerCommand, RedlockSequential, RedlockMutex, Nolock, RedsyncRueidis, RedsyncGoredis, Rueidislock, BsmRedislock}

// String is the implementation's name in --engine.
func (b Base) String() string {
	switch b {
	case Redlock:
		return "redlock"
	case RedlockPerCommand:
		return "redlock-percmd"
	case RedlockSequential:
		return "redlock-sequential"
	case RedlockMutex:
		return "redlock-mutex"
	case Nolock:
		return "nolock"
	case RedsyncRueidis:
		return "redsync-rueidis"
	case RedsyncGoredis:
		return "redsync-goredis"
	case Rueidislock:
		return "rueidislock"
	case BsmRedislock:
		return "bsm-redislock"
	}
	return "Base(" + strconv.Itoa(int(b)) + ")"
}

// Engine is --engine, parsed: an implementation and, for one that votes
// over every master it is given (a quorum engine), how many of the first
// masters it votes on (NAME@N; 0: all of them).
type Engine struct {
	Base Base
	// Votes is N of NAME@N; 0 for all the masters (or, for a
	// single-master baseline, its one).
	Votes int
}

// Names lists the engines Open knows, for --engine.
func Names() []string {
	out := make([]string, len(bases))
	for i, b := range bases {
		out[i] = b.String()
	}
	return out
}

// NamesHelp is Names for a person: the names, and NAME@N.
func NamesHelp() string {
	return strings.Join(Names(), ", ") + "; a quorum engine as NAME@N votes on the first N masters only, e.g. redlock@1"
}

// ErrUnknownEngine is Parse's error for a name that is no engine's.
var ErrUnknownEngine = errors.New("unknown engine")

// Parse reads an engine name: an implementation of Names, or a quorum
// engine's NAME@N (1 <= N <= MaxMasters). Its errors say what is wrong
// without repeating the name.
func Parse(name string) (Engine, error) {
	base, suffix, at := strings.Cut(name, "@")
	var e Engine
	for _, b := range bases {
		if b.String() == base {
			e.Base = b
		}
	}
	switch {
	case e.Base == 0:
		return Engine{}, fmt.Errorf("%w (known: %s)", ErrUnknownEngine, NamesHelp())
	case !at:
		return e, nil
	case e.Base.singleMaster():
		return Engine{}, fmt.Errorf("%s runs on one master, the first, and takes no @N", base)
	case !e.Base.quorum():
		return Engine{}, fmt.Errorf("%s uses no masters and takes no @N", base)
	}
	n, err := strconv.Atoi(suffix)
	if err != nil || n < 1 || n > MaxMasters {
		return Engine{}, fmt.Errorf("the N of %s@N must be a number of masters, 1 to %d", base, MaxMasters)
	}
	e.Votes = n
	return e, nil
}

// MustParse is Parse for names known to be good (tests, defaults); it
// panics on a bad one.
func MustParse(name string) Engine {
	e, err := Parse(name)
	if err != nil {
		panic("engines: " + name + ": " + err.Error())
	}
	return e
}

// ParseList reads a comma-separated list of engine names, each known and
// listed once.
func ParseList(s string) ([]Engine, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("empty list")
	}
	var out []Engine
	seen := map[Engine]bool{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		e, err := Parse(name)
		switch {
		case errors.Is(err, ErrUnknownEngine):
			return nil, fmt.Errorf("unknown engine %q (known: %s)", name, NamesHelp())
		case err != nil:
			return nil, fmt.Errorf("engine %q: %v", name, err)
		case seen[e]:
			return nil, fmt.Errorf("engine %q is listed twice", name)
		}
		seen[e] = true
		out = append(out, e)
	}
	return out, nil
}

// JoinNames writes engines as ParseList reads them.
func JoinNames(es []Engine) string {
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.String()
	}
	return strings.Join(names, ",")
}

// String is the inverse of Parse.
func (e Engine) String() string {
	if e.Votes > 0 && e.Base.quorum() {
		return e.Base.String() + "@" + strconv.Itoa(e.Votes)
	}
	return e.Base.String()
}

// quorum reports whether b votes over every master it is given, so that
// NAME@N can give it fewer.
func (b Base) quorum() bool {
	switch b {
	case Redlock, RedlockPerCommand, RedlockSequential, RedlockMutex, RedsyncRueidis, RedsyncGoredis:
		return true
	}
	return false
}

// singleMaster reports whether b runs on one master, whatever it is
// given.
func (b Base) singleMaster() bool { return b == Rueidislock || b == BsmRedislock }

// IsRedlock reports whether e is the redlock engine, in any variant: its
// features (gate, notify, extend, fencing, node timeout, metrics) apply.
func (e Engine) IsRedlock() bool {
	switch e.Base {
	case Redlock, RedlockPerCommand, RedlockSequential, RedlockMutex:
		return true
	}
	return false
}

// NeedsRedis reports whether e talks to Redis masters.
func (e Engine) NeedsRedis() bool { return e.Base != Nolock }

// SelfExtending reports whether e's leases extend themselves while held,
// whatever --extend says: rueidislock's do.
func (e Engine) SelfExtending() bool { return e.Base == Rueidislock }

// Voters is how many of the first masters e votes on, out of have: N of
// NAME@N, 1 for a single-master baseline, else all of them.
func (e Engine) Voters(have int) int {
	n := e.Votes
	if e.Base.singleMaster() {
		n = 1
	}
	if n > 0 && n < have {
		return n
	}
	return have
}

// FixedVoters is the number of masters e needs at least: N of NAME@N, 1
// for a single-master baseline, 0 when any number will do.
func (e Engine) FixedVoters() int {
	if e.Base.singleMaster() {
		return 1
	}
	return e.Votes
}

// Clusters reports whether e can vote on Redis Clusters: the redlock
// engines, and rueidislock on the first vote, a cluster in its own model.
func (e Engine) Clusters() bool { return e.IsRedlock() || e.Base == Rueidislock }
