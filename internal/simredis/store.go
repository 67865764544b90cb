package simredis

import (
	"crypto/sha1"
	"encoding/hex"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-bench/redlock/internal/keyslot"
)

// store is a simulated master's data set, with Redis's semantics for the
// commands the engine's scripts and calls use (strings and sorted sets,
// expiry, scripts; see the package doc for what it leaves out). The
// master's loop runs one command at a time on it, so it has no lock.
//
// Expiry is Redis's: a key's deadline is absolute, on the master's clock,
// and a key past it is gone the moment anything looks (Redis also
// expires keys in the background, which no command can tell from this).
type store struct {
	keys    map[string]*entry
	scripts map[string]string // SHA1 → body, as SCRIPT LOAD and EVAL leave them
	lua     *luaRunner        // made on the first script, kept: see lua.go
	// now is the master's clock while a command runs.
	now time.Time
	// changed is told every key a command may have written, expiry
	// included, for the master's key log.
	changed func(key string)
	// publish delivers a message to the master's subscribers and returns
	// how many got it.
	publish func(channel, msg string) int
	// spublish is SPUBLISH's: to the shard's SSUBSCRIBE subscribers.
	spublish func(channel, msg string) int
	// onCommand is told every command, scripts' calls included.
	onCommand func(args []string)
	// cluster: the store is a cluster node's, where a script may touch
	// only keys of its declared keys' slot, scriptSlot while one runs
	// (-1: none).
	cluster    bool
	scriptSlot int
	// nonLocal, on a cluster node, reports whether a script's call names
	// a key of a migrating slot the node does not serve (see the
	// Master's nonLocalLocked); nil: none.
	nonLocal func(args []string) bool
}

// entry is a key's value: a string, or a sorted set when z is set.
type entry struct {
	str      string
	z        *zset
	expireAt time.Time // zero: no TTL
}

func newStore() *store {
	return &store{keys: make(map[string]*entry), scripts: make(map[string]string),
		changed: func(string) {}, publish: func(string, string) int { return 0 },
		spublish: func(string, string) int { return 0 }, scriptSlot: -1, onCommand: func([]string) {}}
}

// get returns key's entry, deleting it first if its deadline has passed.
func (s *store) get(key string) *entry {
	e := s.keys[key]
	if e != nil && !e.expireAt.IsZero() && s.now.After(e.expireAt) {
		delete(s.keys, key)
		s.changed(key)
		return nil
	}
	return e
}

// exists reports whether key is there and not past its deadline, as a
// cluster node's routing looks (without deleting it).
func (s *store) exists(key string) bool {
	e := s.keys[key]
	return e != nil && (e.expireAt.IsZero() || !s.now.After(e.expireAt))
}

func (s *store) del(key string) bool {
	if s.get(key) == nil {
		return false
	}
	delete(s.keys, key)
	s.changed(key)
	return true
}

// scriptable reports whether a script may call cmd: the data commands,
// not the connection's.
func scriptable(cmd string) bool {
	switch cmd {
	case "EVAL", "EVALSHA", "SCRIPT", "SUBSCRIBE", "UNSUBSCRIBE", "SSUBSCRIBE", "SUNSUBSCRIBE", "HELLO", "CLIENT", "QUIT", "SELECT":
		return false
	}
	return true
}

