package simredis

import (
	"bytes"
	"errors"
	"strconv"
)

// reply is a Redis reply as the store's commands build it: turned into
// RESP2 or RESP3 for a connection (appendRESP), or into Lua values for a
// script (lua.go), without a round trip through the wire format.
type reply struct {
	kind  byte // one of the r* kinds below: RESP3's type bytes
	str   string
	num   int64
	elems []reply // an array's elements; a map's keys and values in turn
}

// The kinds of reply, by their RESP3 type byte.
const (
	rStatus = '+'
	rError  = '-'
	rInt    = ':'
	rBulk   = '$'
	rNil    = '_'
	rArray  = '*'
	rMap    = '%'
	rPush   = '>'
)

func statusReply(s string) reply { return reply{kind: rStatus, str: s} }
func errorReply(s string) reply  { return reply{kind: rError, str: s} }
func intReply(n int64) reply     { return reply{kind: rInt, num: n} }
func bulkReply(s string) reply   { return reply{kind: rBulk, str: s} }
func arrayReply(e []reply) reply { return reply{kind: rArray, elems: e} }

var (
	okReply  = statusReply("OK")
	nilReply = reply{kind: rNil}
)

// Error replies the engine and rueidis tell apart by their first word.
var (
	errWrongType = errorReply("WRONGTYPE Operation against a key holding the wrong kind of value")
	errSyntax    = errorReply("ERR syntax error")
	errNotInt    = errorReply("ERR value is not an integer or out of range")
	errNoScript  = errorReply("NOSCRIPT No matching script. Please use EVAL.")
)

func errArgs(cmd string) reply {
	return errorReply("ERR wrong number of arguments for '" + cmd + "' command")
}

// appendRESP appends r in RESP3, or RESP2 for a connection that did not
// ask for 3 (maps become flat arrays, pushes arrays, nil a nil bulk).
func (r reply) appendRESP(b []byte, resp3 bool) []byte {
	switch r.kind {
	case rStatus, rError:
		b = append(b, r.kind)
		b = append(b, r.str...)
	case rInt:
		b = append(b, ':')
		b = strconv.AppendInt(b, r.num, 10)
	case rBulk:
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(r.str)), 10)
		b = append(b, "\r\n"...)
		b = append(b, r.str...)
	case rNil:
		if resp3 {
			b = append(b, '_')
		} else {
			b = append(b, "$-1"...)
		}
	case rArray, rMap, rPush:
		kind, n := r.kind, len(r.elems)
		switch {
		case !resp3:
			kind = rArray
		case kind == rMap:
			n /= 2
		}
		b = append(b, kind)
		b = strconv.AppendInt(b, int64(n), 10)
		b = append(b, "\r\n"...)
		for _, e := range r.elems {
			b = e.appendRESP(b, resp3)
		}
		return b
	}
	return append(b, "\r\n"...)
}

// errProtocol is a request that is not RESP: the master closes the
// connection, as Redis does.
var errProtocol = errors.New("protocol error")

// parseCommand reads one command, an array of bulk strings, from the
// start of buf: its arguments and the bytes it took, or n == 0 when buf
// does not hold a whole command yet.
func parseCommand(buf []byte) (args []string, n int, err error) {
	line, rest, ok := cutLine(buf)
	if !ok {
		return nil, 0, nil
	}
	if len(line) < 2 || line[0] != '*' {
		return nil, 0, errProtocol
	}
	count, err := strconv.Atoi(string(line[1:]))
	if err != nil || count < 1 || count > 1<<20 {
		return nil, 0, errProtocol
	}
	args = make([]string, 0, count)
	for range count {
		line, rest, ok = cutLine(rest)
		if !ok {
			return nil, 0, nil
		}
		if len(line) < 2 || line[0] != '$' {
			return nil, 0, errProtocol
		}
		size, err := strconv.Atoi(string(line[1:]))
		if err != nil || size < 0 || size > 512<<20 {
			return nil, 0, errProtocol
		}
		if len(rest) < size+2 {
			return nil, 0, nil
		}
		args = append(args, string(rest[:size]))
		rest = rest[size+2:]
	}
	return args, len(buf) - len(rest), nil
}

// cutLine splits buf after its first CRLF, which it drops.
func cutLine(buf []byte) (line, rest []byte, ok bool) {
	i := bytes.Index(buf, []byte("\r\n"))
	if i < 0 {
		return nil, buf, false
	}
	return buf[:i], buf[i+2:], true
}
