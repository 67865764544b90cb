package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redlock-bench/redlock/engine"
)

// The engine's errors speak of its Config; redlock's messages speak of
// redlock's flags. Each message is "redlock: exec: " and one line.

// engineText is an engine error's message without the "engine: " it
// starts with, for a message of redlock's own.
func engineText(err error) string { return strings.TrimPrefix(err.Error(), "engine: ") }

// votesText is ve's tally, then the masters that failed, grouped by cause
// (those in restart quarantine together), without the engine's advice,
// which names its Config.
func votesText(ve *engine.VotesError) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d ok, %d refused, %d error, %d timeout, %d pending; quorum %d of %d",
		ve.OK, ve.Refused, ve.Failed, ve.Timeout, ve.Pending, ve.Quorum, len(ve.Votes))
	var causes []string
	addrs := make(map[string][]string)
	for i, v := range ve.Votes {
		if v.Outcome != engine.OutcomeFailed && v.Outcome != engine.OutcomeTimeout {
			continue
		}
		cause := v.Outcome.String()
		var qe *engine.QuarantineError
		switch {
		case errors.As(v.Err, &qe) && qe.Restarted:
			cause = "restarted or failed over (run_id changed), quarantined"
		case errors.As(v.Err, &qe):
			cause = "quarantined"
		case v.Err != nil:
			cause += ": " + v.Err.Error()
		}
		addr := fmt.Sprintf("master %d", i+1)
		if i < len(ve.Addrs) {
			addr = ve.Addrs[i]
		}
		if addrs[cause] == nil {
			causes = append(causes, cause)
		}
		addrs[cause] = append(addrs[cause], addr)
	}
	for _, c := range causes {
		fmt.Fprintf(&b, "; %s: %s", strings.Join(addrs[c], ", "), c)
	}
	return b.String()
}

// endText is why an operation on a held lease failed (a lost lock, a
// failed release), in exec's words: the operation, its verdict, then the
// votes.
func endText(err error) string {
	var ve *engine.VotesError
	if !errors.As(err, &ve) {
		return engineText(err)
	}
	return ve.Op + ": " + verdictText(ve)
}

// verdictText is ve's verdict, then its votes.
func verdictText(ve *engine.VotesError) string {
	verdict := "failed"
	switch {
	case ve.Kind != nil:
		verdict = ve.Kind.Error()
	case errors.Is(ve.Err, context.DeadlineExceeded):
		// Only the release has a deadline of exec's.
		verdict = "no quorum answered within " + shortDuration(releaseTimeout)
	case ve.Err != nil:
		verdict = ve.Err.Error()
	}
	return verdict + "; " + votesText(ve)
}

// quarantineAdvice explains, in exec's flags, an attempt that the restart
// quarantine failed (ve.QuarantinedUntil is set): what it is, until when,
// and how to choose otherwise; "" when the quarantine did not decide it.
// wait is --wait.
func quarantineAdvice(ve *engine.VotesError, wait time.Duration) string {
	until := ve.QuarantinedUntil()
	if until.IsZero() {
		return ""
	}
	var (
		maxTTL    time.Duration
		restarted bool
	)
	for _, v := range ve.Votes {
		var qe *engine.QuarantineError
		if errors.As(v.Err, &qe) {
			maxTTL, restarted = qe.MaxTTL, restarted || qe.Restarted
		}
	}
	left := max(time.Until(until), 0)
	var b strings.Builder
	fmt.Fprintf(&b, "; the restart quarantine keeps a quorum from voting until %s (%s from now): ",
		until.Format("15:04:05.000"), left.Round(100*time.Millisecond))
	if restarted {
		fmt.Fprintf(&b, "a master restarted or failed over, and may have forgotten locks it granted; its votes count again --max-ttl %s after that", shortDuration(maxTTL))
	} else {
		fmt.Fprintf(&b, "the masters were up for less than --max-ttl %s when redlock first saw them, and may have restarted and forgotten locks they granted", shortDuration(maxTTL))
	}
	if wait > 0 {
		fmt.Fprintf(&b, "; --wait %s ends before then", shortDuration(wait))
	}
	fmt.Fprintf(&b, "; --wait %s waits for it", roundUp(left))
	if !restarted {
		b.WriteString("; --quarantine observed trusts masters that were just started and hold no locks")
	}
	return b.String()
}