// exec runs one data command (args[0] is its name, upper case).
func (s *store) exec(args []string) reply {
	cmd, a := args[0], args[1:]
	s.onCommand(args)
	switch cmd {
	case "INCR":
		if len(a) != 1 {
			return errArgs("incr")
		}
		e := s.get(a[0])
		n := int64(0)
		switch {
		case e == nil:
			e = &entry{}
			s.keys[a[0]] = e
		case e.z != nil:
			return errWrongType
		default:
			var err error
			if n, err = strconv.ParseInt(e.str, 10, 64); err != nil {
				return errNotInt
			}
		}
		e.str = strconv.FormatInt(n+1, 10)
		s.changed(a[0])
		return intReply(n + 1)
	case "GET":
		if len(a) != 1 {
			return errArgs("get")
		}
		e := s.get(a[0])
		switch {
		case e == nil:
			return nilReply
		case e.z != nil:
			return errWrongType
		}
		return bulkReply(e.str)
	case "MGET":
		if len(a) < 1 {
			return errArgs("mget")
		}
		out := make([]reply, len(a))
		for i, k := range a {
			// Redis answers nil for a key of another type, not an error.
			if e := s.get(k); e != nil && e.z == nil {
				out[i] = bulkReply(e.str)
			} else {
				out[i] = nilReply
			}
		}
		return arrayReply(out)
	case "SET":
		return s.set(a)
	case "DEL":
		if len(a) < 1 {
			return errArgs("del")
		}
		n := 0
		for _, k := range a {
			if s.del(k) {
				n++
			}
		}
		return intReply(int64(n))
	case "EXISTS":
		if len(a) < 1 {
			return errArgs("exists")
		}
		n := 0
		for _, k := range a {
			if s.get(k) != nil {
				n++
			}
		}
		return intReply(int64(n))
	case "PEXPIRE", "EXPIRE":
		if len(a) != 2 {
			return errArgs(strings.ToLower(cmd))
		}
		n, err := strconv.ParseInt(a[1], 10, 64)
		if err != nil {
			return errNotInt
		}
		d := time.Duration(n) * time.Millisecond
		if cmd == "EXPIRE" {
			d = time.Duration(n) * time.Second
		}
		e := s.get(a[0])
		if e == nil {
			return intReply(0)
		}
		if d <= 0 {
			s.del(a[0])
			return intReply(1)
		}
		e.expireAt = s.now.Add(d)
		s.changed(a[0])
		return intReply(1)
	case "PEXPIREAT":
		// An absolute deadline in ms of the master's clock; one already
		// past deletes the key, as on a master.
		if len(a) != 2 {
			return errArgs("pexpireat")
		}
		n, err := strconv.ParseInt(a[1], 10, 64)
		if err != nil {
			return errNotInt
		}
		e := s.get(a[0])
		if e == nil {
			return intReply(0)
		}
		at := time.UnixMilli(n)
		if !at.After(s.now) {
			s.del(a[0])
			return intReply(1)
		}
		e.expireAt = at
		s.changed(a[0])
		return intReply(1)
	case "PTTL", "TTL":
		if len(a) != 1 {
			return errArgs(strings.ToLower(cmd))
		}
		e := s.get(a[0])
		switch {
		case e == nil:
			return intReply(-2)
		case e.expireAt.IsZero():
			return intReply(-1)
		}
		left := e.expireAt.Sub(s.now)
		if cmd == "TTL" {
			return intReply(int64((left + 500*time.Millisecond) / time.Second))
		}
		return intReply(int64(left / time.Millisecond))
	case "APPEND":
		if len(a) != 2 {
			return errArgs("append")
		}
		e := s.get(a[0])
		switch {
		case e == nil:
			e = &entry{}
			s.keys[a[0]] = e
		case e.z != nil:
			return errWrongType
		}
		e.str += a[1]
		s.changed(a[0])
		return intReply(int64(len(e.str)))
	case "TYPE":
		if len(a) != 1 {
			return errArgs("type")
		}
		switch e := s.get(a[0]); {
		case e == nil:
			return statusReply("none")
		case e.z != nil:
			return statusReply("zset")
		}
		return statusReply("string")
	case "TIME":
		us := s.now.UnixMicro()
		return arrayReply([]reply{bulkReply(strconv.FormatInt(us/1e6, 10)), bulkReply(strconv.FormatInt(us%1e6, 10))})
	case "ZADD":
		return s.zadd(a)
	case "ZREM":
		if len(a) < 2 {
			return errArgs("zrem")
		}
		z, bad := s.zsetOf(a[0])
		if bad {
			return errWrongType
		}
		n := 0
		for _, m := range a[1:] {
			if z != nil && z.rem(m) {
				n++
			}
		}
		s.dropEmpty(a[0], z, n > 0)
		return intReply(int64(n))
	case "ZPOPMIN":
		if len(a) < 1 || len(a) > 2 {
			return errArgs("zpopmin")
		}
		count := 1
		if len(a) == 2 {
			n, err := strconv.Atoi(a[1])
			if err != nil || n < 0 {
				return errNotInt
			}
			count = n
		}
		z, bad := s.zsetOf(a[0])
		if bad {
			return errWrongType
		}
		out := []reply{}
		for ; z != nil && count > 0 && len(z.sorted) > 0; count-- {
			m := z.sorted[0]
			z.rem(m.member)
			out = append(out, bulkReply(m.member), bulkReply(formatScore(m.score)))
		}
		s.dropEmpty(a[0], z, len(out) > 0)
		return arrayReply(out)
	case "ZRANGE":
		return s.zrange(a)
	case "ZCARD":
		if len(a) != 1 {
			return errArgs("zcard")
		}
		z, bad := s.zsetOf(a[0])
		if bad {
			return errWrongType
		}
		if z == nil {
			return intReply(0)
		}
		return intReply(int64(len(z.sorted)))
	case "ZCOUNT", "ZREMRANGEBYSCORE":
		if len(a) != 3 {
			return errArgs(strings.ToLower(cmd))
		}
		lo, ok1 := parseBound(a[1])
		hi, ok2 := parseBound(a[2])
		if !ok1 || !ok2 {
			return errorReply("ERR min or max is not a float")
		}
		z, bad := s.zsetOf(a[0])
		if bad {
			return errWrongType
		}
		var in []string
		if z != nil {
			for _, m := range z.sorted {
				if lo.below(m.score) && hi.above(m.score) {
					in = append(in, m.member)
				}
			}
		}
		if cmd == "ZREMRANGEBYSCORE" {
			for _, m := range in {
				z.rem(m)
			}
			s.dropEmpty(a[0], z, len(in) > 0)
		}
		return intReply(int64(len(in)))
	case "ZSCORE", "ZRANK":
		// The readers' share asks with ZRANK whether its entry is there:
		// an integer reply, cheaper for the master than ZSCORE's double.
		if len(a) != 2 {
			return errArgs(strings.ToLower(cmd))
		}
		z, bad := s.zsetOf(a[0])
		if bad {
			return errWrongType
		}
		if z == nil {
			return nilReply
		}
		sc, ok := z.byMember[a[1]]
		if !ok {
			return nilReply
		}
		if cmd == "ZSCORE" {
			return bulkReply(formatScore(sc))
		}
		i, _ := slices.BinarySearchFunc(z.sorted, zmember{sc, a[1]}, z.cmp)
		return intReply(int64(i))
	case "PUBLISH":
		if len(a) != 2 {
			return errArgs("publish")
		}
		return intReply(int64(s.publish(a[0], a[1])))
	case "SPUBLISH":
		if len(a) != 2 {
			return errArgs("spublish")
		}
		return intReply(int64(s.spublish(a[0], a[1])))
	case "DBSIZE":
		n := 0
		for k := range s.keys {
			if s.get(k) != nil {
				n++
			}
		}
		return intReply(int64(n))
	case "EVAL", "EVALSHA":
		return s.eval(cmd, a)
	case "SCRIPT":
		return s.script(a)
	}
	return errorReply("ERR unknown command '" + strings.ToLower(cmd) + "'")
}

