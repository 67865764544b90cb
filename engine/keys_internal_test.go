package engine

import (
	"errors"
	"testing"
)

func TestCheckKeyWherePrefixAndNameMeet(t *testing.T) {
	for _, tc := range []struct {
		prefix, resource string
		reserved         bool
	}{
		{"", "\xffredlock:fence:x", true},
		{"\xffred", "lock:x", true},
		{"\xffredlock:", "", true},
		{"\xffredlock:fence:", "x", true},
		{"", "redlock:fence:x", false},
		{"\xffred", "x", false},
		{"app:", "\xffredlock:x", false},
		{"", "\xffredlock", false},
	} {
		err := checkKey(tc.prefix, tc.resource)
		if got := errors.Is(err, ErrReservedResource); got != tc.reserved {
			t.Errorf("checkKey(%q, %q) = %v, want reserved %v", tc.prefix, tc.resource, err, tc.reserved)
		}
	}
}
