package fault

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Action is what a fault does to one master.
type Action string

// The actions a schedule may name. Kill and Restart are instantaneous; the
// others last for Fault.For and are then lifted.
const (
	// Kill sends SIGKILL: the master vanishes with everything in memory.
	Kill Action = "kill"
	// Restart kills the master and starts it again on the same address and
	// data directory, so it keeps its locks only if the node persists them.
	Restart Action = "restart"
	// Pause sends SIGSTOP, then SIGCONT after For: the socket stays open and
	// nothing is answered, as in a long GC pause or a frozen VM.
	Pause Action = "pause"
	// Slow adds Fault.Latency to every reply, in the proxy in front of the
	// master.
	Slow Action = "slow"
	// Cut partitions the master from the engine: the proxy drops every byte
	// in both directions without a reset, until the cut heals.
	Cut Action = "cut"
	// Stall blocks the master's event loop with DEBUG SLEEP (or CLIENT PAUSE
	// where DEBUG is disabled). It needs no process control, so it is the one
	// fault offered on masters given with --masters.
	Stall Action = "stall"
)

var actions = []Action{Kill, Restart, Pause, Slow, Cut, Stall}

// timed reports whether the action lasts (+FOR) rather than happens once.
func (a Action) timed() bool { return a == Pause || a == Slow || a == Cut || a == Stall }

// needsProcess reports whether the action needs the master's process or the
// proxy in front of it, both of which exist only for masters we started.
func (a Action) needsProcess() bool { return a != Stall }

// MaxDuration bounds every time in a schedule. It keeps AT+FOR far from
// overflowing time.Duration, and no benchmark run lasts a day.
const MaxDuration = 24 * time.Hour

// Fault is one item of a schedule: ACTION:NODE[=ARG]@AT[+FOR].
type Fault struct {
	Action Action
	// Node is the 0-based index of the master, in the order the masters were
	// started or given with --masters.
	Node int
	// At is when the fault starts, measured from the start of the run.
	At time.Duration
	// For is how long a timed fault (pause, slow, cut, stall) lasts; zero for
	// kill and restart.
	For time.Duration
	// Latency is what slow adds to every reply; zero for other actions. It is
	// a whole number of milliseconds, toxiproxy's resolution.
	Latency time.Duration
}

// String renders the fault in the syntax Parse reads.
func (f Fault) String() string {
	var b strings.Builder
	b.WriteString(string(f.Action))
	b.WriteByte(':')
	b.WriteString(strconv.Itoa(f.Node))
	if f.Action == Slow {
		b.WriteByte('=')
		b.WriteString(f.Latency.String())
	}
	b.WriteByte('@')
	b.WriteString(f.At.String())
	if f.Action.timed() {
		b.WriteByte('+')
		b.WriteString(f.For.String())
	}
	return b.String()
}

// end is when the fault is lifted; At for instantaneous faults.
func (f Fault) end() time.Duration { return f.At + f.For }

// Schedule is the list of faults of one run, in the order they were written.
// The zero value is an empty schedule: no faults.
type Schedule []Fault

// String renders the schedule so that Parse(s.String()) gives s back.
func (s Schedule) String() string {
	items := make([]string, len(s))
	for i, f := range s {
		items[i] = f.String()
	}
	return strings.Join(items, ",")
}

// End is when the last fault is lifted, so that a caller can warn when the
// schedule outlasts the run.
func (s Schedule) End() time.Duration {
	var end time.Duration
	for _, f := range s {
		end = max(end, f.end())
	}
	return end
}

// Error categories of Parse, Validate, New and Injector.Check, each wrapped
// in an *ItemError that names the item at fault.
var (
	// ErrSyntax reports an item that does not follow ACTION:NODE[=ARG]@AT[+FOR].
	ErrSyntax = errors.New("syntax")
	// ErrNodeRange reports a node index outside the masters of the run.
	ErrNodeRange = errors.New("node out of range")
	// ErrNeedsLocal reports a fault that needs process control or the proxy,
	// asked of masters that redlock-bench did not start.
	ErrNeedsLocal = errors.New("needs a master started by redlock-bench")
	// ErrOverlap reports two faults of the same action on the same node whose
	// windows overlap: the first to end would lift both.
	ErrOverlap = errors.New("overlap")
	// ErrStallRefused reports a master that refuses both DEBUG SLEEP and
	// CLIENT PAUSE, found by Injector.Check.
	ErrStallRefused = errors.New("stall refused")
)

