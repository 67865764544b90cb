package main

import (
	"slices"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// settleLimit bounds the wait for the masters' last replies before exit.
const settleLimit = 2 * time.Second

// answered is how many replies each master has given l so far.
func answered(l *engine.Locker) []int64 {
	ns := l.Nodes()
	out := make([]int64, len(ns))
	for i, n := range ns {
		out[i] = n.OK + n.Refused + n.Failed
	}
	return out
}

// settle waits, before l is closed, for replies still on their way: the
// engine deletes a failed attempt's key where a reply comes late, and
// Locker.Close drops what is posted once it has begun, which would leave a
// key on that master until its TTL ends. It returns once every master has
// given want more replies than at base, or once no reply came for a while
// (replies to an unknown number of commands), or after settleLimit.
func settle(l *engine.Locker, base []int64, want int64) {
	quiet := min(max(2*l.Config().NodeTimeout, 20*time.Millisecond), 200*time.Millisecond)
	deadline := time.Now().Add(settleLimit)
	last, changed := answered(l), time.Now()
	for {
		cur := answered(l)
		if !slices.Equal(cur, last) {
			last, changed = cur, time.Now()
		}
		all := want > 0
		for i := range cur {
			all = all && i < len(base) && cur[i] >= base[i]+want
		}
		if all || time.Since(changed) >= quiet || time.Now().After(deadline) {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}
