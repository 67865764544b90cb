package engines

import (
	"context"
	"errors"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// releaseGrace bounds the undo of a sequential lease's parts once its
// caller's context has ended.
const releaseGrace = 3 * time.Second

// sequential takes a multi-resource lease as K mutexes of its engine, one
// after another in the order named (sorted: so that two waiting for
// overlapping sets cannot deadlock), as a user without a multi-resource
// lock does. A failure releases what it took, newest first.
type sequential struct{ m mutexes }

func (s sequential) TryLockAll(ctx context.Context, names ...string) (Lease, error) {
	return s.all(ctx, names, s.m.TryLock)
}

func (s sequential) LockAll(ctx context.Context, names ...string) (Lease, error) {
	return s.all(ctx, names, s.m.Lock)
}

func (s sequential) all(ctx context.Context, names []string, lock func(context.Context, string) (Lease, error)) (Lease, error) {
	parts := make([]Lease, 0, len(names))
	for _, n := range names {
		le, err := lock(ctx, n)
		if err != nil {
			// The undo must run even when the caller is stopping: a part
			// left held would be contention for a TTL.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseGrace)
			(&partsLease{parts: parts}).Release(rctx)
			cancel()
			return nil, err
		}
		parts = append(parts, le)
	}
	return &partsLease{parts: parts}, nil
}

// partsLease is sequential's lease: one lease per resource.
type partsLease struct{ parts []Lease }

func (l *partsLease) part(i int) Lease { return l.parts[i] }

// ValidUntil is the earliest of the parts': the lease is whole until then.
func (l *partsLease) ValidUntil() time.Time {
	var u time.Time
	for i, p := range l.parts {
		if v := p.ValidUntil(); i == 0 || v.Before(u) {
			u = v
		}
	}
	return u
}

// Release releases the parts newest first, one after another, as a user
// unwinding nested locks does.
func (l *partsLease) Release(ctx context.Context) error {
	var errs []error
	for i := len(l.parts) - 1; i >= 0; i-- {
		if err := l.parts[i].Release(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// The Detailed methods sum or join what the parts that have them say;
// parts of a baseline say nothing.

func (l *partsLease) Wait() engine.WaitInfo {
	var w engine.WaitInfo
	for _, p := range l.parts {
		if dl, ok := p.(Detailed); ok {
			pw := dl.Wait()
			w.Attempts += pw.Attempts
			w.Notified += pw.Notified
			w.Fallbacks += pw.Fallbacks
			w.Backoffs += pw.Backoffs
			w.Gated = w.Gated || pw.Gated
			w.Cause = pw.Cause
			w.Waited += pw.Waited
		}
	}
	return w
}

// Token is 0: each part has its own, which an oracle checks per resource.
func (l *partsLease) Token() int64 { return 0 }

func (l *partsLease) Extensions() int {
	n := 0
	for _, p := range l.parts {
		if dl, ok := p.(Detailed); ok {
			n += dl.Extensions()
		}
	}
	return n
}

func (l *partsLease) Err() error {
	for _, p := range l.parts {
		if dl, ok := p.(Detailed); ok && dl.Err() != nil {
			return dl.Err()
		}
	}
	return nil
}