// set is SET key value [NX|XX] [GET] [PX ms|EX s|KEEPTTL].
func (s *store) set(a []string) reply {
	if len(a) < 2 {
		return errArgs("set")
	}
	key, val := a[0], a[1]
	var nx, xx, get, keep bool
	var ttl time.Duration
	for i := 2; i < len(a); i++ {
		switch strings.ToUpper(a[i]) {
		case "NX":
			nx = true
		case "XX":
			xx = true
		case "GET":
			get = true
		case "KEEPTTL":
			keep = true
		case "PX", "EX":
			if i+1 >= len(a) || ttl != 0 {
				return errSyntax
			}
			n, err := strconv.ParseInt(a[i+1], 10, 64)
			if err != nil {
				return errNotInt
			}
			if n <= 0 {
				return errorReply("ERR invalid expire time in 'set' command")
			}
			unit := time.Millisecond
			if strings.ToUpper(a[i]) == "EX" {
				unit = time.Second
			}
			ttl = time.Duration(n) * unit
			i++
		default:
			return errSyntax
		}
	}
	if (nx && xx) || (keep && ttl != 0) {
		return errSyntax
	}
	old := s.get(key)
	if get && old != nil && old.z != nil {
		return errWrongType
	}
	prev := nilReply
	if get && old != nil {
		prev = bulkReply(old.str)
	}
	if (nx && old != nil) || (xx && old == nil) {
		if get {
			return prev
		}
		return nilReply
	}
	e := &entry{str: val}
	switch {
	case ttl != 0:
		e.expireAt = s.now.Add(ttl)
	case keep && old != nil:
		e.expireAt = old.expireAt
	}
	s.keys[key] = e
	s.changed(key)
	if get {
		return prev
	}
	return okReply
}

