package multiplex_test

import (
	"testing"

	"github.com/redlock-bench/redlock/multiplex"
)

// The slots of the cluster specification's examples, and of keys whose
// braces do not make a tag.
func TestKeySlot(t *testing.T) {
	for key, want := range map[string]int{
		"123456789":            0x31C3 % multiplex.Slots, // CRC16/XMODEM's check value
		"foo":                  12182,
		"{user1000}.following": 3443,
		"{user1000}.followers": 3443,
		"foo{}{bar}":           multiplex.KeySlot("foo{}{bar}"), // whole key
		"foo{{bar}}zap":        multiplex.KeySlot("{bar"),
		"foo{bar}{zap}":        multiplex.KeySlot("bar"),
	} {
		if got := multiplex.KeySlot(key); got != want {
			t.Errorf("KeySlot(%q) = %d, want %d", key, got, want)
		}
	}
	if multiplex.KeySlot("foo{}{bar}") == multiplex.KeySlot("bar") {
		t.Error("an empty tag must hash the whole key")
	}
	for key, want := range map[string]bool{"a": false, "{a}": true, "x{}y": false, "x}{y": false, "}{y}": true, "{": false} {
		if got := multiplex.HasTag(key); got != want {
			t.Errorf("HasTag(%q) = %v, want %v", key, got, want)
		}
	}
}

// Every slot has a tag, and the tag hashes to it.
func TestSlotTagCoversEverySlot(t *testing.T) {
	for s := range multiplex.Slots {
		tag := multiplex.SlotTag(s)
		if len(tag) == 0 || len(tag) > 3 || multiplex.KeySlot(tag) != s || multiplex.KeySlot("{"+tag+"}x}") != s {
			t.Fatalf("SlotTag(%d) = %q, slot %d", s, tag, multiplex.KeySlot(tag))
		}
	}
}
