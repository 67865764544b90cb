package keyslot_test

import (
	"testing"

	"github.com/redlock-bench/redlock/internal/keyslot"
)

// The slots of the cluster specification's examples, and of keys whose
// braces do not make a tag.
func TestKeySlot(t *testing.T) {
	for key, want := range map[string]int{
		"123456789":            0x31C3 % keyslot.Slots, // CRC16/XMODEM's check value
		"foo":                  12182,
		"{user1000}.following": 3443,
		"{user1000}.followers": 3443,
		"foo{}{bar}":           keyslot.KeySlot("foo{}{bar}"), // whole key
		"foo{{bar}}zap":        keyslot.KeySlot("{bar"),
		"foo{bar}{zap}":        keyslot.KeySlot("bar"),
	} {
		if got := keyslot.KeySlot(key); got != want {
			t.Errorf("KeySlot(%q) = %d, want %d", key, got, want)
		}
	}
	if keyslot.KeySlot("foo{}{bar}") == keyslot.KeySlot("bar") {
		t.Error("an empty tag must hash the whole key")
	}
	for key, want := range map[string]bool{"a": false, "{a}": true, "x{}y": false, "x}{y": false, "}{y}": true, "{": false} {
		if got := keyslot.HasTag(key); got != want {
			t.Errorf("HasTag(%q) = %v, want %v", key, got, want)
		}
	}
}

// Every slot has a tag, and the tag hashes to it.
func TestSlotTagCoversEverySlot(t *testing.T) {
	for s := range keyslot.Slots {
		tag := keyslot.SlotTag(s)
		if len(tag) == 0 || len(tag) > 3 || keyslot.KeySlot(tag) != s || keyslot.KeySlot("{"+tag+"}x}") != s {
			t.Fatalf("SlotTag(%d) = %q, slot %d", s, tag, keyslot.KeySlot(tag))
		}
	}
}
