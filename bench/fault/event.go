package fault

import "time"

// Event is one fault as it actually happened, as the injector logs it.
// Planned times (at_s, for_s) come from the schedule; actual times
// (applied_s, ended_s) are measured, so a slow kill or a late timer shows.
// All *_s fields are seconds since the start of the run, the same origin as
// the intervals. It has the fields of results.FaultEvent, the record a
// summary keeps, and converts to it. Example:
//
//	{"fault":"pause:3@10s+4s","action":"pause","node":3,"at_s":10,"for_s":4,
//	 "applied_s":10.0004,"applied_at":"2025-01-02T15:04:05.0004Z",
//	 "ended_s":14.0011,"ended":true}
type Event struct {
	// Fault is the schedule item, e.g. "pause:3@10s+4s".
	Fault string `json:"fault"`
	// Action is kill, restart, pause, slow, cut or stall.
	Action string `json:"action"`
	// Node is the 0-based index of the master.
	Node int `json:"node"`
	// Arg is the added latency of slow; empty otherwise.
	Arg string `json:"arg,omitempty"`
	// AtS and ForS are the planned start and length.
	AtS  float64 `json:"at_s"`
	ForS float64 `json:"for_s"`
	// AppliedS is when the fault was applied; AppliedAt the same on the
	// wall clock.
	AppliedS  float64   `json:"applied_s"`
	AppliedAt time.Time `json:"applied_at"`
	// EndedS is when it was lifted (or, for kill and restart, completed).
	EndedS float64 `json:"ended_s"`
	Ended  bool    `json:"ended"`
	// Early: lifted before its planned end because the run stopped.
	Early bool `json:"early,omitempty"`
	// Via is the mechanism of a stall: "DEBUG SLEEP" or "CLIENT PAUSE".
	Via string `json:"via,omitempty"`
	// Error says what failed while applying or lifting it.
	Error string `json:"error,omitempty"`
}
