package quarantine

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseRoundTripsEveryPolicy(t *testing.T) {
	for _, p := range []Policy{Off, Observed, Always} {
		got, err := Parse(" " + strings.ToUpper(p.String()) + " ")
		if err != nil || got != p {
			t.Errorf("Parse(%q) = %v, %v; want %v", p.String(), got, err, p)
		}
	}
	if policyDefault.String() != "always" {
		t.Errorf("the zero policy reads %q; want always", policyDefault)
	}
	if _, err := Parse("sometimes"); err == nil || !strings.Contains(err.Error(), "off, observed or always") {
		t.Errorf("Parse(sometimes) = %v; want an error naming the choices", err)
	}
}

func TestErrorSaysWhyAndMatchesErrQuarantined(t *testing.T) {
	until := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	restarted := &Error{Until: until, Restarted: true}
	young := &Error{Until: until, Uptime: 2 * time.Second, MaxTTL: 10 * time.Second}
	for _, e := range []*Error{restarted, young} {
		if !errors.Is(e, ErrQuarantined) {
			t.Errorf("%v does not match ErrQuarantined", e)
		}
		if !strings.Contains(e.Error(), "03:04:05.000") {
			t.Errorf("%q does not say until when", e)
		}
	}
	if !strings.Contains(restarted.Error(), "run_id changed") {
		t.Errorf("%q does not say the run_id changed", restarted)
	}
	if !strings.Contains(young.Error(), "up 2s") || !strings.Contains(young.Error(), "MaxTTL 10s") {
		t.Errorf("%q does not give the uptime and MaxTTL", young)
	}
}
