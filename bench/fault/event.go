package fault

import "github.com/redlock-bench/redlock/results"

// Event is one fault as it actually happened (the record results keeps), for summary.json and for the
// per-second intervals. Planned times (at_s, for_s) come from the schedule;
// actual times (applied_s, ended_s) are measured, so a slow kill or a late
// timer shows. All *_s fields are seconds since the start of the run, the
// same origin as the intervals. Example:
//
//	{"fault":"pause:3@10s+4s","action":"pause","node":3,"at_s":10,"for_s":4,
//	 "applied_s":10.0004,"applied_at":"2025-01-02T15:04:05.0004Z",
//	 "ended_s":14.0011,"ended":true}
type Event = results.FaultEvent
