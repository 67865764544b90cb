// Package quarantine is the restart quarantine's vocabulary, shared by
// multiplex, which enforces it, and engine, which configures it and
// reports it: the policy (when a restarted master's votes are ignored)
// and the error of a vote that is ignored.
package quarantine

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrQuarantined is a node's vote while its yes cannot be counted: its
// run_id changed (or, with Always, it was young when first seen; or, a
// Sentinel vote, its master was promoted) less than MaxTTL ago. *Error says until when and why.
var ErrQuarantined = errors.New("quarantined")

// Policy says when a restarted master's votes are ignored. A
// master that restarts without persistence has forgotten every lock it
// held; if its yes counted at once, a second client could win a quorum for
// a resource that is still held. The reference's answer is to keep a
// restarted master out for one TTL ("delayed restart"); the pool (multiplex)
// enforces it from the client side.
type Policy uint8

const (
	// policyDefault selects Always.
	policyDefault Policy = iota
	// Off counts every vote. Unsafe with masters that run without
	// persistence; useful to show what goes wrong.
	Off
	// Observed ignores a master for MaxTTL after this Pool saw its
	// run_id change. Masters that were young when first seen are trusted.
	Observed
	// Always also quarantines masters that are younger than
	// MaxTTL when first seen, since this process cannot know what they
	// forgot. A freshly started cluster is then unusable for one MaxTTL.
	Always
)

func (q Policy) String() string {
	switch q {
	case Off:
		return "off"
	case Observed:
		return "observed"
	case Always, policyDefault:
		return "always"
	}
	return fmt.Sprintf("Policy(%d)", uint8(q))
}

// Parse reads "off", "observed" or "always".
func Parse(s string) (Policy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "off":
		return Off, nil
	case "observed":
		return Observed, nil
	case "always":
		return Always, nil
	}
	return 0, fmt.Errorf("quarantine policy %q: want off, observed or always", s)
}

// Error is the vote of a quarantined node: it answered yes, but
// its yes cannot count until Until. errors.Is matches ErrQuarantined.
type Error struct {
	// Until is when the node's votes count again.
	Until time.Time
	// Restarted: the pool saw the node's run_id change (a restart, a
	// failover, or an address that moved to another server). Otherwise
	// the node was younger than MaxTTL when first seen (Always),
	// Uptime old.
	Restarted bool
	Uptime    time.Duration
	MaxTTL    time.Duration
	// Promoted: the node is a Sentinel vote whose master the sentinels
	// saw become master (a failover, or when they began watching it)
	// PromotedAgo before the check; a promoted replica may lack the
	// locks the old master granted, which expire within MaxTTL of the
	// promotion. With PromotionUnknown no sentinel could tell when, and
	// it was taken as just promoted.
	Promoted         bool
	PromotedAgo      time.Duration
	PromotionUnknown bool
}

func (e *Error) Error() string {
	until := e.Until.Round(0).Format("15:04:05.000")
	switch {
	case e.Restarted:
		return "quarantined until " + until + ": its run_id changed (a restart or failover)"
	case e.Promoted && e.PromotionUnknown:
		return "quarantined until " + until + ": no sentinel could tell when its master became master, so it is taken as just promoted"
	case e.Promoted:
		return fmt.Sprintf("quarantined until %s: promoted %s ago by Sentinel, under MaxTTL %s", until, e.PromotedAgo.Round(100*time.Millisecond), e.MaxTTL)
	}
	return fmt.Sprintf("quarantined until %s: up %s when first seen, under MaxTTL %s", until, e.Uptime, e.MaxTTL)
}

func (e *Error) Is(target error) bool { return target == ErrQuarantined }
