package engine_test

import (
	"context"
	"crypto/tls"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/redisproc"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// authSetup is a way of protecting the masters, and the Config fields that
// reach them.
type authSetup struct {
	name   string
	server redistest.Options
	client func(*engine.Config)
}

func authSetups(t *testing.T) (setups []authSetup, certs *redisproc.Certs) {
	t.Helper()
	certs, err := redisproc.GenerateCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	serverTLS, err := certs.ServerTLS(false)
	if err != nil {
		t.Fatal(err)
	}
	mutualTLS, err := certs.ServerTLS(true)
	if err != nil {
		t.Fatal(err)
	}
	caOnly, err := certs.ClientTLS(false)
	if err != nil {
		t.Fatal(err)
	}
	withCert, err := certs.ClientTLS(true)
	if err != nil {
		t.Fatal(err)
	}
	return []authSetup{
		{"requirepass", redistest.Options{Password: "s3cret"},
			func(c *engine.Config) { c.Conn.Password = "s3cret" }},
		{"acl-user", redistest.Options{User: "locker", Password: "pw"},
			func(c *engine.Config) { c.Conn.Username, c.Conn.Password = "locker", "pw" }},
		{"tls", redistest.Options{TLS: serverTLS},
			func(c *engine.Config) { c.Conn.TLS = caOnly }},
		{"mtls+acl-user", redistest.Options{TLS: mutualTLS, User: "locker", Password: "pw"},
			func(c *engine.Config) { c.Conn.TLS, c.Conn.Username, c.Conn.Password = withCert, "locker", "pw" }},
	}, certs
}

// queuedOn reports whether resource's queue holds n waiters on every
// master of c, asked with each master's own credentials.
func queuedOn(t *testing.T, c *redistest.Cluster, resource string, n int) bool {
	t.Helper()
	for _, node := range c.Nodes {
		// ZRANGE, which the narrow ACL user may run; "*n" is n members.
		got, err := node.Conn().Do(context.Background(), node.Addr(), 2*time.Second, "ZRANGE", "\xffredlock:queue:"+resource, "0", "-1")
		if err != nil {
			t.Fatal(err)
		}
		if got != "*"+strconv.Itoa(n) {
			return false
		}
	}
	return true
}

// authLocker is a Locker on c's masters, every vote answered (a loaded
// machine times none out), with mutate applied.
func authLocker(t *testing.T, c *redistest.Cluster, mutate ...func(*engine.Config)) *engine.Locker {
	t.Helper()
	cfg := engine.DefaultConfig(c.Addrs()...)
	cfg.Quarantine = engine.QuarantineObserved
	everyVoteAnswered(&cfg)
	for _, m := range mutate {
		m(&cfg)
	}
	l, err := engine.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// The Config's credentials and TLS reach every connection the engine opens:
// the pool's (lock and release, seen on the masters), the restart check's
// (a restarted master is readmitted, quarantined, through its INFO on the
// new connection) and the notifier's (a Lock waiter is woken by the
// release's notification, not by its fallback poll).
func TestAuthAndTLSMasters(t *testing.T) {
	t.Parallel()
	setups, _ := authSetups(t)
	ctx := context.Background()
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			c := redistest.StartT(t, 3, s.server)
			slow := func(c *engine.Config) { c.Wait.FallbackMin, c.Wait.FallbackMax = 20*time.Second, 20*time.Second }
			holderL, waiterL := authLocker(t, c, s.client, slow), authLocker(t, c, s.client, slow)
			holder, err := holderL.TryLock(ctx, "auth")
			if err != nil {
				t.Fatal(err)
			}
			for i, n := range c.Nodes {
				if got, err := n.Conn().Do(ctx, n.Addr(), 2*time.Second, "EXISTS", "auth"); err != nil || got != ":1" {
					t.Fatalf("EXISTS on master %d while held = %q, %v; want :1", i, got, err)
				}
			}
			got := make(chan *engine.Lease, 1)
			go func() {
				ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
				defer cancel()
				le, err := waiterL.Lock(ctx, "auth")
				if err != nil {
					t.Error(err)
				}
				got <- le
			}()
			eventually(t, 30*time.Second, "waiter subscribed and queued on every master", func() bool {
				return waiterL.Subscriptions() == 1 && queuedOn(t, c, "auth", 1)
			})
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			le := <-got
			if le == nil {
				t.FailNow()
			}
			if w := le.Wait(); w.Cause != engine.WakeNotified || w.Notified < 1 {
				t.Fatalf("wait %+v: want woken by the release notification", w)
			}
			if err := le.Release(ctx); err != nil {
				t.Fatal(err)
			}

			// A restarted master is reached again through the restart
			// check, which must authenticate to read its run_id.
			if err := c.Nodes[0].Restart(ctx); err != nil {
				t.Fatal(err)
			}
			eventually(t, 30*time.Second, "restarted master seen and quarantined", func() bool {
				holderL.TryLock(ctx, "probe")
				st := holderL.Nodes()[0]
				return st.Restarts == 1 && st.State == engine.NodeState("quarantined")
			})
		})
	}
}

