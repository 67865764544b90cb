package simredis

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
)

// client is a test's RESP2 client on one connection, to a simulated
// master or a real redis-server: it sends commands and returns each reply
// raw, as RESP, for the tests to compare with what Redis sends.
type client struct {
	w io.Writer
	r *bufio.Reader
}

func newClient(conn net.Conn) *client { return &client{w: conn, r: bufio.NewReader(conn)} }

// write sends one command, an array of bulk strings.
func (c *client) write(args ...string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	_, err := io.WriteString(c.w, b.String())
	return err
}

// read returns the next reply, raw: its type byte, arrays' elements
// included, through its last CRLF.
func (c *client) read() (string, error) {
	var b strings.Builder
	err := readReply(c.r, &b)
	return b.String(), err
}

// do sends a command and returns its reply.
func (c *client) do(args ...string) (string, error) {
	if err := c.write(args...); err != nil {
		return "", err
	}
	return c.read()
}

// readReply copies one reply from r to b.
func readReply(r *bufio.Reader, b *strings.Builder) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	b.WriteString(line)
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return fmt.Errorf("malformed reply line %q", line)
	}
	switch line[0] {
	case '+', '-', ':', '_':
		return nil
	}
	n, err := strconv.Atoi(line[1 : len(line)-2])
	if err != nil {
		return fmt.Errorf("malformed reply line %q", line)
	}
	switch line[0] {
	case '$':
		if n < 0 {
			return nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return err
		}
		b.Write(buf)
	case '*', '>':
		for range n {
			if err := readReply(r, b); err != nil {
				return err
			}
		}
	case '%':
		for range 2 * n {
			if err := readReply(r, b); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("unknown reply type in %q", line)
	}
	return nil
}

// Raw replies, to compare read's with.
func bulk(s string) string   { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }
func integer(n int) string   { return ":" + strconv.Itoa(n) + "\r\n" }
func status(s string) string { return "+" + s + "\r\n" }

const nilBulk = "$-1\r\n"

// parseBulk is a raw bulk string reply's string.
func parseBulk(raw string) (string, error) {
	size, rest, ok := strings.Cut(raw, "\r\n")
	n, err := strconv.Atoi(strings.TrimPrefix(size, "$"))
	if !ok || !strings.HasPrefix(size, "$") || err != nil || n < 0 || len(rest) != n+2 {
		return "", fmt.Errorf("not a bulk string: %q", raw)
	}
	return rest[:n], nil
}

// parseBulks is a raw array reply's bulk strings.
func parseBulks(raw string) ([]string, error) {
	count, rest, ok := strings.Cut(raw, "\r\n")
	n, err := strconv.Atoi(strings.TrimPrefix(count, "*"))
	if !ok || !strings.HasPrefix(count, "*") || err != nil || n < 0 {
		return nil, fmt.Errorf("not an array: %q", raw)
	}
	out := make([]string, 0, n)
	for range n {
		size, tail, ok := strings.Cut(rest, "\r\n")
		l, err := strconv.Atoi(strings.TrimPrefix(size, "$"))
		if !ok || !strings.HasPrefix(size, "$") || err != nil || l < 0 || len(tail) < l+2 {
			return nil, fmt.Errorf("not an array of bulk strings: %q", raw)
		}
		out, rest = append(out, tail[:l]), tail[l+2:]
	}
	if rest != "" {
		return nil, fmt.Errorf("not an array of bulk strings: %q", raw)
	}
	return out, nil
}

// dialT opens a test client's connection to m, through the network.
func dialT(t *testing.T, n *Network, m *Master) (net.Conn, *client) {
	t.Helper()
	c, err := n.Dialer("test")(context.Background(), m.Addr)
	if err != nil {
		t.Fatalf("dial %s: %v", m.Addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c, newClient(c)
}

// do sends a command and returns its raw RESP reply, failing the test on
// a connection error.
func do(t *testing.T, c *client, args ...string) string {
	t.Helper()
	r, err := c.do(args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return r
}

// infoField reads one field from INFO's text.
func infoField(t *testing.T, c *client, section, field string) string {
	t.Helper()
	txt, err := parseBulk(do(t, c, "INFO", section))
	if err != nil {
		t.Fatalf("INFO %s: %v", section, err)
	}
	for _, line := range strings.Split(txt, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == field {
			return v
		}
	}
	t.Fatalf("INFO %s has no %s:\n%s", section, field, txt)
	return ""
}