// ItemError is a schedule error, tied to the item that caused it.
type ItemError struct {
	// Item is the item as written (Parse) or rendered (Validate).
	Item string
	// Pos is the item's 1-based position in the schedule.
	Pos int
	// Msg says what is wrong, in one line.
	Msg string
	// Err is the category: ErrSyntax, ErrNodeRange, ErrNeedsLocal,
	// ErrOverlap or ErrStallRefused.
	Err error
}

func (e *ItemError) Error() string {
	return fmt.Sprintf("fault: item %d %q: %s", e.Pos, e.Item, e.Msg)
}

func (e *ItemError) Unwrap() error { return e.Err }

const grammar = "want ACTION:NODE[=ARG]@AT[+FOR], e.g. pause:3@10s+4s"

// Parse reads a comma-separated schedule such as
// "kill:2@5s,restart:2@6s,pause:3@10s+4s,slow:1=20ms@0s+10s,cut:4@15s+5s,stall:0@3s+2s".
// Nodes are 0-based; times are Go durations ("500ms", "1m30s") from the start
// of the run. Spaces around items are ignored; an empty spec is an empty
// schedule. Parse checks the syntax only: Validate checks the schedule
// against the masters of a run.
func Parse(spec string) (Schedule, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	var s Schedule
	for i, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		f, msg := parseItem(item)
		if msg != "" {
			return nil, &ItemError{Item: item, Pos: i + 1, Msg: msg, Err: ErrSyntax}
		}
		s = append(s, f)
	}
	return s, nil
}

// parseItem returns the problem as a message rather than an error, so that
// Parse wraps every one the same way.
func parseItem(item string) (Fault, string) {
	var f Fault
	if item == "" {
		return f, "empty item (stray comma?); " + grammar
	}
	action, rest, ok := strings.Cut(item, ":")
	if !ok {
		return f, "no ':' after the action; " + grammar
	}
	f.Action = Action(action)
	if !validAction(f.Action) {
		return f, fmt.Sprintf("unknown action %q; want one of %s", action, actionList())
	}
	target, when, ok := strings.Cut(rest, "@")
	if !ok {
		return f, "no '@' before the start time; " + grammar
	}
	node, arg, hasArg := strings.Cut(target, "=")
	n, msg := parseNode(node)
	if msg != "" {
		return f, msg
	}
	f.Node = n
	at, dur, hasFor := strings.Cut(when, "+")

	var err error
	if f.At, err = ParseDuration(at); err != nil {
		return f, "start time: " + err.Error()
	}
	if hasFor {
		if f.For, err = ParseDuration(dur); err != nil {
			return f, "duration: " + err.Error()
		}
	}
	switch {
	case f.Action.timed() && !hasFor:
		return f, fmt.Sprintf("%s needs a duration: %s", f.Action, example(f.Action))
	case f.Action.timed() && f.For == 0:
		return f, fmt.Sprintf("%s duration must be above zero: %s", f.Action, example(f.Action))
	case !f.Action.timed() && hasFor:
		return f, fmt.Sprintf("%s happens at one instant and takes no +FOR: %s", f.Action, example(f.Action))
	}
	switch {
	case f.Action == Slow && !hasArg:
		return f, "slow needs a latency: " + example(Slow)
	case f.Action != Slow && hasArg:
		return f, fmt.Sprintf("%s takes no =ARG: %s", f.Action, example(f.Action))
	}
	if hasArg {
		if f.Latency, err = ParseDuration(arg); err != nil {
			return f, "latency: " + err.Error()
		}
		if f.Latency < time.Millisecond || f.Latency%time.Millisecond != 0 {
			return f, fmt.Sprintf("latency %s must be a whole number of milliseconds, at least 1ms (toxiproxy's resolution)", f.Latency)
		}
	}
	if f.end() > MaxDuration {
		return f, fmt.Sprintf("ends at %s, after the %s limit", f.end(), MaxDuration)
	}
	return f, ""
}

