package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redlock-bench/redlock/internal/redisproc"
)

// probeTimeout bounds the pre-flight check of each master, so that an
// unreachable master fails the run within a few seconds.
const probeTimeout = 2 * time.Second

// startLocalMasters starts n redis-server processes on free loopback ports,
// each in its own temporary directory. The caller must Stop the cluster on
// every exit path; the processes also die with this one (Pdeathsig).
func startLocalMasters(ctx context.Context, n int) (*redisproc.Cluster, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := redisproc.Start(ctx, n, redisproc.Options{})
	if err != nil {
		return nil, fmt.Errorf("bench: start %d local masters: %w", n, err)
	}
	return c, nil
}

// shareLocalMasters starts the local masters once for a series of runs
// (a sweep, a comparison) and points cfg at them; the caller stops the
// cluster. As in Run, the quarantine defaults to observed: masters this
// process started hold no locks.
func shareLocalMasters(ctx context.Context, cfg *Config, series string, logf func(string, ...any)) (*redisproc.Cluster, error) {
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
func probeMasters(ctx context.Context, conn redisproc.Conn, addrs []string) (string, error) {
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
			v, err := conn.Version(ctx, a, probeTimeout)
			// "connection refused" rather than "dial tcp <addr>: connect: ...":
			// the message names the address already.
			var op *net.OpError
			if errors.As(err, &op) && op.Err != nil {
				err = op.Err
			}
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

// parseVersion is redisproc.ParseVersion, the one INFO version parser
// outside multiplex.
var parseVersion = redisproc.ParseVersion

// deletePrefixed removes every key that starts with prefix from each
// master (SCAN MATCH, then UNLINK), until ctx ends, and returns how many
// it removed. The prefix's glob characters are escaped, so that no key
// outside it matches.
func deletePrefixed(ctx context.Context, conn redisproc.Conn, masters []string, prefix string) (int64, error) {
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
			n, err := deletePrefixedOn(ctx, conn, addr, pattern)
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

func deletePrefixedOn(ctx context.Context, conn redisproc.Conn, addr, pattern string) (int64, error) {
	c, err := conn.NewClient(addr, probeTimeout)
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
