package multiplex

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/quarantine"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// orderedReplies keeps the values of the replies in the order they came.
type orderedReplies struct {
	mu     sync.Mutex
	values []int64
}

func (o *orderedReplies) Late(_ int, v Vote) {
	o.mu.Lock()
	o.values = append(o.values, v.Value)
	o.mu.Unlock()
}

func (o *orderedReplies) got() []int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.values)
}

// The flush policy: a node has at most nodeWorkers batches in flight (one
// by default). While they are out, what is submitted stays queued, and
// leaves as one batch when a worker is back. The master is paused so that
// the batches in flight cannot come back while the queue is looked at.
func TestBatchesInFlightPerNode(t *testing.T) {
	incr := NewScript(`return redis.call("INCR", KEYS[1])`)
	classify := func(res rueidis.RedisResult) (Outcome, int64, error) {
		n, err := res.AsInt64()
		if err != nil {
			return Failed, 0, err
		}
		return OK, n, nil
	}
	for _, tc := range []struct {
		name    string
		workers int // Options.nodeWorkers
		want    int // batches in flight
	}{
		{"default", 0, 1},
		{"two", 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := redistest.StartT(t, 1)
			p, err := Dial(context.Background(), Options{Addrs: c.Addrs(), Quarantine: quarantine.Off,
				NodeTimeout: time.Minute, Scripts: []*Script{incr}, nodeWorkers: tc.workers})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			node := p.nodes[0]
			queued := func() (tasks int, workers int32) {
				node.qmu.Lock()
				defer node.qmu.Unlock()
				return len(node.queue), node.workers
			}
			replies := &orderedReplies{}
			post := func() { p.Post(Command{Script: incr, Key: "batch"}, classify, replies) }
			if err := c.Nodes[0].Pause(); err != nil {
				t.Fatal(err)
			}
			defer c.Nodes[0].Resume()
			// Each of the first commands finds the queue empty and a worker
			// free: it leaves alone, and its worker waits on the master.
			for i := 0; i < tc.want; i++ {
				post()
				deadline := time.Now().Add(30 * time.Second)
				for n, _ := queued(); n > 0; n, _ = queued() {
					if time.Now().After(deadline) {
						t.Fatalf("command %d still queued: no free worker took it", i+1)
					}
					time.Sleep(time.Millisecond)
				}
			}
			const more = 20
			for i := 0; i < more; i++ {
				post()
			}
			// Nothing may take them while the batches are out; a worker
			// that would would have within this pause.
			time.Sleep(50 * time.Millisecond)
			if n, w := queued(); n != more || w != int32(tc.want) {
				t.Fatalf("with %d batches out: %d commands queued by %d workers, want %d queued by %d", tc.want, n, w, more, tc.want)
			}
			if err := c.Nodes[0].Resume(); err != nil {
				t.Fatal(err)
			}
			total := tc.want + more
			deadline := time.Now().Add(30 * time.Second)
			for len(replies.got()) < total {
				if time.Now().After(deadline) {
					t.Fatalf("%d replies of %d after the resume", len(replies.got()), total)
				}
				time.Sleep(time.Millisecond)
			}
			// One connection keeps the commands in order: the queued ones
			// ran after every one in flight, left together and came back
			// in order, and none was lost or doubled.
			got := replies.got()
			var queuedOnes []int64
			for _, v := range got {
				if v > int64(tc.want) {
					queuedOnes = append(queuedOnes, v)
				}
			}
			sorted := slices.Sorted(slices.Values(got))
			for i, v := range sorted {
				if v != int64(i+1) || len(queuedOnes) != more || !slices.IsSorted(queuedOnes) {
					t.Fatalf("replies %v: want 1..%d, the last %d in order", got, total, more)
				}
			}
			if n, _ := queued(); n != 0 {
				t.Fatalf("%d commands left queued", n)
			}
		})
	}
}