// zsetOf returns key's sorted set (nil when the key is missing), or bad
// when the key holds a string.
func (s *store) zsetOf(key string) (z *zset, bad bool) {
	e := s.get(key)
	if e == nil {
		return nil, false
	}
	if e.z == nil {
		return nil, true
	}
	return e.z, false
}

// dropEmpty deletes an emptied sorted set, as Redis does, and logs a
// change.
func (s *store) dropEmpty(key string, z *zset, changed bool) {
	if z != nil && len(z.sorted) == 0 {
		delete(s.keys, key)
	}
	if changed {
		s.changed(key)
	}
}

// zadd is ZADD key [NX|XX] [CH] score member [score member ...].
func (s *store) zadd(a []string) reply {
	if len(a) < 3 {
		return errArgs("zadd")
	}
	key := a[0]
	var nx, xx, ch bool
	i := 1
opts:
	for ; i < len(a); i++ {
		switch strings.ToUpper(a[i]) {
		case "NX":
			nx = true
		case "XX":
			xx = true
		case "CH":
			ch = true
		default:
			break opts
		}
	}
	pairs := a[i:]
	if len(pairs) == 0 || len(pairs)%2 != 0 || (nx && xx) {
		return errSyntax
	}
	scores := make([]float64, len(pairs)/2)
	for j := range scores {
		f, err := strconv.ParseFloat(pairs[2*j], 64)
		if err != nil || math.IsNaN(f) {
			return errorReply("ERR value is not a valid float")
		}
		scores[j] = f
	}
	z, bad := s.zsetOf(key)
	if bad {
		return errWrongType
	}
	if z == nil {
		z = newZset()
		s.keys[key] = &entry{z: z}
	}
	added, changed := 0, 0
	for j, sc := range scores {
		m := pairs[2*j+1]
		old, ok := z.byMember[m]
		switch {
		case ok && (nx || old == sc):
		case ok:
			z.rem(m)
			z.add(m, sc)
			changed++
		case !xx:
			z.add(m, sc)
			added++
		}
	}
	s.dropEmpty(key, z, added+changed > 0)
	if ch {
		return intReply(int64(added + changed))
	}
	return intReply(int64(added))
}

// zrange is ZRANGE key start stop [WITHSCORES], by index.
func (s *store) zrange(a []string) reply {
	if len(a) < 3 || len(a) > 4 {
		return errArgs("zrange")
	}
	withScores := len(a) == 4
	if withScores && strings.ToUpper(a[3]) != "WITHSCORES" {
		return errSyntax
	}
	start, err1 := strconv.Atoi(a[1])
	stop, err2 := strconv.Atoi(a[2])
	if err1 != nil || err2 != nil {
		return errNotInt
	}
	z, bad := s.zsetOf(a[0])
	if bad {
		return errWrongType
	}
	out := []reply{}
	if z == nil {
		return arrayReply(out)
	}
	n := len(z.sorted)
	if start < 0 {
		start = max(n+start, 0)
	}
	if stop < 0 {
		stop = n + stop
	}
	stop = min(stop, n-1)
	for i := start; i <= stop; i++ {
		out = append(out, bulkReply(z.sorted[i].member))
		if withScores {
			out = append(out, bulkReply(formatScore(z.sorted[i].score)))
		}
	}
	return arrayReply(out)
}

// bound is one end of a score range: "-inf", "+inf", "1.5" or "(1.5"
// (exclusive).
type bound struct {
	v    float64
	open bool
}

func parseBound(s string) (bound, bool) {
	b := bound{}
	if rest, ok := strings.CutPrefix(s, "("); ok {
		b.open, s = true, rest
	}
	switch strings.ToLower(s) {
	case "-inf":
		b.v = math.Inf(-1)
	case "+inf", "inf":
		b.v = math.Inf(1)
	default:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) {
			return b, false
		}
		b.v = f
	}
	return b, true
}