// Wrong credentials or an untrusted certificate fail New at once with an
// error that names each master and the cause, not a timeout: well within
// a dial timeout of 30 s, which only a New that waits for it reaches,
// however loaded the machine. (A TLS client to a plain server does wait
// for it: TestTLSToAPlainMasterFailsAtTheDialTimeout times that.)
func TestAuthFailuresFailNew(t *testing.T) {
	t.Parallel()
	setups, certs := authSetups(t)
	other, err := redisproc.GenerateCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	otherCA, err := other.ClientTLS(false)
	if err != nil {
		t.Fatal(err)
	}
	goodCA, err := certs.ClientTLS(false)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]authSetup{}
	for _, s := range setups {
		byName[s.name] = s
	}
	for _, tc := range []struct {
		name, setup string
		client      func(*engine.Config)
		want        string
	}{
		{"no password", "requirepass", func(c *engine.Config) {}, "NOAUTH"},
		{"wrong password", "requirepass", func(c *engine.Config) { c.Conn.Password = "wrong" }, `AUTH as the default user refused: WRONGPASS`},
		{"unknown user", "acl-user", func(c *engine.Config) { c.Conn.Username, c.Conn.Password = "nobody", "pw" }, `AUTH as user "nobody" refused: WRONGPASS`},
		{"default user off", "acl-user", func(c *engine.Config) { c.Conn.Password = "pw" }, `AUTH as the default user refused`},
		{"wrong CA", "tls", func(c *engine.Config) { c.Conn.TLS = otherCA }, "certificate signed by unknown authority"},
		{"wrong server name", "tls", func(c *engine.Config) {
			c.Conn.TLS = goodCA.Clone()
			c.Conn.TLS.ServerName = "redis.example.com"
		}, "not redis.example.com"},
		{"plain to TLS", "tls", func(c *engine.Config) {}, "does the master want TLS?"},
		{"no client certificate", "mtls+acl-user", func(c *engine.Config) {
			c.Conn.TLS, c.Conn.Username, c.Conn.Password = goodCA, "locker", "pw"
		}, "certificate"}, // "certificate required", or a reset "(does the master want a client certificate?)"
		// The one case that waits for the dial timeout: a plain server
		// never answers a ClientHello.
		{"TLS to plain", "requirepass", func(c *engine.Config) {
			c.Conn.Password, c.Conn.TLS, c.Conn.DialTimeout = "s3cret", &tls.Config{}, 300*time.Millisecond
		}, "does the master serve TLS on this port?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := redistest.StartT(t, 2, byName[tc.setup].server)
			cfg := engine.DefaultConfig(c.Addrs()...)
			cfg.Conn.DialTimeout = 30 * time.Second
			tc.client(&cfg)
			start := time.Now()
			l, err := engine.New(context.Background(), cfg)
			if err == nil {
				l.Close()
				t.Fatal("New succeeded")
			}
			if d := time.Since(start); !strings.Contains(tc.name, "TLS to plain") && d >= cfg.Conn.DialTimeout {
				t.Errorf("New took %s to fail, the dial timeout or more", d)
			}
			msg := err.Error()
			// "...: ADDR, ADDR (cause)", or "ADDR (cause); ADDR (cause)"
			// when the causes differ.
			_, list, _ := strings.Cut(msg, "quorum needs 2: ")
			for _, group := range strings.Split(list, "); ") {
				addrs, cause, _ := strings.Cut(group, " (")
				if !strings.Contains(cause, tc.want) {
					t.Errorf("masters %s: %q, want %q", addrs, cause, tc.want)
				}
				if !strings.Contains(tc.name, "TLS to plain") && (strings.Contains(cause, "deadline") || strings.Contains(cause, "timeout")) {
					t.Errorf("masters %s: %q reads as a timeout", addrs, cause)
				}
			}
			for _, a := range c.Addrs() {
				if !strings.Contains(msg, a) {
					t.Errorf("error %q does not name master %s", msg, a)
				}
			}
		})
	}
}

// A TLS client to a server that never answers its ClientHello (a plain
// Redis waits for the end of a line) fails New at the dial timeout, and
// no later, saying what is likely wrong. In virtual time; the masters
// are reached through proxies that hold back what the client sends, as
// such a server does.
func TestTLSToAPlainMasterFailsAtTheDialTimeout(t *testing.T) {
	simTest(t, 2, func(t *testing.T, e *env) {
		var masters []string
		for _, a := range e.addrs {
			p := newStallProxy(e, a)
			p.stall.Store(true)
			masters = append(masters, p.addr())
		}
		cfg := e.config()
		cfg.Masters = masters
		cfg.Conn.TLS, cfg.Conn.DialTimeout = &tls.Config{}, 300*time.Millisecond
		start := time.Now()
		l, err := engine.New(context.Background(), cfg)
		if err == nil {
			l.Close()
			t.Fatal("New succeeded")
		}
		if d := time.Since(start); d != cfg.Conn.DialTimeout {
			t.Errorf("New took %s to fail, want the dial timeout, %s", d, cfg.Conn.DialTimeout)
		}
		if !strings.Contains(err.Error(), "does the master serve TLS on this port?") {
			t.Errorf("New: %v, want the question whether the master serves TLS", err)
		}
	})
}

