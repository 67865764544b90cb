package engine

import (
	"strings"
	"testing"

	"github.com/redlock-bench/redlock/internal/keyslot"
)

// keyBefore is the cluster lock key as it was before names spelled like
// another name's key were told apart: a tag of the key's slot in front
// of a key without one, a key with one as it is.
func keyBefore(prefix, name string) string {
	k := prefix + name
	if keyslot.HasTag(k) {
		return k
	}
	return "{" + keyslot.SlotTag(keyslot.KeySlot(k)) + "}" + k
}

// TestClusterKeysAreUnique gives every name its own key with cluster
// votes. The names are every string of up to four of "{", "}", "a" and
// "b", and, for each, the names spelled as its key and as that name's
// key in turn ("{T}a", "{T}{T}a", T the tag of a's slot), under key
// prefixes with and without braces. Each key keeps the slot of the
// name's key (so that a resource's internal keys, which put a prefix
// before it, stay in one slot with it, the semaphore's too); only a key
// that starts with a hash tag may differ from what it was before.
func TestClusterKeysAreUnique(t *testing.T) {
	var base []string
	var grow func(s string)
	grow = func(s string) {
		base = append(base, s)
		if len(s) == 4 {
			return
		}
		for _, c := range []string{"{", "}", "a", "b"} {
			grow(s + c)
		}
	}
	grow("")
	for _, prefix := range []string{"", "app:", "{app}", "{x", "}"} {
		l := &Locker{cfg: Config{KeyPrefix: prefix}, clustered: true}
		owner := map[string]string{} // key -> name
		changed := 0
		// Under a prefix that opens a brace, a key can be spelled as
		// another's only where the other's slot's tag starts with the
		// rest of the prefix: find a few such.
		names := base
		if rest, ok := strings.CutPrefix(prefix, "{"); ok {
			const chars = "abcdefghijklmnopqrstuvwxyz0123456789"
			found := 0
			for i := 0; i < len(chars)*len(chars)*len(chars) && found < 5; i++ {
				b := string([]byte{chars[i%len(chars)], chars[i/len(chars)%len(chars)], chars[i/len(chars)/len(chars)]})
				if r := prefix + b; !keyslot.HasTag(r) && strings.HasPrefix(keyslot.SlotTag(keyslot.KeySlot(r)), rest) {
					names = append(names[:len(names):len(names)], b)
					found++
				}
			}
		}
		for _, b := range names {
			r := prefix + b
			tag := "{" + keyslot.SlotTag(keyslot.KeySlot(r)) + "}"
			k := r
			for spelled := 0; spelled <= 3; spelled, k = spelled+1, tag+k {
				name, ok := strings.CutPrefix(k, prefix)
				if !ok || name == "" {
					continue // not a name under prefix
				}
				key := l.key(name)
				if other, taken := owner[key]; taken && other != name {
					t.Fatalf("prefix %q: %q and %q share the key %q", prefix, other, name, key)
				}
				owner[key] = name
				if got, want := keyslot.KeySlot(key), keyslot.KeySlot(prefix+name); got != want {
					t.Errorf("prefix %q: %q is kept in slot %d, its key %q's is %d", prefix, name, got, prefix+name, want)
				}
				for _, internal := range []string{fencePrefix + key, queuePrefix + key, rwPrefix + key, rwMarkPrefix + key, l.semBase(name) + "permits"} {
					if keyslot.KeySlot(internal) != keyslot.KeySlot(key) {
						t.Errorf("prefix %q: %q: %q is not in the lock key %q's slot", prefix, name, internal, key)
					}
				}
				if key != keyBefore(prefix, name) {
					changed++
					// Only a key that starts with a tag can be spelled as
					// another name's key.
					if !strings.HasPrefix(k, "{") || !keyslot.HasTag(k) {
						t.Errorf("prefix %q: %q moved from %q to %q", prefix, name, keyBefore(prefix, name), key)
					}
				}
			}
		}
		t.Logf("prefix %q: %d names, %d keys moved", prefix, len(owner), changed)
	}
}
