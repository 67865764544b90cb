package engines

import (
	"strings"
	"testing"
)

// Engine names: a quorum engine's NAME@N votes on its first N masters,
// the single-master baselines on one whatever they are given, and every
// other name is refused saying which are known. Every name prints back as
// it was read.
func TestParseEngine(t *testing.T) {
	for _, c := range []struct {
		name  string
		want  Engine
		fixed int
		err   string
	}{
		{"redlock", Engine{Base: Redlock}, 0, ""},
		{"redlock@1", Engine{Base: Redlock, Votes: 1}, 1, ""},
		{"redlock-percmd@3", Engine{Base: RedlockPerCommand, Votes: 3}, 3, ""},
		{"redsync-goredis@2", Engine{Base: RedsyncGoredis, Votes: 2}, 2, ""},
		{"rueidislock", Engine{Base: Rueidislock}, 1, ""},
		{"bsm-redislock", Engine{Base: BsmRedislock}, 1, ""},
		{"nolock", Engine{Base: Nolock}, 0, ""},
		{"bsm-redislock@1", Engine{}, 0, "bsm-redislock runs on one master, the first, and takes no @N"},
		{"rueidislock@3", Engine{}, 0, "rueidislock runs on one master, the first, and takes no @N"},
		{"nolock@1", Engine{}, 0, "nolock uses no masters and takes no @N"},
		{"redlock@0", Engine{}, 0, "the N of redlock@N must be a number of masters, 1 to 63"},
		{"redlock@", Engine{}, 0, "the N of redlock@N must be a number of masters, 1 to 63"},
		{"redlock@x", Engine{}, 0, "the N of redlock@N must be a number of masters, 1 to 63"},
		{"redlock@64", Engine{}, 0, "the N of redlock@N must be a number of masters, 1 to 63"},
		{"zk", Engine{}, 0, "unknown engine (known: " + NamesHelp() + ")"},
		{"zk@1", Engine{}, 0, "unknown engine (known: " + NamesHelp() + ")"},
	} {
		e, err := Parse(c.name)
		if e != c.want || (err == nil) != (c.err == "") || err != nil && err.Error() != c.err {
			t.Errorf("Parse(%q) = %+v, %v; want %+v, %q", c.name, e, err, c.want, c.err)
			continue
		}
		if err == nil && (e.String() != c.name || e.FixedVoters() != c.fixed) {
			t.Errorf("Parse(%q): String %q, FixedVoters %d, want %d", c.name, e, e.FixedVoters(), c.fixed)
		}
	}
	if !MustParse("redlock@1").IsRedlock() || !MustParse("redlock-percmd@2").IsRedlock() || MustParse("bsm-redislock").IsRedlock() ||
		MustParse("nolock").NeedsRedis() || !MustParse("redlock@1").NeedsRedis() {
		t.Error("IsRedlock or NeedsRedis do not see through @N")
	}
	if v := MustParse("redlock@2").Voters(5); v != 2 {
		t.Errorf("redlock@2 on 5 masters votes on %d", v)
	}
	if v := MustParse("bsm-redislock").Voters(5); v != 1 {
		t.Errorf("bsm-redislock on 5 masters votes on %d", v)
	}
	if v := MustParse("redlock@7").Voters(5); v != 5 {
		t.Errorf("redlock@7 on 5 masters votes on %d (Validate refuses it)", v)
	}
	if !strings.Contains(NamesHelp(), "rueidislock, bsm-redislock") || !strings.Contains(NamesHelp(), "redlock@1") {
		t.Errorf("help %q does not name the baselines and NAME@N", NamesHelp())
	}
}

// A list of engines is each known, each once, and prints back as read.
func TestParseList(t *testing.T) {
	es, err := ParseList("redlock, redsync-rueidis,redlock@1")
	if err != nil || JoinNames(es) != "redlock,redsync-rueidis,redlock@1" {
		t.Errorf("ParseList: %v, %v", es, err)
	}
	for list, want := range map[string]string{
		"":                "empty list",
		"redlock,zk":      `unknown engine "zk"`,
		"redlock,redlock": `engine "redlock" is listed twice`,
		"nolock@2":        `engine "nolock@2": nolock uses no masters`,
	} {
		if _, err := ParseList(list); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("ParseList(%q) = %v, want %q", list, err, want)
		}
	}
}
