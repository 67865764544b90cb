package multiplex

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/redlock-bench/redlock/internal/resp"
)

// What a connection's first read makes of a server that answers INFO
// with something other than a Redis reply: another server is "not a
// Redis server", as redlock-bench says it, without the "INFO server"
// prefix; a TLS record on a plain connection asks whether the master
// wants TLS, which redlock exec turns into "add --tls".
func TestFirstReadNamesANonRedisServer(t *testing.T) {
	for _, c := range []struct {
		name, answer string
		want         string
		notRedis     bool
	}{
		{"http", "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
			`not a Redis server: it answered a Redis command with "HTTP/1.1 400 Bad Request", as an HTTP server does: check the address and port`, true},
		{"tls alert", "\x15\x03\x03\x00\x02\x02\x46", "INFO server: it answered with a TLS record (does the master want TLS?)", false},
	} {
		client, server := net.Pipe()
		go func() {
			defer server.Close()
			server.SetDeadline(time.Now().Add(time.Minute))
			// Every command rawInfo writes goes in one write.
			if _, err := server.Read(make([]byte, 4096)); err == nil {
				io.WriteString(server, c.answer)
			}
		}()
		_, err := rawInfo(client, time.Now().Add(time.Minute), "", "", false)
		client.Close()
		var nr *resp.NotRedisError
		if err == nil || err.Error() != c.want || errors.As(err, &nr) != c.notRedis {
			t.Errorf("%s: %v\nwant %s", c.name, err, c.want)
		}
	}
}
