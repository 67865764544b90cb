package sim

import (
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/simredis"
)

// A RemoteValidity that reports lost a lease which a quorum held
// throughout its call is caught, as is one that vouches past the keys'
// expiry on a quorum; a loss while the keys were gone from a quorum, and
// an answer the keys outlive, are not.
func TestCheckRemoteValidity(t *testing.T) {
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	set := func(m int, when, until time.Duration) simredis.KeyRecord {
		return simredis.KeyRecord{At: when, Master: m, Key: "r", Value: "v", ExpireAt: start.Add(until), Cause: "EVALSHA"}
	}
	g := Grant{ID: 0, Resource: "r", Value: "v", Granted: ms(10), End: ms(900)}
	ask := func(result string, left time.Duration) Event {
		return Event{Op: "remotevalidity", Resource: "r", Grant: 0, Called: ms(100), At: ms(102), Result: result, Left: left}
	}
	all := spansOf(start, 3, set(0, ms(5), ms(1005)), set(1, ms(5), ms(1005)), set(2, ms(5), ms(600)))
	if got := CheckRemoteValidity([]Event{ask("lost", 0)}, []Grant{g}, all, 2); len(got) != 1 {
		t.Fatalf("reported lost while every master held it: violations %v, want one", got)
	}
	if got := CheckRemoteValidity([]Event{ask("ok", ms(800))}, []Grant{g}, all, 2); len(got) != 0 {
		t.Fatalf("vouched until 900ms, the keys on two masters until 1005ms: %v", got)
	}
	// Masters 1 and 2's keys expire at 600ms: vouching to 900ms is too
	// long, unless the holder released at 500ms.
	short := spansOf(start, 3, set(0, ms(5), ms(1005)), set(1, ms(5), ms(600)), set(2, ms(5), ms(600)))
	if got := CheckRemoteValidity([]Event{ask("ok", ms(800))}, []Grant{g}, short, 2); len(got) != 1 || got[0].At != ms(600) {
		t.Fatalf("vouched until 900ms, the keys on one master from 600ms: violations %v, want one at 600ms", got)
	}
	released := Event{Op: "release", Grant: 0, Called: ms(500), At: ms(502), Result: "ok"}
	if got := CheckRemoteValidity([]Event{ask("ok", ms(800)), released}, []Grant{g}, short, 2); len(got) != 0 {
		t.Fatalf("the holder released before the keys expired: %v", got)
	}
	// Master 1's key gone at 50ms: one holder left, the loss is true.
	gone := spansOf(start, 3, set(0, ms(5), ms(1005)), set(1, ms(5), ms(50)), set(2, ms(5), ms(50)))
	if got := CheckRemoteValidity([]Event{ask("lost", 0)}, []Grant{g}, gone, 2); len(got) != 0 {
		t.Fatalf("reported lost with the keys on one master of three: %v", got)
	}
	// A read/write lease: its entry live on every master.
	w := rwLease(0, "write", ms(10), ms(900))
	entry := func(m int) simredis.KeyRecord {
		return rwRecord(start, "rw0", m, ms(5), map[string]time.Duration{"v0": -ms(1005)})
	}
	rw := spansOf(start, 3, entry(0), entry(1), entry(2))
	lost := Event{Op: "remotevalidity", Resource: "rw0", Grant: 0, Called: ms(100), At: ms(102), Result: "lost"}
	if got := CheckRemoteValidity([]Event{lost}, []Grant{w}, rw, 2); len(got) != 1 {
		t.Fatalf("a writer whose entry every master held reported lost: violations %v, want one", got)
	}
}
