package fault

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Mechanisms a stall may use, as recorded in results.FaultEvent.Via.
const (
	ViaDebugSleep  = "DEBUG SLEEP"
	ViaClientPause = "CLIENT PAUSE"
)

// stall blocks the master at addr for d. It prefers DEBUG SLEEP, which
// freezes the whole event loop like a stop-the-world pause. Redis 7 refuses
// DEBUG unless enable-debug-command allows it, and managed services rename
// it, so a refused DEBUG falls back to CLIENT PAUSE, which holds every
// client's commands (this one's included) for the same time. applied is
// called once the mechanism is known and the stall is under way. stall
// returns once the master answers again, bounded by d+grace; ctx only
// bounds the dial, since neither mechanism can be interrupted once sent.
func stall(ctx context.Context, cfg *Config, addr string, d, grace time.Duration, applied func(via string)) (string, error) {
	c, err := dialMaster(ctx, cfg, addr)
	if err != nil {
		return "", fmt.Errorf("stall %s: %w", addr, err)
	}
	defer c.conn.Close()
	conn := c.conn

	// DEBUG SLEEP 0 tells whether DEBUG is allowed before the stall begins,
	// so the applied event can name the mechanism.
	via := ViaDebugSleep
	debugErr := c.do("DEBUG", "SLEEP", "0")
	var refused serverError
	switch {
	case errors.As(debugErr, &refused):
		via = ViaClientPause
	case debugErr != nil:
		// No answer at all: the master is already down or stopped, and a
		// fallback would only wait on it again.
		return "", fmt.Errorf("stall %s: %w", addr, debugErr)
	}
	end := time.Now().Add(d)
	conn.SetDeadline(end.Add(grace))
	switch via {
	case ViaDebugSleep:
		secs := strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
		if err := c.send("DEBUG", "SLEEP", secs); err != nil {
			return via, fmt.Errorf("stall %s: %w", addr, err)
		}
		applied(via)
		if err := c.reply(); err != nil {
			return via, fmt.Errorf("stall %s: DEBUG SLEEP %s: %w", addr, secs, err)
		}
	case ViaClientPause:
		ms := strconv.FormatInt(max(d.Milliseconds(), 1), 10)
		if err := c.do("CLIENT", "PAUSE", ms); err != nil {
			return "", fmt.Errorf("stall %s: DEBUG refused (%v) and CLIENT PAUSE refused (%w)", addr, debugErr, err)
		}
		applied(via)
		// The PING is held like every other command, so its reply marks the
		// moment the master serves again.
		if err := c.do("PING"); err != nil {
			return via, fmt.Errorf("stall %s: PING after CLIENT PAUSE: %w", addr, err)
		}
	}
	// Redis holds the pausing connection's PING too, so this wait is
	// normally over; it guards a server that exempts that connection, so
	// that a stall is never reported shorter than asked.
	if w := time.Until(end); w > 0 {
		time.Sleep(w)
	}
	return via, nil
}

// probeStall reports which mechanism a stall of the master at addr would
// use, or why neither is available, without stalling it: DEBUG SLEEP 0, and
// failing that CLIENT PAUSE for 1ms, the shortest pause there is.
func probeStall(ctx context.Context, cfg *Config, addr string) (string, error) {
	c, err := dialMaster(ctx, cfg, addr)
	if err != nil {
		return "", err
	}
	defer c.conn.Close()
	debugErr := c.do("DEBUG", "SLEEP", "0")
	var refused serverError
	if debugErr == nil {
		return ViaDebugSleep, nil
	}
	if !errors.As(debugErr, &refused) {
		return "", debugErr
	}
	if err := c.do("CLIENT", "PAUSE", "1"); err != nil {
		return "", fmt.Errorf("DEBUG refused (%v) and CLIENT PAUSE refused (%w)", debugErr, err)
	}
	return ViaClientPause, nil
}

// dialMaster connects to the master at addr, over TLS and authenticated
// when cfg says so, with a 2s deadline set for what follows.
func dialMaster(ctx context.Context, cfg *Config, addr string) (respConn, error) {
	dialer := &net.Dialer{Timeout: 2 * time.Second}
	var conn net.Conn
	var err error
	if cfg.TLS != nil {
		conn, err = (&tls.Dialer{NetDialer: dialer, Config: cfg.TLS}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = dialer.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return respConn{}, err
	}
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	c := respConn{conn: conn, r: bufio.NewReader(conn)}
	if cfg.Username != "" || cfg.Password != "" {
		args := []string{"AUTH", cfg.Password}
		if cfg.Username != "" {
			args = []string{"AUTH", cfg.Username, cfg.Password}
		}
		if err := c.do(args...); err != nil {
			conn.Close()
			// A refusal is not the master refusing a stall.
			return respConn{}, fmt.Errorf("AUTH: %s", err.Error())
		}
	}
	return c, nil
}

// serverError is an error reply from the server, as opposed to a network
// failure: the server is there and said no.
type serverError string

func (e serverError) Error() string { return string(e) }

// respConn speaks just enough RESP for commands whose reply is a status
// line: +OK, +PONG or -ERR.
type respConn struct {
	conn net.Conn
	r    *bufio.Reader
}

func (c respConn) do(args ...string) error {
	if err := c.send(args...); err != nil {
		return err
	}
	return c.reply()
}

func (c respConn) send(args ...string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	_, err := c.conn.Write([]byte(b.String()))
	return err
}

func (c respConn) reply() error {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "+"):
		return nil
	case strings.HasPrefix(line, "-"):
		return serverError(line[1:])
	default:
		return fmt.Errorf("unexpected reply %q", line)
	}
}
