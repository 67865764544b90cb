package fault

import "time"

// Event is one fault as it actually happened, for summary.json and for the
// per-second intervals. Planned times (at_s, for_s) come from the schedule;
// actual times (applied_s, ended_s) are measured, so a slow kill or a late
// timer shows. All *_s fields are seconds since the start of the run, the
// same origin as the intervals. Example:
//
//	{"fault":"pause:3@10s+4s","action":"pause","node":3,"at_s":10,"for_s":4,
//	 "applied_s":10.0004,"applied_at":"2025-01-02T15:04:05.0004Z",
//	 "ended_s":14.0011,"ended":true}
type Event struct {
	// Fault is the schedule item, as Parse reads it.
	Fault string `json:"fault"`
	// Action is kill, restart, pause, slow, cut or stall.
	Action Action `json:"action"`
	// Node is the 0-based index of the master.
	Node int `json:"node"`
	// Arg is the action's argument as written: the added latency for slow,
	// empty otherwise.
	Arg string `json:"arg,omitempty"`
	// AtS is the planned start.
	AtS float64 `json:"at_s"`
	// ForS is the planned length; 0 for kill and restart.
	ForS float64 `json:"for_s"`
	// AppliedS is when the injector began to apply the fault.
	AppliedS float64 `json:"applied_s"`
	// AppliedAt is AppliedS on the wall clock, to line events up with the
	// masters' own logs.
	AppliedAt time.Time `json:"applied_at"`
	// EndedS is when the fault was lifted (pause, slow, cut), when the
	// master answered again (stall), or when the action completed (kill: the
	// process is gone; restart: the new process answers PING). Meaningful
	// once Ended is true.
	EndedS float64 `json:"ended_s"`
	// Ended is false only in the first OnEvent call for a fault, made while
	// the fault is in effect. Every event Run returns has ended.
	Ended bool `json:"ended"`
	// Early marks a fault lifted before its planned end because the run
	// stopped.
	Early bool `json:"early,omitempty"`
	// Via names the mechanism where there is a choice: "DEBUG SLEEP" or
	// "CLIENT PAUSE" for stall.
	Via string `json:"via,omitempty"`
	// Error says what failed, if applying or lifting the fault did. A fault
	// that failed to apply has EndedS == AppliedS.
	Error string `json:"error,omitempty"`
}

// During reports whether the fault was in effect at some time in
// [fromS, toS), so that an interval [fromS, toS) can be marked with the
// faults that shaped it. An instantaneous fault is in the interval in which
// it was applied or completed.
func (e Event) During(fromS, toS float64) bool {
	end := e.EndedS
	if !e.Ended {
		end = toS
	}
	return e.AppliedS < toS && end >= fromS
}
