package masters

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlock-bench/redlock/internal/redisproc"
	"github.com/redlock-bench/redlock/internal/resp"
)

// ProbeTimeout bounds the pre-flight check of each master, so that an
// unreachable master fails the run within a few seconds, and every other
// short exchange with one.
const ProbeTimeout = 2 * time.Second

// Start starts n redis-server processes on free loopback ports, each in
// its own temporary directory. The caller must Stop the cluster on every
// exit path; the processes also die with this one (Pdeathsig).
func Start(ctx context.Context, n int) (*redisproc.Cluster, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := redisproc.Start(ctx, n, redisproc.Options{})
	if err != nil {
		return nil, fmt.Errorf("start %d local masters: %w", n, err)
	}
	return c, nil
}

// MaxClusterShards bounds the shards of a local Redis Cluster
// (--cluster-shards): every shard of every local cluster is a
// redis-server process of its own (two with a replica).
const MaxClusterShards = 16

// StartClusters starts n Redis Clusters shaped by co on free loopback
// ports, all at once, within timeout; on error it stops those it started.
// The caller stops them (StopClusters) on every exit path; the processes
// also die with this one (Pdeathsig).
func StartClusters(ctx context.Context, n int, co redisproc.ClusterOptions, timeout time.Duration) ([]*redisproc.RedisCluster, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := make([]*redisproc.RedisCluster, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = redisproc.StartRedisCluster(ctx, co, redisproc.Options{})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		StopClusters(out)
		return nil, fmt.Errorf("start %d local Redis Clusters of %d shards: %w", n, co.Shards, err)
	}
	return out, nil
}

// StopClusters stops every cluster started; nil entries are skipped.
func StopClusters(cs []*redisproc.RedisCluster) {
	for _, c := range cs {
		if c != nil {
			c.Stop()
		}
	}
}

// Seeds are the clusters' addresses as the engine takes them: every
// primary of each.
func Seeds(cs []*redisproc.RedisCluster) [][]string {
	out := make([][]string, len(cs))
	for i, c := range cs {
		out[i] = c.Seeds()
	}
	return out
}

// Flatten lists the addresses of every cluster, for the probe.
func Flatten(clusters [][]string) []string {
	var out []string
	for _, seeds := range clusters {
		out = append(out, seeds...)
	}
	return out
}

// Probe checks that every master answers within ProbeTimeout and returns
// the server versions found ("7.0.15", or "7.0.15,7.2.4" when they
// differ). It fails naming every address that cannot be used, and why.
func Probe(ctx context.Context, conn redisproc.Conn, addrs []string) (string, error) {
	return ProbeWithin(ctx, conn, addrs, ProbeTimeout)
}

// ProbeWithin is Probe giving each master timeout to answer.
func ProbeWithin(ctx context.Context, conn redisproc.Conn, addrs []string, timeout time.Duration) (string, error) {
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
			v, err := probeMaster(ctx, conn, a, timeout)
			answers[i] = answer{v, err}
		}()
	}
	wg.Wait()
	// Masters failing for one cause are named together: with a wrong
	// password or TLS setting, all of them usually are.
	var causes []string
	byCause := map[string][]string{}
	nbad := 0
	seen := map[string]bool{}
	var versions []string
	for i, a := range answers {
		if a.err != nil {
			cause := a.err.Error()
			if byCause[cause] == nil {
				causes = append(causes, cause)
			}
			byCause[cause] = append(byCause[cause], addrs[i])
			nbad++
			continue
		}
		if a.version != "" && !seen[a.version] {
			seen[a.version] = true
			versions = append(versions, a.version)
		}
	}
	if nbad > 0 {
		bad := make([]string, len(causes))
		for i, c := range causes {
			bad[i] = fmt.Sprintf("%s (%s)", strings.Join(byCause[c], ", "), c)
		}
		return "", fmt.Errorf("%d of %d masters unreachable: %s", nbad, len(addrs), strings.Join(bad, "; "))
	}
	sort.Strings(versions)
	return strings.Join(versions, ","), nil
}