// below reports whether x is within the range that b starts.
func (b bound) below(x float64) bool { return x > b.v || (!b.open && x == b.v) }

// above reports whether x is within the range that b ends.
func (b bound) above(x float64) bool { return x < b.v || (!b.open && x == b.v) }

// formatScore prints a score as Redis does (%.17g).
func formatScore(f float64) string { return strconv.FormatFloat(f, 'g', 17, 64) }

// zset is a sorted set: members ordered by score, then by member.
type zset struct {
	byMember map[string]float64
	sorted   []zmember
}

type zmember struct {
	score  float64
	member string
}

func newZset() *zset { return &zset{byMember: make(map[string]float64)} }

// String lists the members in order, for the key log.
// clone is a copy of z, for a replica's copy of a store.
func (z *zset) clone() *zset {
	return &zset{byMember: maps.Clone(z.byMember), sorted: slices.Clone(z.sorted)}
}

func (z *zset) String() string {
	var b strings.Builder
	b.WriteString("<zset")
	for _, m := range z.sorted {
		b.WriteByte(' ')
		b.WriteString(m.member)
	}
	b.WriteByte('>')
	return b.String()
}

func (z *zset) cmp(a zmember, b zmember) int {
	switch {
	case a.score < b.score:
		return -1
	case a.score > b.score:
		return 1
	}
	return strings.Compare(a.member, b.member)
}

func (z *zset) add(member string, score float64) {
	m := zmember{score, member}
	i, _ := slices.BinarySearchFunc(z.sorted, m, z.cmp)
	z.sorted = slices.Insert(z.sorted, i, m)
	z.byMember[member] = score
}

func (z *zset) rem(member string) bool {
	sc, ok := z.byMember[member]
	if !ok {
		return false
	}
	i, found := slices.BinarySearchFunc(z.sorted, zmember{sc, member}, z.cmp)
	if found {
		z.sorted = slices.Delete(z.sorted, i, i+1)
	}
	delete(z.byMember, member)
	return true
}

// eval is EVAL body numkeys key... arg... and EVALSHA sha numkeys ....
func (s *store) eval(cmd string, a []string) reply {
	if len(a) < 2 {
		return errArgs(strings.ToLower(cmd))
	}
	body := a[0]
	if cmd == "EVALSHA" {
		var ok bool
		if body, ok = s.scripts[strings.ToLower(a[0])]; !ok {
			return errNoScript
		}
	}
	nk, err := strconv.Atoi(a[1])
	switch {
	case err != nil:
		return errNotInt
	case nk < 0 || nk > len(a)-2:
		return errorReply("ERR Number of keys can't be greater than number of args")
	}
	if s.lua == nil {
		s.lua = newLuaRunner(s)
	}
	if s.cluster && nk > 0 {
		s.scriptSlot = keyslot.KeySlot(a[2])
		defer func() { s.scriptSlot = -1 }()
	}
	r := s.lua.run(body, a[2:2+nk], a[2+nk:])
	if cmd == "EVAL" && !s.lua.compileFailed {
		s.scripts[sha1Hex(body)] = body
	}
	return r
}

// script is SCRIPT LOAD body, SCRIPT EXISTS sha..., SCRIPT FLUSH.
func (s *store) script(a []string) reply {
	if len(a) < 1 {
		return errArgs("script")
	}
	switch strings.ToUpper(a[0]) {
	case "LOAD":
		if len(a) != 2 {
			return errArgs("script|load")
		}
		if _, err := compileLua(a[1]); err != nil {
			return errorReply("ERR Error compiling script (new function): " + err.Error())
		}
		sha := sha1Hex(a[1])
		s.scripts[sha] = a[1]
		return bulkReply(sha)
	case "EXISTS":
		out := make([]reply, 0, len(a)-1)
		for _, sha := range a[1:] {
			_, ok := s.scripts[strings.ToLower(sha)]
			out = append(out, intReply(map[bool]int64{false: 0, true: 1}[ok]))
		}
		return arrayReply(out)
	case "FLUSH":
		clear(s.scripts)
		return okReply
	}
	return errorReply("ERR unknown subcommand '" + a[0] + "'")
}

func sha1Hex(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}
