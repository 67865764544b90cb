package multiplex_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/quarantine"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/multiplex"
)

// exampleMasters is set by TestMain: Example functions cannot start
// servers through a testing.T.
var exampleMasters []string

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	c, err := redistest.Start(ctx, 3, redistest.Options{})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	exampleMasters = c.Addrs()
	code := m.Run()
	c.Stop()
	os.Exit(code)
}

// A quorum write: SET NX on three independent masters at once, decided by
// a majority of the votes. The classifier says what a reply means; the
// pool knows nothing of locks.
func Example() {
	ctx := context.Background()
	pool, err := multiplex.Dial(ctx, multiplex.Options{
		Addrs: exampleMasters,
		// These masters were started a moment ago by the test. With the
		// default, quarantine.Always, a master younger than MaxTTL is kept
		// out of the vote until it is MaxTTL old.
		Quarantine: quarantine.Observed,
		MaxTTL:     10 * time.Second,
		// WaitAll below waits for every master up to the node timeout:
		// far past a round trip here, so that a busy host cannot turn a
		// slow yes into a timeout and change the counts printed.
		NodeTimeout: 30 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	setNX := func(res rueidis.RedisResult) (multiplex.Outcome, int64, error) {
		switch err := res.Error(); {
		case err == nil:
			return multiplex.OK, 0, nil
		case rueidis.IsRedisNil(err): // the key exists: declined
			return multiplex.Refused, 0, nil
		default:
			return multiplex.Failed, 0, err
		}
	}
	cmd := multiplex.Command{Name: "SET", Key: "example:owner", NArgs: 4}
	cmd.Args[0], cmd.Args[1], cmd.Args[2], cmd.Args[3] = "alice", "NX", "PX", "10000"
	// WaitAll waits for every master (within the node timeout) instead of
	// returning at quorum, so that the counts below are complete.
	cmd.WaitAll = true

	t := pool.Fanout(ctx, cmd, setNX, nil, nil)
	fmt.Printf("alice: quorum %v, %d ok of %d\n", t.Reached(), t.OK, len(t.Votes))

	cmd.Args[0] = "bob"
	t = pool.Fanout(ctx, cmd, setNX, nil, nil)
	fmt.Printf("bob: quorum %v, %d refused\n", t.Reached(), t.Refused)
	// Output:
	// alice: quorum true, 3 ok of 3
	// bob: quorum false, 3 refused
}
