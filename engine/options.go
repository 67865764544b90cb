package engine

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxOwnerLen is the longest owner metadata (WithOwner, Config.Owner) in
// bytes: it travels with every acquire and release of the lease, so it
// stays a label (host, pid, a request or trace id), not a payload.
const MaxOwnerLen = 256

// LockOption changes one acquisition: TryLock, Lock, a Semaphore's
// TryAcquire and Acquire, a RWMutex's TryRLock, TryLock, RLock and Lock.
// Build one with WithTTL or WithOwner; the zero LockOption changes
// nothing. An acquisition without options costs what it did before
// options existed: no allocation, no byte more on the wire.
type LockOption struct {
	ttl      time.Duration
	owner    string
	hasOwner bool
}

// WithTTL sets the lease's lifetime on the masters for this acquisition in
// place of Config.TTL: its validity, its extensions by auto-extension (every
// ExtendEvery scaled by ttl/TTL) and the TTL its keys are set with. It
// must be whole milliseconds, leave validity after the drift allowance,
// be at least twice Config.NodeTimeout and at most Config.MaxTTL (the
// restart quarantine and the fencing counters' expiry are sized by
// MaxTTL); otherwise the acquisition fails with ErrInvalidOption before
// anything is sent.
func WithTTL(ttl time.Duration) LockOption { return LockOption{ttl: ttl} }

// WithOwner attaches owner metadata to this acquisition in place of
// Config.Owner: a short label of who holds the lease ("host=a pid=12
// req=7f3a"), which Locker.Inspect reports next to the lease's value so
// that an operator can tell whose lock is stuck. At most MaxOwnerLen bytes
// of valid UTF-8; the empty string attaches none. It is stored in the
// lease's value on the masters (see Lease.Value), so it lives and expires
// with the lease and costs no extra key or command.
func WithOwner(meta string) LockOption { return LockOption{owner: meta, hasOwner: true} }

// acquireOpts is what an acquisition's options resolve to. The zero
// value is the Locker's defaults, with no owner metadata.
type acquireOpts struct {
	ttlMS  uint32 // the TTL in ms; 0: Config.TTL
	suffix string // encoded owner suffix of the value (ownerSep + meta)
}

// ownerSep separates a lease value's random part from its owner
// metadata. Lease values are base64url (and a queued waiter's id, which
// ends with idEnd), so the first ownerSep starts the metadata.
const ownerSep = "|"

// resolve turns opts into the acquisition's settings for op on resource;
// with no options it returns the Locker's defaults without allocating.
func (l *Locker) resolve(op, resource string, opts []LockOption) (acquireOpts, error) {
	o := acquireOpts{suffix: l.ownerSuffix}
	for _, opt := range opts {
		switch {
		case opt.hasOwner:
			if err := checkOwner(opt.owner); err != nil {
				return acquireOpts{}, errorf("%s %q: %v: WithOwner: %v", op, resource, ErrInvalidOption, err)
			}
			o.suffix = encodeOwner(opt.owner)
		case opt.ttl != 0:
			if err := l.checkTTL(opt.ttl); err != nil {
				return acquireOpts{}, errorf("%s %q: %v: WithTTL(%s): %v", op, resource, ErrInvalidOption, opt.ttl, err)
			}
			o.ttlMS = uint32(opt.ttl.Milliseconds())
			if opt.ttl == l.cfg.TTL {
				o.ttlMS = 0
			}
		}
	}
	return o, nil
}

// isDefault: o is the Locker's defaults, which a lease handed on at the
// in-process gate keeps (see Lock).
func (l *Locker) isDefault(o acquireOpts) bool { return o.ttlMS == 0 && o.suffix == l.ownerSuffix }

// checkTTL says why ttl cannot be a lease's TTL on this Locker.
func (l *Locker) checkTTL(ttl time.Duration) error {
	switch {
	case ttl <= 0:
		return fmt.Errorf("must be > 0")
	case ttl%time.Millisecond != 0:
		return fmt.Errorf("must be whole milliseconds (PX)")
	case ttl.Milliseconds() > math.MaxUint32:
		return fmt.Errorf("above %d ms", uint32(math.MaxUint32))
	case ttl > l.cfg.MaxTTL:
		return fmt.Errorf("above Config.MaxTTL (%s)", l.cfg.MaxTTL)
	case l.cfg.NodeTimeout >= ttl/2:
		return fmt.Errorf("must be more than twice Config.NodeTimeout (%s)", l.cfg.NodeTimeout)
	case drift(ttl, l.cfg.DriftFactor) >= ttl:
		return fmt.Errorf("leaves no validity after drift (%s)", drift(ttl, l.cfg.DriftFactor))
	}
	return nil
}

// checkOwner says why meta cannot be owner metadata.
func checkOwner(meta string) error {
	switch {
	case len(meta) > MaxOwnerLen:
		return fmt.Errorf("%d bytes, at most %d (MaxOwnerLen)", len(meta), MaxOwnerLen)
	case !utf8.ValidString(meta):
		return fmt.Errorf("not valid UTF-8")
	}
	return nil
}

// encodeOwner is meta as the suffix of a lease value: ownerSep, then meta
// with the bytes the scripts give a meaning to in a value escaped as %XX:
// idEnd (a queued waiter's id ends there), waitMark (a marked value ends
// with it), turnPrefix, ownerSep, '%' itself, and control bytes. The
// empty metadata is no suffix at all.
func encodeOwner(meta string) string {
	if meta == "" {
		return ""
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(ownerSep) + len(meta))
	b.WriteString(ownerSep)
	for i := 0; i < len(meta); i++ {
		c := meta[i]
		if ownerEscaped(c) {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

func ownerEscaped(c byte) bool {
	return c < 0x20 || c == 0x7f || c == '%' || c == idEnd[0] || c == waitMark[0] || c == turnPrefix[0] || c == ownerSep[0]
}

// splitValue splits a lease value as stored (a wait mark at its end is
// dropped) into the value Lease.Value returns and the owner metadata it
// carries, decoded.
func splitValue(v string) (value, owner string) {
	v = strings.TrimSuffix(v, waitMark)
	i := strings.Index(v, ownerSep)
	if i < 0 {
		return v, ""
	}
	return v, decodeOwner(v[i+len(ownerSep):])
}

// decodeOwner undoes encodeOwner's escapes (without the separator).
func decodeOwner(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if hi, lo := unhex(s[i+1]), unhex(s[i+2]); hi >= 0 && lo >= 0 {
				b.WriteByte(byte(hi<<4 | lo))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// OwnerOf is the owner metadata a lease value carries (see WithOwner):
// what Locker.Inspect reports as a holder's Owner, for a value obtained
// elsewhere (Lease.Value, a log line).
func OwnerOf(value string) string {
	_, owner := splitValue(value)
	return owner
}
