package multiplex_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/quarantine"

	"github.com/redis/rueidis"
	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/multiplex"
)

// A mixed batch: two coalesced scripts, one taking one or two arguments,
// and plain commands, all queued for one worker at once. Every round must
// get its own key's reply, whatever the calls its command shared.
func TestCoalescedMixedBatch(t *testing.T) {
	// add answers the key's new value after adding ARGV[2] (1 without it)
	// to ARGV[1]; echo answers its argument, or fails on a key named "bad".
	add := multiplex.NewScript(`return redis.call("INCRBY", KEYS[1], ARGV[1] + (ARGV[2] or 1))`).Coalesce()
	echo := multiplex.NewScript(`if KEYS[1] == "bad" then return redis.call("GET", KEYS[1]) end
return KEYS[1] .. "=" .. ARGV[1]`).Coalesce()
	c := redistest.StartT(t, 1)
	if _, err := redistest.Do(c.Nodes[0].Addr(), 10*time.Second, "HSET", "bad", "f", "1"); err != nil {
		t.Fatal(err)
	}
	p, err := multiplex.Dial(context.Background(), multiplex.Options{Addrs: c.Addrs(), Quarantine: quarantine.Off,
		NodeTimeout: patientTimeout, Scripts: []*multiplex.Script{add, echo}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const n = 900
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			k := "k" + strconv.Itoa(i)
			var cmd multiplex.Command
			var want string
			switch i % 4 {
			case 0: // add 1: the key's own argument
				cmd = multiplex.Command{Script: add, Key: k, Args: [multiplex.MaxArgs]string{strconv.Itoa(i)}, NArgs: 1}
				want = strconv.Itoa(i + 1)
			case 1: // add with two arguments
				cmd = multiplex.Command{Script: add, Key: k, Args: [multiplex.MaxArgs]string{strconv.Itoa(i), "10"}, NArgs: 2}
				want = strconv.Itoa(i + 10)
			case 2:
				cmd = multiplex.Command{Script: echo, Key: k, Args: [multiplex.MaxArgs]string{"v" + strconv.Itoa(i)}, NArgs: 1}
				want = k + "=v" + strconv.Itoa(i)
				if i%100 == 2 {
					cmd.Key, want = "bad", "WRONGTYPE"
				}
			case 3:
				cmd = multiplex.Command{Name: "SET", Key: k, Args: [multiplex.MaxArgs]string{"s", "GET"}, NArgs: 2}
				want = "nil"
			}
			var got string
			p.Fanout(context.Background(), cmd, func(r rueidis.RedisResult) (multiplex.Outcome, int64, error) {
				m, err := r.ToMessage()
				switch {
				case rueidis.IsRedisNil(err):
					got = "nil"
				case err != nil:
					got = err.Error()
				case m.IsInt64():
					v, _ := m.ToInt64()
					got = strconv.FormatInt(v, 10)
				default:
					got, _ = m.ToString()
				}
				return multiplex.OK, 0, nil
			}, nil, nil)
			if !strings.HasPrefix(got, want) {
				errs <- fmt.Errorf("command %d (%s %s): got %q, want %q", i, cmd.Name, cmd.Key, got, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	cl := directClient(t, c.Addrs()[0])
	stats, err := cl.Do(context.Background(), cl.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(stats, "cmdstat_evalsha:calls=")
	calls, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
	t.Logf("%d EVALSHA for %d script commands", calls, n*3/4)
	if calls >= n*3/4 {
		t.Errorf("%d EVALSHA for %d script commands: nothing was coalesced", calls, n*3/4)
	}
}
