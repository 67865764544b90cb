package bench

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
	// (TryLock, Lock); EngineMutex takes every one as its mutex.
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
// It checks the syntax and the ranges; whether the run can use the lock
// (its engine, its resources) is Config.Validate's to say.
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
	return l, l.validate()
}

// validate checks the lock's own ranges.
func (l Lock) validate() error {
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

// labelPart is the lock in a derived label: "" for the mutex, so that the
// labels of runs before --lock stay as they were.
func (l Lock) labelPart() string {
	if l.Kind == LockMutex {
		return ""
	}
	return "-" + strings.ReplaceAll(l.String(), ":", "")
}

// checkEngine says whether engine name can take the lock. Every engine
// takes a mutex and a multi-resource lease (as K mutexes one after another
// when it has no multi-resource lock of its own); only this engine, and
// the nolock control, have a semaphore and a read/write lock: no baseline
// here has either, and we know of no Go one over N independent masters.
// EngineMutex stands in for them with rw:F: our mutex, every operation
// exclusive.
func (l Lock) checkEngine(name string) error {
	base := baseEngine(name)
	ours := IsRedlock(name) || base == "nolock"
	switch {
	case base == EngineSequential && l.Kind != LockMulti:
		return fmt.Errorf("engine %s differs from redlock in multi:K only (K mutexes one after another)", name)
	case base == EngineMutex && l.Kind != LockRW:
		return fmt.Errorf("engine %s differs from redlock in rw:F only (every operation its mutex, reads too)", name)
	case l.Kind == LockSemaphore && !ours:
		return fmt.Errorf("engine %s has no semaphore: only redlock has one over N masters (no baseline here does)", name)
	case l.Kind == LockRW && !ours:
		return fmt.Errorf("engine %s has no read/write lock: only redlock has one over N masters (no baseline here does); "+
			"%s runs the same operations on our mutex, every one exclusive", name, EngineMutex)
	}
	return nil
}

// exclusiveRW reports whether engine name takes rw:F as its mutex, reads
// and writes alike.
func exclusiveRW(name string) bool { return baseEngine(name) == EngineMutex }

// sequentialMulti reports whether engine name takes multi:K as K mutexes
// one after another, in the order of their names.
func sequentialMulti(name string) bool {
	switch baseEngine(name) {
	case "redlock", EnginePerCommand, "nolock":
		return false
	}
	return true
}
