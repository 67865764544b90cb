package multiplex_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/quarantine"

	"github.com/redis/rueidis"

	"github.com/redlock-bench/redlock/internal/redistest"
	"github.com/redlock-bench/redlock/multiplex"
)

// Commands for one key reach a master in the order they were submitted,
// coalesced or not: a later command of script A must not run before an
// earlier command of script B just because an even earlier A started a
// group in the same batch. (Before groups respected earlier commands on
// their keys, this read "21" in 10 of 10 runs.)
func TestCoalescingKeepsPerKeyOrder(t *testing.T) {
	a := multiplex.NewScript(`return redis.call("APPEND", KEYS[1], ARGV[1])`).Coalesce()
	b := multiplex.NewScript(`return redis.call("APPEND", KEYS[1], ARGV[1]) + 0`).Coalesce()
	c := redistest.StartT(t, 1)
	p, err := multiplex.Dial(context.Background(), multiplex.Options{Addrs: c.Addrs(), Quarantine: quarantine.Off,
		NodeTimeout: 30 * time.Second, Scripts: []*multiplex.Script{a, b}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	postOneBatch(t, p, c.Nodes[0],
		multiplex.Command{Script: a, Key: "other", Args: [multiplex.MaxArgs]string{"x"}, NArgs: 1},
		multiplex.Command{Script: b, Key: "k", Args: [multiplex.MaxArgs]string{"1"}, NArgs: 1},
		multiplex.Command{Script: a, Key: "k", Args: [multiplex.MaxArgs]string{"2"}, NArgs: 1})
	if got := appended(t, directClient(t, c.Addrs()[0])); got != "12" {
		t.Fatalf("key k is %q after APPEND 1 (script b) then APPEND 2 (script a): the later command ran first", got)
	}
}

// postOneBatch posts cmds so that they leave as one batch, whatever the
// machine's speed: with the master stopped, a first command holds the
// pool's only worker once the worker has taken it, the others queue
// behind it, and they leave together once the master resumes and answers
// it.
func postOneBatch(t testing.TB, p *multiplex.Pool, master *redistest.Node, cmds ...multiplex.Command) {
	t.Helper()
	if err := master.Pause(); err != nil {
		t.Fatal(err)
	}
	p.Post(multiplex.Command{Name: "PING"}, anyReply, nil)
	for deadline := time.Now().Add(30 * time.Second); p.Queued(0) > 0; time.Sleep(100 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatal("no worker took the first command within 30s")
		}
	}
	for _, cmd := range cmds {
		p.Post(cmd, anyReply, nil)
	}
	if err := master.Resume(); err != nil {
		t.Fatal(err)
	}
}

// directClient is a client of its own to addr, for reading what the
// commands under test left, closed with the test.
func directClient(t *testing.T, addr string) rueidis.Client {
	t.Helper()
	cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true,
		DisableCache: true, ClientSetInfo: rueidis.DisableClientSetInfo})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// appended waits until key k holds two appended bytes, and returns them.
func appended(t *testing.T, cl rueidis.Client) string {
	t.Helper()
	var got string
	for deadline := time.Now().Add(30 * time.Second); len(got) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("key k is %q: both APPENDs did not run within 30s", got)
		}
		got, _ = cl.Do(context.Background(), cl.B().Get().Key("k").Build()).ToString()
	}
	return got
}

func anyReply(rueidis.RedisResult) (multiplex.Outcome, int64, error) { return multiplex.OK, 0, nil }

