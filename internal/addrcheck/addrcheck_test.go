package addrcheck

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"127.0.0.1:6379", "127.0.0.1:6379", true},
		{"a:1,b:2, c:3", "a:1,b:2,c:3", true},
		{"[::1]:6379", "[::1]:6379", true},
		{"redis.internal:7000", "redis.internal:7000", true},
		{"", "", false},
		{"127.0.0.1", "", false},
		{"127.0.0.1:", "", false},
		{":6379", "", false},
		{"127.0.0.1:0", "", false},
		{"127.0.0.1:65536", "", false},
		{"127.0.0.1:http", "", false},
		{"127.0.0.1:06379", "", false},
		{"a:1,,b:2", "", false},
		{"a:1,a:1", "", false},
		{"a:1,", "", false},
		{"a b:1", "", false},
		{"a/b:1", "", false},
	} {
		got, err := Parse(c.in)
		if (err == nil) != c.ok || (c.ok && strings.Join(got, ",") != c.want) {
			t.Errorf("Parse(%q) = %q, %v; want %q, ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"127.0.0.1:6379", "a:1,b:2", "[::1]:1", "a:1,a:1", " a:1 , b:2 ", "x:0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := Parse(s)
		if err != nil {
			return
		}
		if len(m) == 0 {
			t.Fatalf("Parse(%q) accepted an empty list", s)
		}
		back, err := Parse(strings.Join(m, ","))
		if err != nil || strings.Join(back, ",") != strings.Join(m, ",") {
			t.Fatalf("Parse(%q) = %q, parsed back %q, %v", s, m, back, err)
		}
	})
}
