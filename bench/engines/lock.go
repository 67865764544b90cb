package engines

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redlock-bench/redlock/engine"
)

// LockKind is the member of the lock family that each operation takes.
type LockKind uint8

// The lock kinds of --lock.
const (
	// LockMutex is a lock of one resource: TryLock or Lock.
	LockMutex LockKind = iota
	// LockSemaphore is a permit of the resource's semaphore of Permits
	// permits: TryAcquire or Acquire.
	LockSemaphore
	// LockMulti is one lease on K distinct resources: TryLockAll or
	// LockAll, or K mutexes one after another for an engine without it.
	LockMulti
	// LockRW is a read/write lock of the resource, each operation a read
	// (TryRLock, RLock) with probability ReadFraction, else a write
	// (TryLock, Lock); RedlockMutex takes every one as its mutex.
	LockRW
)

// Lock is what each operation takes (--lock): mutex, semaphore:P,
// multi:K, or rw:F.
type Lock struct {
	Kind LockKind
	// Permits is a semaphore's permit count, P of semaphore:P.
	Permits int
	// K is how many distinct resources a multi-resource lease takes.
	K int
	// ReadFraction is the share of a read/write lock's operations that
	// read, F of rw:F, in [0, 1].
	ReadFraction float64
}

// lockSyntax is what ParseLock accepts, for its errors.
const lockSyntax = "want mutex, semaphore:P (P permits), multi:K (K resources per lease) or rw:F (F the share of reads)"

// ParseLock parses --lock: "mutex", "semaphore:P", "multi:K" or "rw:F".
// It checks the syntax and the ranges; whether an engine has the lock is
// Spec.Validate's to say.
func ParseLock(s string) (Lock, error) {
	kind, arg, hasArg := strings.Cut(s, ":")
	var l Lock
	switch kind {
	case "mutex":
		if hasArg {
			return Lock{}, errors.New("mutex takes no :N (" + lockSyntax + ")")
		}
		return l, nil
	case "semaphore", "multi":
		n, err := strconv.Atoi(arg)
		if !hasArg || err != nil {
			return Lock{}, fmt.Errorf("%s needs a whole number after the colon (%s)", kind, lockSyntax)
		}
		l = Lock{Kind: LockSemaphore, Permits: n}
		if kind == "multi" {
			l = Lock{Kind: LockMulti, K: n}
		}
	case "rw":
		f, err := strconv.ParseFloat(arg, 64)
		if !hasArg || err != nil {
			return Lock{}, fmt.Errorf("rw needs the share of reads after the colon, a number from 0 to 1 (%s)", lockSyntax)
		}
		l = Lock{Kind: LockRW, ReadFraction: f}
	default:
		return Lock{}, fmt.Errorf("unknown lock %q (%s)", kind, lockSyntax)
	}
	return l, l.Check()
}

// Check checks the lock's own ranges.
func (l Lock) Check() error {
	switch l.Kind {
	case LockMutex:
	case LockSemaphore:
		if l.Permits < 1 || l.Permits > engine.MaxPermits {
			return fmt.Errorf("the permits P of semaphore:P must be 1 to %d", engine.MaxPermits)
		}
	case LockMulti:
		if l.K < 1 || l.K > engine.MaxResources {
			return fmt.Errorf("the resources K of multi:K must be 1 to %d", engine.MaxResources)
		}
	case LockRW:
		if !(l.ReadFraction >= 0 && l.ReadFraction <= 1) {
			return errors.New("the share of reads F of rw:F must be 0 to 1")
		}
	default:
		return errors.New("unknown lock kind")
	}
	return nil
}

// String is the inverse of ParseLock.
func (l Lock) String() string {
	switch l.Kind {
	case LockSemaphore:
		return "semaphore:" + strconv.Itoa(l.Permits)
	case LockMulti:
		return "multi:" + strconv.Itoa(l.K)
	case LockRW:
		return "rw:" + strconv.FormatFloat(l.ReadFraction, 'g', -1, 64)
	}
	return "mutex"
}

// The shape of an operation, for the drivers, which need no switch over
// the kinds: how many resources it takes, how often it reads, and how
// many may hold a resource at once.

// Size is how many distinct resources one operation takes: K of multi:K,
// else 1.
func (l Lock) Size() int { return max(l.K, 1) }