// onlyQuarantined reports whether the quarantine alone failed ve: every
// master that failed is quarantined and none timed out, so no quorum can
// form before ve.QuarantinedUntil.
func onlyQuarantined(ve *engine.VotesError) bool {
	if ve.Timeout > 0 {
		return false
	}
	for _, v := range ve.Votes {
		if v.Outcome == engine.OutcomeFailed && !errors.Is(v.Err, engine.ErrQuarantined) {
			return false
		}
	}
	return true
}

// roundUp is d rounded up to a duration a person would type: whole
// seconds up to a minute, whole minutes up to an hour, whole hours beyond.
func roundUp(d time.Duration) string {
	unit := time.Second
	switch {
	case d > time.Hour:
		unit = time.Hour
	case d > time.Minute:
		unit = time.Minute
	}
	return shortDuration(max((d+unit-1)/unit*unit, time.Second))
}

// shortDuration is d as a flag takes it, without the zero units that
// time.Duration's String keeps ("1h", not "1h0m0s").
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// connectionFix is the fix, in exec's flags, of each credential or TLS
// mistake that New's error names, once each, or "". The causes are those
// multiplex gives when it connects (AUTH refused, NOAUTH, TLS errors);
// passFrom is where the password came from ("" for none).
func connectionFix(msg, user, passFrom string) string {
	var fixes []string
	has := func(s ...string) bool {
		for _, x := range s {
			if strings.Contains(msg, x) {
				return true
			}
		}
		return false
	}
	switch {
	case has("without any password configured") && passFrom == "REDISCLI_AUTH":
		fixes = append(fixes, "the masters want no password: unset REDISCLI_AUTH (or run redlock under env -u REDISCLI_AUTH)")
	case has("without any password configured"):
		fixes = append(fixes, "the masters want no password: drop -a/--pass")
	}
	if has("NOAUTH") {
		fixes = append(fixes, "the masters want a password: set REDISCLI_AUTH (or give -a/--pass), with --user for an ACL user's")
	}
	if has("AUTH as the default user refused: WRONGPASS") {
		fixes = append(fixes, "the password from "+passFrom+" was refused: check it, and give --user if it is an ACL user's")
	}
	if has("AUTH as user ") {
		fixes = append(fixes, fmt.Sprintf("--user %q with the password from %s was refused: check both", user, passFrom))
	}
	if has("does the master serve TLS on this port?", "first record does not look like a TLS handshake") {
		fixes = append(fixes, "the masters do not answer TLS on these ports: drop --tls, or give their TLS ports")
	}
	if has("does the master want TLS?") {
		fixes = append(fixes, "the masters close plain connections: if they serve TLS, add --tls")
	}
	if has("tls: certificate required", "does the master want a client certificate?") {
		fixes = append(fixes, "the masters want a client certificate: give --cert and --key")
	}
	if has("certificate signed by unknown authority") {
		fixes = append(fixes, "the masters' certificates are not signed by a CA that redlock trusts: give that CA's certificate with --cacert")
	}
	if has("remote error: tls: unknown certificate authority", "remote error: tls: bad certificate") {
		fixes = append(fixes, "the masters refuse the client certificate: give with --cert and --key one signed by a CA they trust")
	}
	if has("x509: certificate is valid for") {
		fixes = append(fixes, "the masters' certificates are not valid for the name redlock checks: give --sni with one they are valid for")
	}
	return strings.Join(fixes, "; ")
}
