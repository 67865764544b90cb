// Package resp tells a Redis server from another one by the first bytes
// it answers a command with, and words the error alike for the library
// (multiplex, when it connects) and the tools (redlock-bench's probe of
// the masters): an HTTP, HTTPS or SSH server at a master's address is
// "not a Redis server", with what it answered, wherever it is met. It
// imports the standard library only, so that multiplex may use it.
package resp

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"time"
)

// MaxAnswer is how many bytes of an answer Ping and ReadAnswer read, and
// the error quotes at most: a status line or a banner fits.
const MaxAnswer = 64

// IsReply reports whether b starts as a Redis reply does: with a RESP2 or
// RESP3 type byte ("+PONG", "-NOAUTH ...", "$1234", ...).
func IsReply(b []byte) bool {
	return len(b) > 0 && bytes.IndexByte([]byte("+-:$*_,#!=(%~>|"), b[0]) >= 0
}

// IsTLSRecord reports whether b starts as a TLS record (an alert or a
// handshake) does: what a TLS server may answer a plain-text command with.
func IsTLSRecord(b []byte) bool {
	return len(b) >= 2 && (b[0] == 0x15 || b[0] == 0x16) && b[1] == 0x03
}

// NotRedisError is the error of a server that answered a Redis command
// with something that is not a Redis reply.
type NotRedisError struct {
	// Answer is the first line of what the server answered, at most
	// MaxAnswer bytes.
	Answer string
	// OverTLS is set when the answer came over TLS.
	OverTLS bool
}

func (e *NotRedisError) Error() string {
	kind := ""
	if isHTTP(e.Answer) {
		kind = ", as an HTTP server does"
		if e.OverTLS {
			kind = ", as an HTTPS server does"
		}
	}
	did := "answered"
	if e.OverTLS {
		did = "speaks TLS and answered"
	}
	return fmt.Sprintf("not a Redis server: it %s a Redis command with %q%s: check the address and port", did, e.Answer, kind)
}

// NotRedis is the error of a server that answered a Redis command with
// answer, over TLS when overTLS; it quotes answer's first line.
func NotRedis(answer []byte, overTLS bool) *NotRedisError {
	line, _, _ := bytes.Cut(answer[:min(len(answer), MaxAnswer)], []byte("\n"))
	return &NotRedisError{Answer: string(bytes.TrimRight(line, "\r")), OverTLS: overTLS}
}

// isHTTP reports whether an answer's first line is an HTTP server's: a
// status line, or the HTML page alone that a server answers a request
// line without a version with (as HTTP/0.9 did; Python's http.server
// does).
func isHTTP(line string) bool {
	if len(line) >= 5 && line[:5] == "HTTP/" {
		return true
	}
	for _, p := range []string{"<!doctype html", "<html"} {
		if len(line) >= len(p) && bytes.EqualFold([]byte(line[:len(p)]), []byte(p)) {
			return true
		}
	}
	return false
}

// ReadAnswer reads on from r after the first bytes b of an answer, one
// byte at a time, to the end of its first line, MaxAnswer bytes, or the
// end of the stream or an error (a deadline), and returns b with what it
// read: enough of an answer to tell what answered, and never more.
func ReadAnswer(r io.Reader, b []byte) []byte {
	one := make([]byte, 1)
	for len(b) < MaxAnswer && (len(b) == 0 || b[len(b)-1] != '\n') {
		if _, err := io.ReadFull(r, one); err != nil {
			break
		}
		b = append(b, one[0])
	}
	return b
}

// Ping dials addr (over TLS when tc is set), sends PING and returns the
// first line of the answer, read as ReadAnswer does; nothing when the dial,
// the handshake or the write failed or nothing came back before ctx's
// deadline or timeout, whichever is first. It is a second look at a server
// a connection failed on, and sends nothing but PING.
func Ping(ctx context.Context, addr string, tc *tls.Config, timeout time.Duration) []byte {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var c net.Conn
	var err error
	if tc != nil {
		c, err = (&tls.Dialer{Config: tc}).DialContext(ctx, "tcp", addr)
	} else {
		c, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil
	}
	defer c.Close()
	return PingConn(ctx, c)
}

// PingConn sends PING on c and returns the first line of the answer, as
// Ping does, reading until ctx's deadline at most.
func PingConn(ctx context.Context, c net.Conn) []byte {
	if deadline, ok := ctx.Deadline(); ok {
		c.SetDeadline(deadline)
	}
	// A cancelled ctx (a client closing) ends the read at once.
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return nil
	}
	return ReadAnswer(c, nil)
}
