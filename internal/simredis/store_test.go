package simredis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redlock-bench/redlock/engine"
	"github.com/redlock-bench/redlock/internal/redistest"
)

// engineScripts returns the Lua the engine loads on its masters, single
// and coalesced, as a simulated master receives it.
func engineScripts(t *testing.T) []string {
	var bodies []string
	synctest.Test(t, func(t *testing.T) {
		n := NewNetwork(1)
		m := NewMaster(n, 1, 0, "m0:6379", MasterOptions{Uptime: time.Hour})
		defer m.Close()
		cfg := engine.DefaultConfig(m.Addr)
		cfg.TTL = time.Second
		cfg.Conn.DialContext = n.Dialer("c0")
		l, err := engine.New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
		m.mu.Lock()
		for _, b := range m.st.scripts {
			bodies = append(bodies, b)
		}
		m.mu.Unlock()
	})
	slices.Sort(bodies)
	return bodies
}

// The store answers as Redis does: a seeded random sequence of the
// commands the engine and the tests send, the engine's own scripts
// (single and coalesced) with lock values, marks, turn tokens, queues
// and counters among their arguments, and keys of the wrong type, run
// on a real redis-server and on the store, reply for reply. Error
// replies are compared by their code (Redis adds the script's name and
// line), and integers of the masters' clocks (TIME in the fencing
// script) are not compared.
func TestStoreMatchesRedis(t *testing.T) {
	scripts := engineScripts(t)
	if len(scripts) < 8 {
		t.Fatalf("%d engine scripts captured, want the 8 the engine loads and their coalesced forms", len(scripts))
	}
	addr := redistest.StartT(t, 1).Addrs()[0]
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	redis := newClient(conn)
	st := newStore()
	st.now = time.Now()

	r := rand.New(rand.NewPCG(1, 2))
	keys := []string{"k", "\xffredlock:queue:k", "\xffredlock:fence:k", "z"}
	ids := []string{"a:1", "b:2", "c:3"}
	values := []string{"v1", "v2", "a:1.v3", "b:2.v4", "~a:1", "~b:2", "v1+", "a:1.v3+", "~c:3+", "12", "x"}
	pick := func(ss []string) string { return ss[r.IntN(len(ss))] }
	// argsFor fills a script's ARGV by the names its first line gives
	// them, as the engine does: TTLs long enough not to expire during
	// the test (Redis's clock runs, the store's does not).
	argsFor := func(body string) []string {
		line, _, _ := strings.Cut(strings.TrimPrefix(body, "local function one(KEYS, ARGV) "), "\n")
		names, _, _ := strings.Cut(strings.TrimPrefix(line, "local "), " =")
		var out []string
		for _, n := range strings.Split(names, ", ") {
			switch n {
			case "value":
				out = append(out, pick(values))
			case "ttl", "keep":
				out = append(out, strconv.Itoa(100000+r.IntN(1000)))
			case "waiter":
				out = append(out, strconv.Itoa(r.IntN(2)))
			case "ticket", "token":
				out = append(out, strconv.Itoa(1+r.IntN(20)))
			case "id":
				out = append(out, pick(ids))
			default:
				out = append(out, pick(values))
			}
		}
		return out
	}
	gen := func() []string {
		k := pick(keys)
		switch r.IntN(20) {
		case 0:
			a := []string{"SET", k, pick(values)}
			if r.IntN(2) == 0 {
				a = append(a, "NX")
			}
			if r.IntN(3) == 0 {
				a = append(a, "GET")
			}
			if r.IntN(2) == 0 {
				a = append(a, "PX", "100000")
			}
			return a
		case 1:
			return []string{"GET", k}
		case 2:
			return []string{"DEL", k}
		case 3:
			return []string{"EXISTS", k, pick(keys)}
		case 4:
			return []string{"PEXPIRE", k, "100000"}
		case 5:
			return []string{"APPEND", k, "+"}
		case 6:
			return []string{"TYPE", k}
		case 7:
			a := []string{"ZADD", k}
			if r.IntN(2) == 0 {
				a = append(a, "NX")
			}
			return append(a, strconv.Itoa(r.IntN(5)), pick(ids))
		case 8:
			return []string{"ZREM", k, pick(ids)}
		case 9:
			return []string{"ZPOPMIN", k}
		case 10:
			return []string{"ZRANGE", k, "0", strconv.Itoa(r.IntN(3) - 1), "WITHSCORES"}
		case 11:
			return []string{"ZCARD", k}
		case 12:
			return []string{"ZSCORE", k, pick(ids)}
		case 13:
			return []string{"INCR", k}
		case 14:
			// The read/write lock's scripts count and drop entries by
			// score range.
			ends := []string{"-inf", "+inf", "(0", "0", "2", "(3", "-1"}
			return []string{pick([]string{"ZCOUNT", "ZREMRANGEBYSCORE"}), k, pick(ends), pick(ends)}
		case 15:
			// A deadline already past deletes the key.
			return []string{"PEXPIREAT", k, strconv.Itoa(1 + r.IntN(1000))}
		case 16:
			return []string{"PEXPIREAT", k, strconv.FormatInt(st.now.Add(100*time.Second).UnixMilli(), 10)}
		case 17:
			// A multi-resource lease's release reads all its keys at once.
			return []string{"MGET", k, pick(keys)}
		case 18:
			// A reader's join asks whether its entry is there.
			return []string{"ZRANK", k, pick(ids)}
		}
		// A script, on one key or coalesced over several.
		body := pick(scripts)
		if strings.Contains(body, "local function one(KEYS, ARGV)") {
			n := 1 + r.IntN(3)
			a := []string{"EVAL", body, strconv.Itoa(n)}
			for range n {
				a = append(a, "k")
			}
			for range n {
				argv := argsFor(body)
				a = append(append(a, strconv.Itoa(len(argv))), argv...)
			}
			return a
		}
		return append([]string{"EVAL", body, "1", "k"}, argsFor(body)...)
	}
	clock := regexp.MustCompile(`:1[0-9]{15}\r\n`)
	errs := regexp.MustCompile(`-([A-Z]+) [^\r]*\r\n`)
	norm := func(s string) string {
		s = clock.ReplaceAllString(s, ":<clock>\r\n")
		return errs.ReplaceAllString(s, "-$1\r\n")
	}
	for i := range 5000 {
		args := gen()
		want, err := redis.do(args...)
		if err != nil {
			t.Fatalf("redis %q: %v", args, err)
		}
		a := slices.Clone(args)
		a[0] = strings.ToUpper(a[0])
		got := string(st.exec(a).appendRESP(nil, false))
		if norm(got) != norm(want) {
			t.Fatalf("command %d %s:\nredis: %q\nstore: %q", i, show(args), want, got)
		}
	}
}

// show prints a command with its script cut short.
func show(args []string) string {
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		if len(a) > 60 {
			a = a[:60] + "..."
		}
		fmt.Fprintf(&b, "%q", a)
	}
	return b.String()
}