func parseNode(s string) (int, string) {
	if s == "" {
		return 0, "missing node index; " + grammar
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, fmt.Sprintf("node %q is not a 0-based index", s)
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > maxNode {
		return 0, fmt.Sprintf("node %q is implausibly large", s)
	}
	return n, ""
}

// maxNode keeps node indices printable and far from int overflow; no run
// has a million masters.
const maxNode = 1_000_000

func validAction(a Action) bool {
	for _, v := range actions {
		if a == v {
			return true
		}
	}
	return false
}

func actionList() string {
	names := make([]string, len(actions))
	for i, a := range actions {
		names[i] = string(a)
	}
	return strings.Join(names, ", ")
}

func example(a Action) string {
	switch a {
	case Kill:
		return "kill:2@5s"
	case Restart:
		return "restart:2@6s"
	case Pause:
		return "pause:3@10s+4s"
	case Slow:
		return "slow:1=20ms@0s+10s"
	case Cut:
		return "cut:4@15s+5s"
	default:
		return "stall:0@3s+2s"
	}
}

// ParseDuration reads a non-negative Go duration of at most MaxDuration.
// Unlike time.ParseDuration it rejects signs, so that "@5s+-1s" is an
// error rather than a negative window, and it says how to fix a bare number.
func ParseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, errors.New("missing duration (e.g. 5s, 250ms, 1m30s)")
	}
	if s[0] == '+' || s[0] == '-' {
		return 0, fmt.Errorf("duration %q must not carry a sign", s)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if isNumber(s) {
			return 0, fmt.Errorf("duration %q has no unit (write %ss or %sms)", s, s, s)
		}
		return 0, fmt.Errorf("duration %q is not a Go duration (e.g. 5s, 250ms, 1m30s)", s)
	}
	if d > MaxDuration {
		return 0, fmt.Errorf("duration %q exceeds the %s limit", s, MaxDuration)
	}
	return d, nil
}

func isNumber(s string) bool {
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && c != '.' {
			return false
		}
	}
	return true
}

// Validate checks the schedule against a run with n masters. local says
// whether redlock-bench started those masters itself: only then does it
// hold their processes and a proxy in front of each, which every action but
// stall needs. It returns the first problem as an *ItemError.
func (s Schedule) Validate(n int, local bool) error {
	for i, f := range s {
		item := func(msg string, err error) error {
			return &ItemError{Item: f.String(), Pos: i + 1, Msg: msg, Err: err}
		}
		if f.Node < 0 || f.Node >= n {
			msg := fmt.Sprintf("node %d out of range: %d masters (0-%d); nodes are 0-based, in --masters order", f.Node, n, n-1)
			if n <= 0 {
				msg = fmt.Sprintf("node %d out of range: no masters", f.Node)
			}
			return item(msg, ErrNodeRange)
		}
		if !local && f.Action.needsProcess() {
			return item(fmt.Sprintf("%s needs %s, which redlock-bench has only for masters it starts itself; "+
				"with --masters only stall (DEBUG SLEEP) is offered, e.g. stall:%d@%s+5s",
				f.Action, needs(f.Action), f.Node, f.At), ErrNeedsLocal)
		}
		for j, g := range s[:i] {
			if g.Action != f.Action || g.Node != f.Node {
				continue
			}
			overlap := f.At < g.end() && g.At < f.end()
			if !f.Action.timed() {
				overlap = f.At == g.At
			}
			if overlap {
				return item(fmt.Sprintf("overlaps item %d %q on the same node", j+1, g.String()), ErrOverlap)
			}
		}
	}
	return nil
}

func needs(a Action) string {
	switch a {
	case Slow, Cut:
		return "the proxy in front of the master"
	default:
		return "control of the master's process"
	}
}
