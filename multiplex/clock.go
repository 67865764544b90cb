package multiplex

import (
	"slices"
	"time"
)

// clockReading is a node's wall clock minus this process's, as a reading
// (or the median of several) found it: the true offset, when it was
// read, is within err of off. A reading is taken against the middle of a
// round trip within which the server read its clock, so err is half the
// round trip (see serverInfo.measureClock).
type clockReading struct {
	off, err time.Duration
}

// medianClock is the median of the readings, as a reading: the median
// of the true offsets lies between the median of the readings' lowest
// possible offsets and that of their highest (a median never falls when
// one of its values rises), so an uncertain reading widens it only as
// far as it could move it. False when there are none.
func medianClock(rs []clockReading) (clockReading, bool) {
	if len(rs) == 0 {
		return clockReading{}, false
	}
	lo := make([]time.Duration, len(rs))
	hi := make([]time.Duration, len(rs))
	for i, r := range rs {
		lo[i], hi[i] = r.off-r.err, r.off+r.err
	}
	l, h := median(lo), median(hi)
	off := l + (h-l)/2
	return clockReading{off: off, err: h - off}, true
}

// median sorts xs, not empty, and returns their median.
func median(xs []time.Duration) time.Duration {
	slices.Sort(xs)
	m := xs[len(xs)/2]
	if len(xs)%2 == 0 {
		m = xs[len(xs)/2-1] + (m-xs[len(xs)/2-1])/2
	}
	return m
}

// apart is how far r is from ref, and whether that is provably bound or
// more: whether it stays so with both readings off by all their
// uncertainty the other way. A clock read through a slow round trip is
// so never refused for what its reading cannot tell.
func (r clockReading) apart(ref clockReading, bound time.Duration) (d time.Duration, beyond bool) {
	d = r.off - ref.off
	if faults.ClockErrorIgnored.On() {
		return d, max(d, -d) >= bound
	}
	return d, max(d, -d)-r.err-ref.err >= bound
}