// Reads is the share of operations that read: F of rw:F, else 0.
func (l Lock) Reads() float64 { return l.ReadFraction }

// Holders is how many may hold a resource at once, P of semaphore:P,
// each in a permit slot of its own; 0 for the locks whose holds exclude
// one another (but the reads of rw:F, which share theirs).
func (l Lock) Holders() int { return l.Permits }

// Takes says whether engine e can take the lock. Every engine takes a
// mutex and a multi-resource lease (as K mutexes one after another when it
// has no multi-resource lock of its own); only the redlock engine, and
// the nolock control, have a semaphore and a read/write lock: no baseline
// here has either, and we know of no Go one over N independent masters.
// RedlockMutex stands in for them with rw:F: our mutex, every operation
// exclusive.
func (l Lock) Takes(e Engine) error {
	ours := e.IsRedlock() || e.Base == Nolock
	switch {
	case e.Base == RedlockSequential && l.Kind != LockMulti:
		return fmt.Errorf("engine %s differs from redlock in multi:K only (K mutexes one after another)", e)
	case e.Base == RedlockMutex && l.Kind != LockRW:
		return fmt.Errorf("engine %s differs from redlock in rw:F only (every operation its mutex, reads too)", e)
	case l.Kind == LockSemaphore && !ours:
		return fmt.Errorf("engine %s has no semaphore: only redlock has one over N masters (no baseline here does)", e)
	case l.Kind == LockRW && !ours:
		return fmt.Errorf("engine %s has no read/write lock: only redlock has one over N masters (no baseline here does); "+
			"%s runs the same operations on our mutex, every one exclusive", e, RedlockMutex)
	}
	return nil
}

// Shared reports whether e holds a read of the lock shared: a read/write
// lock's read, except RedlockMutex's, which takes every operation on its
// mutex.
func (l Lock) Shared(e Engine) bool { return l.Kind == LockRW && e.Base != RedlockMutex }

// Sequential reports whether e takes multi:K as K mutexes one after
// another, in the order of their names.
func (e Engine) Sequential() bool {
	switch e.Base {
	case Redlock, RedlockPerCommand, Nolock:
		return false
	}
	return true
}

// CheckHandles says whether clients clients can each keep a handle per
// resource of resources, as the engine asks of semaphores and read/write
// locks (a handle checks the permit count, or marks the name, now and
// then rather than at every attempt). Its error is a *ConfigError of
// --lock.
func (l Lock) CheckHandles(e Engine, resources, clients int) error {
	switch {
	case l.Kind == LockSemaphore && int64(resources)*int64(clients)*int64(l.Permits+4) > MaxSemaphoreSlots:
		return flagErr("lock", l, "--resources × --clients × (P+4) must be at most %d (each client keeps a handle per semaphore, about 50 bytes per permit and 200 more)", MaxSemaphoreSlots)
	case l.Shared(e) && int64(resources)*int64(clients) > MaxRWHandles:
		return flagErr("lock", l, "--resources × --clients must be at most %d (each client keeps a handle per read/write lock, about 220 bytes)", MaxRWHandles)
	case l.Kind == LockMulti && l.K > resources:
		return flagErr("lock", l, "a lease on K distinct resources needs K <= --resources (%d)", resources)
	}
	return nil
}

// Limits of what a lock client keeps, checked before anything starts.
// The memory limits come from the bytes allocated for 10,000 handles.
const (
	// MaxMasters bounds the votes of every engine, as the redlock engine
	// bounds its own: a local master is a redis-server process.
	MaxMasters = engine.MaxMasters
	// MaxSemaphoreSlots bounds resources × clients × (P+4) with
	// semaphore:P: each client keeps a handle per semaphore it uses, which
	// holds a key name per permit: about 50 bytes per permit and 200 per
	// handle (263 bytes at P=1, 599 at 8, 3,415 at 64), so that this many
	// take about 0.4 GB whatever P.
	MaxSemaphoreSlots = 8_000_000
	// MaxRWHandles bounds resources × clients with rw:F: each client keeps
	// a handle per read/write lock it uses, 222 bytes with its slot, so
	// that this many take about 0.4 GB, as MaxSemaphoreSlots do.
	MaxRWHandles = 2_000_000
)
