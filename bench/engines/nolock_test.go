package engines

import (
	"errors"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// The control's read/write lock is wrong by exactly one: a writer comes in
// beside one reader, never beside two nor beside a writer, and readers
// share with readers but not with a writer.
func TestNolockRWAdmitsAWriterBesideOneReader(t *testing.T) {
	ctx := t.Context()
	rw := newNolock(time.Second).rwLocks()
	take := func(read bool) Lease {
		t.Helper()
		le, err := rw.tryLock(ctx, "a", read)
		if err != nil {
			t.Fatalf("read %v: %v", read, err)
		}
		return le
	}
	refused := func(read bool, why string) {
		t.Helper()
		if _, err := rw.tryLock(ctx, "a", read); !errors.Is(err, engine.ErrNotAcquired) {
			t.Errorf("read %v %s: %v, want ErrNotAcquired", read, why, err)
		}
	}
	r1 := take(true)
	w := take(false) // the breach: a writer beside one reader
	refused(true, "beside a writer")
	refused(false, "beside a writer")
	w.Release(ctx)
	r2 := take(true)
	refused(false, "beside two readers")
	r1.Release(ctx)
	r1.Release(ctx) // a second release takes nothing more off
	w = take(false)
	w.Release(ctx)
	r2.Release(ctx)
	w = take(false)
	refused(false, "beside a writer, with no reader")
	w.Release(ctx)
}
