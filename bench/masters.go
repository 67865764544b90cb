package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlock-bench/redlock/multiplex/redistest"
)

// probeTimeout bounds the pre-flight check of each master, so that an
// unreachable master fails the run within a few seconds.
const probeTimeout = 2 * time.Second

// startLocalMasters starts n redis-server processes on free loopback ports,
// each in its own temporary directory. The caller must Stop the cluster on
// every exit path; the processes also die with this one (Pdeathsig).
func startLocalMasters(ctx context.Context, n int) (*redistest.Cluster, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := redistest.Start(ctx, n, redistest.Options{})
	if err != nil {
		return nil, fmt.Errorf("bench: start %d local masters: %w", n, err)
	}
	return c, nil
}

// shareLocalMasters starts the local masters once for a series of runs
// (a sweep, a comparison) and points cfg at them; the caller stops the
// cluster. As in Run, the quarantine defaults to observed: masters this
// process started hold no locks.
func shareLocalMasters(ctx context.Context, cfg *Config, series string, logf func(string, ...any)) (*redistest.Cluster, error) {
	cluster, err := startLocalMasters(ctx, cfg.LocalMasters)
	if err != nil {
		return nil, err
	}
	cfg.Masters = cluster.Addrs()
	logf("started %d local redis-server for the whole %s: %s", len(cfg.Masters), series, strings.Join(cfg.Masters, ","))
	if cfg.Quarantine == "" {
		cfg.Quarantine = "observed"
	}
	return cluster, nil
}

// logger writes a line to w, or nothing when w is nil.
func logger(w io.Writer) func(format string, a ...any) {
	return func(format string, a ...any) {
		if w != nil {
			fmt.Fprintf(w, format+"\n", a...)
		}
	}
}

// probeMasters checks that every master answers and returns the server
// versions found ("7.0.15", or "7.0.15,7.2.4" when they differ). It fails
// naming every unreachable address.
func probeMasters(ctx context.Context, addrs []string) (string, error) {
	type answer struct {
		version string
		err     error
	}
	answers := make([]answer, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := serverVersion(ctx, a, probeTimeout)
			answers[i] = answer{v, err}
		}()
	}
	wg.Wait()
	var bad []string
	seen := map[string]bool{}
	var versions []string
	for i, a := range answers {
		if a.err != nil {
			bad = append(bad, fmt.Sprintf("%s (%v)", addrs[i], a.err))
			continue
		}
		if a.version != "" && !seen[a.version] {
			seen[a.version] = true
			versions = append(versions, a.version)
		}
	}
	if len(bad) > 0 {
		return "", fmt.Errorf("bench: %d of %d masters unreachable: %s", len(bad), len(addrs), strings.Join(bad, ", "))
	}
	sort.Strings(versions)
	return strings.Join(versions, ","), nil
}

// serverVersion connects to addr and reads the version from INFO server.
// A server that refuses INFO (authentication required, ...) is reachable:
// its version is reported as "unknown".
func serverVersion(ctx context.Context, addr string, timeout time.Duration) (string, error) {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Err != nil {
			err = op.Err
		}
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(conn, "INFO server\r\n"); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	head, err := r.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("no reply: %w", err)
	}
	head = strings.TrimRight(head, "\r\n")
	if !strings.HasPrefix(head, "$") {
		return "unknown", nil
	}
	n, err := strconv.Atoi(head[1:])
	if err != nil || n < 0 || n > 1<<20 {
		return "unknown", nil
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return "", fmt.Errorf("short reply: %w", err)
	}
	return parseVersion(string(body)), nil
}

// parseVersion picks the server version out of INFO text. Valkey also
// reports redis_version (for compatibility), so its own field wins.
func parseVersion(info string) string {
	var redis, valkey string
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "valkey_version:"); ok {
			valkey = v
		} else if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			redis = v
		}
	}
	switch {
	case valkey != "":
		return "valkey " + valkey
	case redis != "":
		return redis
	}
	return "unknown"
}

// deletePrefixed removes every key that starts with prefix from each
// master (SCAN MATCH, then UNLINK), until ctx ends, and returns how many
// it removed. The prefix's glob characters are escaped, so that no key
// outside it matches.
func deletePrefixed(ctx context.Context, masters []string, prefix string) (int64, error) {
	pattern := globEscape(prefix) + "*"
	var (
		mu    sync.Mutex
		total int64
		errs  []error
		wg    sync.WaitGroup
	)
	for _, addr := range masters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := deletePrefixedOn(ctx, addr, pattern)
			mu.Lock()
			defer mu.Unlock()
			total += n
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			}
		}()
	}
	wg.Wait()
	return total, errors.Join(errs...)
}

func deletePrefixedOn(ctx context.Context, addr, pattern string) (int64, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true,
		Dialer: net.Dialer{Timeout: probeTimeout},
	})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	var removed int64
	cursor := uint64(0)
	for {
		e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
		if err != nil {
			return removed, err
		}
		if len(e.Elements) > 0 {
			n, err := c.Do(ctx, c.B().Unlink().Key(e.Elements...).Build()).AsInt64()
			if err != nil {
				return removed, err
			}
			removed += n
		}
		if e.Cursor == 0 {
			return removed, nil
		}
		cursor = e.Cursor
	}
}

// globEscape quotes the characters that SCAN MATCH reads as a pattern.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\^-`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
