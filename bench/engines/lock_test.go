package engines

import (
	"strings"
	"testing"
)

func TestParseLock(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Lock
		err  string
	}{
		{"mutex", Lock{}, ""},
		{"semaphore:1", Lock{Kind: LockSemaphore, Permits: 1}, ""},
		{"semaphore:1024", Lock{Kind: LockSemaphore, Permits: 1024}, ""},
		{"multi:3", Lock{Kind: LockMulti, K: 3}, ""},
		{"multi:64", Lock{Kind: LockMulti, K: 64}, ""},
		{"rw:0.9", Lock{Kind: LockRW, ReadFraction: 0.9}, ""},
		{"rw:0", Lock{Kind: LockRW}, ""},
		{"semaphore:0", Lock{}, "the permits P of semaphore:P must be 1 to 1024"},
		{"semaphore:1025", Lock{}, "the permits P of semaphore:P must be 1 to 1024"},
		{"semaphore:-2", Lock{}, "the permits P of semaphore:P must be 1 to 1024"},
		{"semaphore", Lock{}, "semaphore needs a whole number after the colon"},
		{"semaphore:x", Lock{}, "semaphore needs a whole number after the colon"},
		{"multi:0", Lock{}, "the resources K of multi:K must be 1 to 64"},
		{"multi:65", Lock{}, "the resources K of multi:K must be 1 to 64"},
		{"multi:2.5", Lock{}, "multi needs a whole number after the colon"},
		{"rw:1.5", Lock{}, "the share of reads F of rw:F must be 0 to 1"},
		{"rw:NaN", Lock{}, "the share of reads F of rw:F must be 0 to 1"},
		{"rw", Lock{}, "rw needs the share of reads after the colon"},
		{"mutex:2", Lock{}, "mutex takes no :N"},
		{"", Lock{}, `unknown lock ""`},
		{"sem:3", Lock{}, `unknown lock "sem"`},
	} {
		got, err := ParseLock(c.in)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%q: %+v, %v; want %+v", c.in, got, err, c.want)
		case c.err != "" && (err == nil || !strings.HasPrefix(err.Error(), c.err)):
			t.Errorf("%q: error %v, want one starting %q", c.in, err, c.err)
		case c.err == "" && got.String() != c.in:
			t.Errorf("%q: String() %q", c.in, got.String())
		}
	}
}