// aclCommands are the commands docs/auth-tls.md says a narrow ACL user needs.
var aclCommands = []string{"hello", "auth", "info", "script|load", "evalsha", "eval", "set", "subscribe", "unsubscribe",
	"get", "del", "append", "pexpire", "pexpireat", "type", "time", "publish", "ping", "zadd", "zrem", "zpopmin", "zrange",
	"zscore", "zcount", "zremrangebyscore", "zcard", "zrank", "exists", "pttl", "mget"}

// An ACL user allowed only the commands the README lists can do
// everything: lock, wait on a notification, extend, release, fence. The
// control: without one of them (here DEL, which the release script calls)
// the release fails.
func TestNarrowACLUser(t *testing.T) {
	t.Parallel()
	rules := func(cmds []string) []string {
		r := []string{"~*", "&*", "-@all"}
		for _, c := range cmds {
			r = append(r, "+"+c)
		}
		return r
	}
	ctx := context.Background()
	creds := func(c *engine.Config) {
		c.Conn.Username, c.Conn.Password = "narrow", "pw"
		c.Fencing, c.AutoExtend = true, true
		c.Wait.FallbackMin, c.Wait.FallbackMax = 20*time.Second, 20*time.Second
	}
	c := redistest.StartT(t, 3, redistest.Options{User: "narrow", Password: "pw", UserRules: rules(aclCommands)})
	holderL, waiterL := authLocker(t, c, creds), authLocker(t, c, creds)
	holder, err := holderL.TryLock(ctx, "narrow")
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Extend(ctx, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	got := make(chan *engine.Lease, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		le, err := waiterL.Lock(ctx, "narrow")
		if err != nil {
			t.Error(err)
		}
		got <- le
	}()
	eventually(t, 30*time.Second, "waiter subscribed and queued on every master", func() bool {
		return waiterL.Subscriptions() == 1 && queuedOn(t, c, "narrow", 1)
	})
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	le := <-got
	if le == nil {
		t.FailNow()
	}
	if w := le.Wait(); w.Cause != engine.WakeNotified || le.Token() <= holder.Token() {
		t.Errorf("wait %+v, tokens %d then %d: want a notified wait and a larger token", w, holder.Token(), le.Token())
	}
	if err := le.Release(ctx); err != nil {
		t.Fatal(err)
	}

	without := redistest.StartT(t, 3, redistest.Options{User: "narrow", Password: "pw",
		UserRules: rules(slices.DeleteFunc(slices.Clone(aclCommands), func(c string) bool { return c == "del" }))})
	l := authLocker(t, without, creds)
	le, err = l.TryLock(ctx, "narrow")
	if err != nil {
		t.Fatal(err)
	}
	if err := le.Release(ctx); err == nil || !strings.Contains(err.Error(), "can't run this command") {
		t.Errorf("release without DEL: %v, want the ACL's refusal", err)
	}
}

// The narrow ACL user takes every kind of lock, not only the plain one:
// a read/write lock's reader and writer, a permit and a lease on several
// resources, each released, and asks a quorum for a lease's validity.
func TestNarrowACLUserEveryKind(t *testing.T) {
	t.Parallel()
	r := []string{"~*", "&*", "-@all"}
	for _, c := range aclCommands {
		r = append(r, "+"+c)
	}
	c := redistest.StartT(t, 3, redistest.Options{User: "narrow", Password: "pw", UserRules: r})
	l := authLocker(t, c, func(c *engine.Config) {
		c.Conn.Username, c.Conn.Password = "narrow", "pw"
		c.Fencing = true
	})
	ctx := context.Background()
	m, err := l.RWMutex("narrow-rw")
	if err != nil {
		t.Fatal(err)
	}
	sem, err := l.Semaphore("narrow-sem", 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct {
		name string
		take func() (*engine.Lease, error)
	}{
		{"read lock", func() (*engine.Lease, error) { return m.TryRLock(ctx) }},
		{"write lock", func() (*engine.Lease, error) { return m.TryLock(ctx) }},
		{"permit", func() (*engine.Lease, error) { return sem.TryAcquire(ctx) }},
		{"several resources", func() (*engine.Lease, error) { return l.TryLockAll(ctx, "narrow-a", "narrow-b") }},
	} {
		le, err := k.take()
		if err != nil {
			t.Fatalf("%s as the narrow ACL user: %v", k.name, err)
		}
		if _, err := le.RemoteValidity(ctx); err != nil {
			t.Errorf("%s's RemoteValidity as the narrow ACL user: %v", k.name, err)
		}
		if err := le.Release(ctx); err != nil {
			t.Errorf("%s's release as the narrow ACL user: %v", k.name, err)
		}
	}
}
