package resp

import (
	"bytes"
	"strings"
	"testing"
	"testing/iotest"
)

func TestIsReply(t *testing.T) {
	for _, c := range []struct {
		answer string
		reply  bool
	}{
		{"+PONG\r\n", true}, {"-NOAUTH Authentication required.\r\n", true}, {"$1234\r\n", true}, {"*2\r\n", true},
		{"%1\r\n", true}, {"_\r\n", true}, {"HTTP/1.1 400 Bad Request\r\n", false}, {"SSH-2.0-OpenSSH_9.6\r\n", false},
		{"<!DOCTYPE HTML>\n", false}, {"\x15\x03\x03\x00\x02\x02\x46", false}, {"", false},
	} {
		if got := IsReply([]byte(c.answer)); got != c.reply {
			t.Errorf("IsReply(%q) = %v", c.answer, got)
		}
	}
	if !IsTLSRecord([]byte("\x15\x03\x03\x00\x02\x02\x46")) || !IsTLSRecord([]byte("\x16\x03\x01")) || IsTLSRecord([]byte("HTTP/1.1")) {
		t.Error("IsTLSRecord tells a TLS record from another answer wrongly")
	}
}

// The error quotes the answer's first line and names the kind of server
// when it can.
func TestNotRedisWording(t *testing.T) {
	const check = ": check the address and port"
	for _, c := range []struct {
		answer  string
		overTLS bool
		want    string
	}{
		{"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n", false,
			`not a Redis server: it answered a Redis command with "HTTP/1.1 400 Bad Request", as an HTTP server does` + check},
		{"HTTP/1.0 400 Bad Request\r\n", true,
			`not a Redis server: it speaks TLS and answered a Redis command with "HTTP/1.0 400 Bad Request", as an HTTPS server does` + check},
		{"<!DOCTYPE HTML>\n<html>", false, `not a Redis server: it answered a Redis command with "<!DOCTYPE HTML>", as an HTTP server does` + check},
		{"<html><body>", false, `not a Redis server: it answered a Redis command with "<html><body>", as an HTTP server does` + check},
		{"SSH-2.0-OpenSSH_9.6\r\n", false, `not a Redis server: it answered a Redis command with "SSH-2.0-OpenSSH_9.6"` + check},
		{strings.Repeat("x", 100), false, `not a Redis server: it answered a Redis command with "` + strings.Repeat("x", MaxAnswer) + `"` + check},
	} {
		if got := NotRedis([]byte(c.answer), c.overTLS).Error(); got != c.want {
			t.Errorf("NotRedis(%q, %v):\n%s\nwant\n%s", c.answer, c.overTLS, got, c.want)
		}
	}
}

// ReadAnswer reads to the end of the first line, MaxAnswer bytes or the
// end of the stream, whichever comes first, and no further, however the
// answer arrives.
func TestReadAnswerStopsAtTheLine(t *testing.T) {
	for _, c := range []struct {
		stream, want string
		left         int // bytes of the stream left unread
	}{
		{"TTP/1.1 400 Bad Request\r\nmore", "HTTP/1.1 400 Bad Request\r\n", 4},
		{"\x03\x03\x00\x02\x02\x46", "\x15\x03\x03\x00\x02\x02\x46", 0},
		{strings.Repeat("y", 200), "H" + strings.Repeat("y", MaxAnswer-1), 200 - (MaxAnswer - 1)},
	} {
		first := []byte("H")
		if c.want[0] == 0x15 {
			first = []byte{0x15}
		}
		r := bytes.NewReader([]byte(c.stream))
		if got := ReadAnswer(iotest.OneByteReader(r), first); string(got) != c.want || r.Len() != c.left {
			t.Errorf("ReadAnswer: %q, %d bytes left; want %q, %d left", got, r.Len(), c.want, c.left)
		}
	}
}
