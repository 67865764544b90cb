package engine

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestRWReaderThatOutlivesItsFlightsMarkTriesItself's schedule, with the
// hazard placed where no fallback can hide it: the flight's mark (its
// maker asked 5 s: it lives 5 s + 5 s) is gone 10 s after the attempt,
// and the writer lets go 12 s after the flight landed, before the
// reader's earliest fallback retry (its fallback is 30 s, its sleep at
// least half that). A reader that took the flight's refusal sleeps past
// the release, which took no mark and published nothing, for 3 s or
// more; one that made its own attempt (its mark lives 30 s + 30 s) is
// woken by it. The original test releases at 25 s, inside the reader's
// fallback spread (15 s to 30 s after landing): a reader that took the
// refusal retries first, marks, and is woken, for most draws of the
// jitter, so that test passes without the check more often than not.
func TestRWReaderThatOutlivesItsFlightsMarkTriesItselfBeforeItsFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newFlightEnv(t, 5*time.Second)
		got := e.readers(t, 1)
		e.land(e.attempt(t, true))
		time.Sleep(12 * time.Second) // the flight's mark has expired; no fallback yet
		released := time.Now()
		if err := e.writer.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		acquired(t, got, 1, released)
	})
}
