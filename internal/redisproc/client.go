package redisproc

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Conn is how to reach a server: the credentials every connection
// authenticates with and, when TLS is set, its TLS client set-up. The zero
// value is plain TCP without AUTH; the package-level NewClient, Do, Ping
// and Version use it.
type Conn struct {
	Username, Password string
	TLS                *tls.Config
}

// NewClient opens a rueidis client to one server, for set-up, probes and
// clean-up rather than load: one connection, RESP2 (so that replies keep the
// types redis-cli shows), no client-side cache, no retries, no CLIENT
// SETINFO, and timeout bounding the dial and every write. The caller closes
// it.
func NewClient(addr string, timeout time.Duration) (rueidis.Client, error) {
	return Conn{}.NewClient(addr, timeout)
}

// NewClient is the package-level NewClient with c's credentials and TLS.
func (c Conn) NewClient(addr string, timeout time.Duration) (rueidis.Client, error) {
	return rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{addr},
		ForceSingleClient: true,
		DisableCache:      true,
		DisableRetry:      true,
		AlwaysRESP2:       true,
		ClientSetInfo:     rueidis.DisableClientSetInfo,
		Dialer:            net.Dialer{Timeout: timeout},
		ConnWriteTimeout:  timeout,
		Username:          c.Username,
		Password:          c.Password,
		TLSConfig:         c.TLS,
	})
}

// Do sends one command over a fresh connection and returns the first line
// of its RESP2 reply: "+OK", ":1", "$40" (a bulk string's length, not its
// text), "$-1", "*3". A server error is returned as the error. A server that
// does not answer within timeout gives an error that wraps
// os.ErrDeadlineExceeded, as a net.Conn's deadline does. Do is for set-up
// (CONFIG SET, DEBUG SLEEP, ...), not for load.
func Do(ctx context.Context, addr string, timeout time.Duration, args ...string) (string, error) {
	return Conn{}.Do(ctx, addr, timeout, args...)
}

// Do is the package-level Do with c's credentials and TLS.
func (conn Conn) Do(ctx context.Context, addr string, timeout time.Duration, args ...string) (string, error) {
	if len(args) == 0 {
		return "", errors.New("redisproc: Do needs a command")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := conn.NewClient(addr, timeout)
	if err != nil {
		return "", deadline(err, timeout)
	}
	defer c.Close()
	m, err := c.Do(ctx, c.B().Arbitrary(args...).Build()).ToMessage()
	if err != nil && !rueidis.IsRedisNil(err) {
		if _, ok := rueidis.IsRedisErr(err); ok {
			return "", err
		}
		return "", deadline(err, timeout)
	}
	return firstLine(m)
}

// deadline makes a timeout, whether rueidis reports it from the context or
// from the connection, wrap os.ErrDeadlineExceeded.
func deadline(err error, timeout time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("no reply within %s: %w", timeout, os.ErrDeadlineExceeded)
	}
	return err
}

// firstLine renders the first line of a RESP2 reply. rueidis reads simple
// and bulk strings alike (IsString); its String form names the wire type.
func firstLine(m rueidis.RedisMessage) (string, error) {
	switch {
	case m.IsNil():
		return "$-1", nil
	case m.IsInt64():
		n, err := m.AsInt64()
		return ":" + strconv.FormatInt(n, 10), err
	case m.IsArray():
		a, err := m.ToArray()
		return "*" + strconv.Itoa(len(a)), err
	case m.IsString():
		s, err := m.ToString()
		if err != nil {
			return "", err
		}
		var shape struct{ Type string }
		if err := json.Unmarshal([]byte(m.String()), &shape); err != nil {
			return "", fmt.Errorf("redisproc: reply type: %w", err)
		}
		if shape.Type == "simple string" {
			return "+" + s, nil
		}
		return "$" + strconv.Itoa(len(s)), nil
	}
	return "", fmt.Errorf("redisproc: unexpected RESP2 reply %s", m.String())
}

// Ping sends PING over a fresh connection and expects PONG. A server that
// wants a password answers NOAUTH: it is up all the same.
func Ping(addr string, timeout time.Duration) error { return Conn{}.Ping(addr, timeout) }

// Ping is the package-level Ping with c's credentials and TLS.
func (c Conn) Ping(addr string, timeout time.Duration) error {
	reply, err := c.Do(context.Background(), addr, timeout, "PING")
	if err != nil {
		if strings.HasPrefix(err.Error(), "NOAUTH") {
			return nil
		}
		return err
	}
	if reply != "+PONG" {
		return fmt.Errorf("redisproc: PING %s answered %q", addr, reply)
	}
	return nil
}

// Version reads the server version from INFO server over a fresh
// connection ("7.0.15", "valkey 8.0.1"). A server that refuses INFO
// (authentication required, ...) is reachable: its version is "unknown".
func Version(ctx context.Context, addr string, timeout time.Duration) (string, error) {
	return Conn{}.Version(ctx, addr, timeout)
}

// Version is the package-level Version with conn's credentials and TLS.
func (conn Conn) Version(ctx context.Context, addr string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := conn.NewClient(addr, timeout)
	if err != nil {
		if _, ok := rueidis.IsRedisErr(err); ok {
			return "unknown", nil
		}
		return "", deadline(err, timeout)
	}
	defer c.Close()
	info, err := c.Do(ctx, c.B().Info().Section("server").Build()).ToString()
	if err != nil {
		if _, ok := rueidis.IsRedisErr(err); ok {
			return "unknown", nil
		}
		return "", deadline(err, timeout)
	}
	return ParseVersion(info), nil
}

// ParseVersion picks the server version out of INFO text. Valkey also
// reports redis_version (for compatibility), so its own field wins.
func ParseVersion(info string) string {
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