// After a master restarts, a script must still run before a later command
// of the same batch on its key. A script answered NOSCRIPT is sent again
// as EVAL only after the batch, so the scripts are loaded on every new
// connection before it carries a command. (Without that, this read "21".)
func TestRestartedMasterKeepsPerKeyOrder(t *testing.T) {
	a := multiplex.NewScript(`return redis.call("APPEND", KEYS[1], ARGV[1])`).Coalesce()
	c := redistest.StartT(t, 1)
	p, err := multiplex.Dial(context.Background(), multiplex.Options{Addrs: c.Addrs(), Quarantine: quarantine.Off,
		NodeTimeout: 30 * time.Second, Scripts: []*multiplex.Script{a}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Nodes[0].Restart(ctx); err != nil {
		t.Fatal(err)
	}
	cl := directClient(t, c.Addrs()[0])
	// The first command after the restart finds the connection broken and
	// reconnects; the next two then leave together.
	for p.Do(ctx, 0, multiplex.Command{Name: "PING"}).Error() != nil {
		if ctx.Err() != nil {
			t.Fatal("the restarted master did not answer PING within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	postOneBatch(t, p, c.Nodes[0],
		multiplex.Command{Script: a, Key: "k", Args: [multiplex.MaxArgs]string{"1"}, NArgs: 1},
		multiplex.Command{Name: "APPEND", Key: "k", Args: [multiplex.MaxArgs]string{"2"}, NArgs: 1})
	if got := appended(t, cl); got != "12" {
		t.Fatalf("key k is %q after script APPEND 1 then plain APPEND 2: the script ran after the later command", got)
	}
}

// A script's further keys (Command.Keys) reach it as KEYS[2] on, by SHA
// and as EVAL after SCRIPT FLUSH; and a later coalesced command on one of
// them still runs after it, though a group of that script started
// earlier in the batch. (Without the further keys in the plan, this read
// "21" for key k.)
func TestFurtherKeysKeepPerKeyOrder(t *testing.T) {
	a := multiplex.NewScript(`return redis.call("APPEND", KEYS[1], ARGV[1])`).Coalesce()
	all := multiplex.NewScript(`for i = 1, #KEYS do redis.call("APPEND", KEYS[i], ARGV[1]) end
return #KEYS`)
	c := redistest.StartT(t, 1)
	dial := func() *multiplex.Pool {
		p, err := multiplex.Dial(context.Background(), multiplex.Options{Addrs: c.Addrs(), Quarantine: quarantine.Off,
			NodeTimeout: 30 * time.Second, Scripts: []*multiplex.Script{a, all}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	cl := directClient(t, c.Addrs()[0])
	p := dial()
	postOneBatch(t, p, c.Nodes[0],
		multiplex.Command{Script: a, Key: "other", Args: [multiplex.MaxArgs]string{"x"}, NArgs: 1},
		multiplex.Command{Script: all, Key: "j", Keys: &[]string{"k"}, Args: [multiplex.MaxArgs]string{"1"}, NArgs: 1},
		multiplex.Command{Script: a, Key: "k", Args: [multiplex.MaxArgs]string{"2"}, NArgs: 1})
	if got := appended(t, cl); got != "12" {
		t.Fatalf("key k is %q after APPEND 1 (as a further key) then APPEND 2 (coalesced): the later command ran first", got)
	}
	ctx := context.Background()
	p = dial()
	three := multiplex.Command{Script: all, Key: "x", Keys: &[]string{"y", "z"}, Args: [multiplex.MaxArgs]string{"0"}, NArgs: 1}
	if n, err := p.Do(ctx, 0, three).AsInt64(); err != nil || n != 3 {
		t.Fatalf("script over three keys: %d keys, %v", n, err)
	}
	if err := cl.Do(ctx, cl.B().ScriptFlush().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if n, err := p.Do(ctx, 0, three).AsInt64(); err != nil || n != 3 {
		t.Fatalf("script over three keys after SCRIPT FLUSH: %d keys, %v", n, err)
	}
	for _, k := range []string{"x", "y", "z"} {
		if got, _ := cl.Do(ctx, cl.B().Get().Key(k).Build()).ToString(); got != "00" {
			t.Fatalf("key %s is %q after two calls", k, got)
		}
	}
}

// Further keys on a script that has a Multi form, in a batch of that
// script alone: the command with Keys is not coalesced and runs at its
// place, so a later single-key command on one of its keys must not join
// a group an earlier command started. (Before such a batch tracked its
// keys, this read "21".)
func TestFurtherKeysOfACoalescedScriptKeepPerKeyOrder(t *testing.T) {
	a := multiplex.NewScript(`for i = 1, #KEYS do redis.call("APPEND", KEYS[i], ARGV[1]) end
return #KEYS`).Coalesce()
	c := redistest.StartT(t, 1)
	p, err := multiplex.Dial(context.Background(), multiplex.Options{Addrs: c.Addrs(), Quarantine: quarantine.Off,
		NodeTimeout: 30 * time.Second, Scripts: []*multiplex.Script{a}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cl := directClient(t, c.Addrs()[0])
	postOneBatch(t, p, c.Nodes[0],
		multiplex.Command{Script: a, Key: "other", Args: [multiplex.MaxArgs]string{"x"}, NArgs: 1},
		multiplex.Command{Script: a, Key: "j", Keys: &[]string{"k"}, Args: [multiplex.MaxArgs]string{"1"}, NArgs: 1},
		multiplex.Command{Script: a, Key: "k", Args: [multiplex.MaxArgs]string{"2"}, NArgs: 1})
	if got := appended(t, cl); got != "12" {
		t.Fatalf("key k is %q after APPEND 1 (as a further key) then APPEND 2 (same script, coalesced): the later command ran first", got)
	}
}