// probeMaster reads the server version of one master. When it cannot,
// the error says why in terms of the flags: a password missing or refused,
// or TLS on one side only, which would otherwise read as a timeout or a
// reset connection. A master that refuses INFO (a narrow ACL user) is up:
// its version is "unknown".
func probeMaster(ctx context.Context, conn redisproc.Conn, addr string, timeout time.Duration) (string, error) {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := conn.NewClient(addr, timeout)
	if _, ok := rueidis.IsRedisErr(err); ok && conn.Password != "" {
		// The connection's one command is AUTH.
		if strings.Contains(err.Error(), "without any password configured") {
			return "", errors.New("the master wants no password: drop -a/--pass and REDISCLI_AUTH")
		}
		return "", authRefused(conn, err)
	}
	if err == nil {
		var info string
		info, err = c.Do(pctx, c.B().Info().Section("server").Build()).ToString()
		c.Close()
		if err == nil {
			return redisproc.ParseVersion(info), nil
		}
	}
	if re, ok := rueidis.IsRedisErr(err); ok {
		switch msg := re.Error(); {
		case strings.HasPrefix(msg, "NOAUTH"):
			return "", errors.New("the master wants a password: give -a/--pass or REDISCLI_AUTH (with --user for an ACL user)")
		case strings.HasPrefix(msg, "WRONGPASS"):
			return "", authRefused(conn, err)
		}
		return "unknown", nil
	}
	if ctx.Err() != nil {
		return "", err
	}
	timedOut := errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded)
	if timedOut {
		err = fmt.Errorf("no reply within %s: %w", timeout, os.ErrDeadlineExceeded)
	}
	// "connection refused" rather than "dial tcp <addr>: connect: ...":
	// the message names the address already.
	var op *net.OpError
	alert := false // the master sent a TLS alert ("remote error: tls: ...")
	if errors.As(err, &op) && op.Err != nil {
		alert = op.Op == "remote error"
		err = op.Err
	}
	var notTLS tls.RecordHeaderError
	// A master that wants a client certificate resets the connection or
	// sends an alert about it; other alerts (a TLS version) are not that.
	closed := errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || alert && strings.Contains(err.Error(), "certificate")
	if !timedOut {
		// Whatever else is wrong, a server that answers PING with
		// something other than RESP is not a master at all: say so, with
		// its answer, before any guess about TLS.
		if reply := sniff(ctx, addr, conn.TLS); len(reply) > 0 && !resp.IsReply(reply) && !resp.IsTLSRecord(reply) {
			return "", resp.NotRedis(reply, conn.TLS != nil)
		}
		// A plain server that answered the TLS handshake: the same look
		// without TLS.
		if conn.TLS != nil && errors.As(err, &notTLS) {
			if reply := sniff(ctx, addr, nil); len(reply) > 0 && !resp.IsReply(reply) {
				return "", resp.NotRedis(reply, false)
			}
		}
	}
	switch {
	case conn.TLS != nil && len(conn.TLS.Certificates) == 0 && conn.TLS.GetClientCertificate == nil && closed:
		// The handshake went through, then the master hung up: it
		// wants a client certificate (mutual TLS, tls-auth-clients).
		return "", fmt.Errorf("%w: the master closed the TLS connection without a client certificate: give --cert and --key", err)
	case conn.TLS != nil && (timedOut || errors.As(err, &notTLS)) && speaksPlain(ctx, addr):
		return "", fmt.Errorf("no TLS handshake: the master serves plain TCP on this port, not TLS: drop --tls, or give its tls-port (%w)", err)
	case conn.TLS == nil && !timedOut && speaksTLS(ctx, addr):
		// TLS, but is it Redis behind it? An HTTPS server is TLS too.
		if reply := sniff(ctx, addr, &tls.Config{InsecureSkipVerify: true}); len(reply) > 0 && !resp.IsReply(reply) {
			return "", resp.NotRedis(reply, true)
		}
		return "", fmt.Errorf("%w: the master serves TLS on this port: add --tls", err)
	}
	return "", err
}

// sniffTimeout bounds each of the probe's second looks at a master that
// failed: a dial, a PING and the first bytes of the answer.
const sniffTimeout = time.Second

// sniff sends PING to addr, over TLS when tc is set, and returns the first
// line of the answer; nothing when the connection, the handshake or the
// read failed. The library reads a connection's first answer the same
// way, and words a server that is not Redis alike (internal/resp).
func sniff(ctx context.Context, addr string, tc *tls.Config) []byte {
	return resp.Ping(ctx, addr, tc, sniffTimeout)
}

// authRefused is the error of a refused AUTH, naming the user.
func authRefused(conn redisproc.Conn, err error) error {
	if conn.Username == "" {
		return fmt.Errorf("AUTH as the default user refused: %v: if the password is an ACL user's, give --user", err)
	}
	return fmt.Errorf("AUTH as user %q refused: %v", conn.Username, err)
}

// speaksPlain reports whether addr answers a plain-text PING with a RESP
// reply (PONG, or an error such as NOAUTH).
func speaksPlain(ctx context.Context, addr string) bool {
	return resp.IsReply(sniff(ctx, addr, nil))
}

// speaksTLS reports whether addr completes a TLS handshake, without
// verifying its certificate, or refuses this client's certificate (which
// a TLS server alone can).
func speaksTLS(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, sniffTimeout)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} // only to tell TLS from plain; nothing is sent
	c, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		c.Close()
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}

// DeletePrefixed removes every key that starts with one of prefixes from
// each master (SCAN MATCH, then UNLINK), until ctx ends, and returns how
// many it removed. The prefixes' glob characters are escaped, so that no
// key outside them matches.
func DeletePrefixed(ctx context.Context, conn redisproc.Conn, masters []string, prefixes ...string) (int64, error) {
	patterns := make([]string, len(prefixes))
	for i, p := range prefixes {
		patterns[i] = globEscape(p) + "*"
	}
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
			var n int64
			var err error
			for _, pattern := range patterns {
				var k int64
				k, err = deletePrefixedOn(ctx, conn, addr, pattern)
				if n += k; err != nil {
					break
				}
			}
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
	c, err := conn.NewClient(addr, ProbeTimeout)
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
// It works on bytes: the engine's internal keys start with 0xFF, which is
// not UTF-8 and must reach the master unchanged.
func globEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(`*?[]\^-`, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
