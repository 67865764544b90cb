package fault

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		spec string
		want Schedule
	}{
		{"", nil},
		{"   ", nil},
		{"kill:2@5s", Schedule{{Action: Kill, Node: 2, At: 5 * time.Second}}},
		{"restart:0@0s", Schedule{{Action: Restart, Node: 0}}},
		{"restart:0@0", Schedule{{Action: Restart, Node: 0}}},
		{"pause:3@10s+4s", Schedule{{Action: Pause, Node: 3, At: 10 * time.Second, For: 4 * time.Second}}},
		{"slow:1=20ms@0s+10s", Schedule{{Action: Slow, Node: 1, Latency: 20 * time.Millisecond, For: 10 * time.Second}}},
		{"cut:4@15s+5s", Schedule{{Action: Cut, Node: 4, At: 15 * time.Second, For: 5 * time.Second}}},
		{"stall:0@1m30s+1.5s", Schedule{{Action: Stall, Node: 0, At: 90 * time.Second, For: 1500 * time.Millisecond}}},
		{"kill:2@5s, restart:2@6s ,pause:3@10s+4s", Schedule{
			{Action: Kill, Node: 2, At: 5 * time.Second},
			{Action: Restart, Node: 2, At: 6 * time.Second},
			{Action: Pause, Node: 3, At: 10 * time.Second, For: 4 * time.Second},
		}},
		{"kill:007@250ms", Schedule{{Action: Kill, Node: 7, At: 250 * time.Millisecond}}},
	}
	for _, tt := range tests {
		got, err := Parse(tt.spec)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.spec, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Parse(%q) = %#v, want %#v", tt.spec, got, tt.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		spec string
		want string // substring of the message
		pos  int
	}{
		{",", "empty item", 1},
		{"kill:1@1s,", "empty item", 2},
		{"kill", "no ':'", 1},
		{"boom:1@1s", `unknown action "boom"; want one of kill, restart, pause, slow, cut, stall`, 1},
		{"KILL:1@1s", `unknown action "KILL"`, 1},
		{"kill:1", "no '@'", 1},
		{"kill:@1s", "missing node", 1},
		{"kill:-1@1s", `node "-1" is not a 0-based index`, 1},
		{"kill:x@1s", `node "x" is not a 0-based index`, 1},
		{"kill:99999999999999999999@1s", "implausibly large", 1},
		{"kill:1@", "start time: missing duration", 1},
		{"kill:1@5", `duration "5" has no unit (write 5s or 5ms)`, 1},
		{"kill:1@-5s", "must not carry a sign", 1},
		{"kill:1@five", "not a Go duration", 1},
		{"kill:1@1s+2s", "kill happens at one instant and takes no +FOR", 1},
		{"restart:1=3s@1s", "restart takes no =ARG", 1},
		{"pause:1@1s", "pause needs a duration: pause:3@10s+4s", 1},
		{"pause:1@1s+", "duration: missing duration", 1},
		{"pause:1@1s+0s", "pause duration must be above zero", 1},
		{"pause:1@1s+-1s", "must not carry a sign", 1},
		{"cut:1@+5s", "start time: missing duration", 1},
		{"slow:1@1s+2s", "slow needs a latency: slow:1=20ms@0s+10s", 1},
		{"slow:1=@1s+2s", "latency: missing duration", 1},
		{"slow:1=1.5ms@1s+2s", "whole number of milliseconds", 1},
		{"slow:1=0s@1s+2s", "at least 1ms", 1},
		{"stall:1@1s+25h", "exceeds the 24h0m0s limit", 1},
		{"stall:1@23h+2h", "after the 24h0m0s limit", 1},
		{"kill:1@1s,cut:1=1ms@2s+1s", "cut takes no =ARG", 2},
	}
	for _, tt := range tests {
		s, err := Parse(tt.spec)
		if err == nil {
			t.Errorf("Parse(%q) = %v, want an error", tt.spec, s)
			continue
		}
		var ie *ItemError
		if !errors.As(err, &ie) || !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q): %v is not an *ItemError wrapping ErrSyntax", tt.spec, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tt.want) || ie.Pos != tt.pos || strings.Contains(msg, "\n") {
			t.Errorf("Parse(%q) error = %q (item %d), want item %d and one line containing %q", tt.spec, msg, ie.Pos, tt.pos, tt.want)
		}
		if !strings.HasPrefix(msg, "fault: item ") {
			t.Errorf("Parse(%q) error %q lacks the package prefix", tt.spec, msg)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		spec  string
		n     int
		local bool
		want  error
		msg   string
	}{
		{"kill:4@1s,restart:4@2s,pause:0@1s+1s,slow:1=5ms@0s+1s,cut:2@0s+1s,stall:3@0s+1s", 5, true, nil, ""},
		{"stall:4@0s+1s", 5, false, nil, ""},
		{"kill:5@1s", 5, true, ErrNodeRange, "node 5 out of range: 5 masters (0-4); nodes are 0-based"},
		{"stall:7@1s+1s", 5, false, ErrNodeRange, "node 7 out of range: 5 masters (0-4)"},
		{"stall:0@1s+1s", 0, false, ErrNodeRange, "node 0 out of range: no masters"},
		{"pause:1@2s+3s", 5, false, ErrNeedsLocal, "pause needs control of the master's process, which redlock-bench has only for masters it starts itself; with --masters only stall (DEBUG SLEEP) is offered, e.g. stall:1@2s+5s"},
		{"kill:1@2s", 3, false, ErrNeedsLocal, "kill needs control of the master's process"},
		{"restart:1@2s", 3, false, ErrNeedsLocal, "restart needs control"},
		{"cut:1@2s+1s", 3, false, ErrNeedsLocal, "cut needs the proxy in front of the master"},
		{"slow:1=1ms@2s+1s", 3, false, ErrNeedsLocal, "slow needs the proxy"},
		{"pause:1@0s+5s,pause:1@4s+1s", 3, true, ErrOverlap, `overlaps item 1 "pause:1@0s+5s" on the same node`},
		{"pause:1@0s+5s,pause:1@5s+1s", 3, true, nil, ""},
		{"pause:1@0s+5s,pause:2@1s+1s,cut:1@1s+1s", 3, true, nil, ""},
		{"kill:1@1s,kill:1@1s", 3, true, ErrOverlap, "overlaps item 1"},
		{"kill:1@1s,restart:1@1s,kill:1@2s", 3, true, nil, ""},
	}
	for _, tt := range tests {
		s, err := Parse(tt.spec)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.spec, err)
		}
		err = s.Validate(tt.n, tt.local)
		if tt.want == nil {
			if err != nil {
				t.Errorf("Validate(%q, %d, %v): %v", tt.spec, tt.n, tt.local, err)
			}
			continue
		}
		if !errors.Is(err, tt.want) || !strings.Contains(fmt.Sprint(err), tt.msg) {
			t.Errorf("Validate(%q, %d, %v) = %v, want %v containing %q", tt.spec, tt.n, tt.local, err, tt.want, tt.msg)
		}
	}
}

func TestStringRoundTrip(t *testing.T) {
	spec := "kill:2@5s,restart:2@6s,pause:3@10s+4s,slow:1=20ms@0s+10s,cut:4@15s+5s,stall:0@1m30s+1.5s"
	s, err := Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.String(); got != spec {
		t.Errorf("String() = %q, want %q", got, spec)
	}
	if got := s.End(); got != 91500*time.Millisecond {
		t.Errorf("End() = %s, want 1m31.5s", got)
	}
}

func ExampleParse() {
	s, err := Parse("kill:2@5s, restart:2@6s, slow:1=20ms@0s+10s")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s)
	fmt.Println(s.Validate(5, false))
	_, err = Parse("pause:3@10s")
	fmt.Println(err)
	// Output:
	// kill:2@5s,restart:2@6s,slow:1=20ms@0s+10s
	// fault: item 1 "kill:2@5s": kill needs control of the master's process, which redlock-bench has only for masters it starts itself; with --masters only stall (DEBUG SLEEP) is offered, e.g. stall:2@5s+5s
	// fault: item 1 "pause:3@10s": pause needs a duration: pause:3@10s+4s
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"", "kill:2@5s", "restart:2@6s", "pause:3@10s+4s", "slow:1=20ms@0s+10s", "cut:4@15s+5s",
		"stall:0@1m30s+1.5s", "kill:2@5s,restart:2@6s", " kill:1@0 , pause:0@1us+2ns ",
		"slow:1=1.5ms@1s+2s", "pause:1@1s+-1s", "kill:99999999999999999999@1s", "cut:1@23h+2h",
		"stall:0@.5s+1µs", "kill:0@1h0m0.000000001s",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := Parse(spec)
		if err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("Parse(%q): error spans lines: %q", spec, msg)
			}
			return
		}
		for _, n := range []int{0, 1, 5} {
			_ = s.Validate(n, n%2 == 1)
		}
		again, err := Parse(s.String())
		if err != nil {
			t.Fatalf("Parse(%q).String() = %q does not parse: %v", spec, s.String(), err)
		}
		if !reflect.DeepEqual(again, s) {
			t.Fatalf("round trip of %q: %#v became %#v", spec, s, again)
		}
		for _, f := range s {
			if f.At < 0 || f.For < 0 || f.end() > MaxDuration || f.Node < 0 {
				t.Fatalf("Parse(%q) accepted %#v", spec, f)
			}
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, seed := range []string{"0", "5s", "1m30s", "250ms", "1.5us", "5", "-1s", "+1s", "24h", "24h0m0.000000001s", "1e9s", ".s", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("ParseDuration(%q): error spans lines", s)
			}
			return
		}
		if d < 0 || d > MaxDuration {
			t.Fatalf("ParseDuration(%q) = %s, outside [0, %s]", s, d, MaxDuration)
		}
		if again, err := ParseDuration(d.String()); err != nil || again != d {
			t.Fatalf("ParseDuration(%q) = %s, which reads back as %s, %v", s, d, again, err)
		}
	})
}
