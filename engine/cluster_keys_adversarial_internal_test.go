package engine

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/redlock-bench/redlock/internal/keyslot"
)

// TestClusterKeysUniqueUnderAdversarialSpellings widens
// TestClusterKeysAreUnique with the spellings a review tried against
// Locker.key: key prefixes that open, close or empty a brace ("{",
// "{{", "{}", "}{", "x{") or carry a slot tag of their own ("{T}" for a
// real tag T); names that nest or unbalance braces around a tag
// ("{{T}}a", "{T}}a", "{T}{U}a"); chains of a tag that is not the slot's
// ("{U}a", U another slot's tag); and random strings over braces, tag
// characters and ":". Every name must get a key of its own, in the slot
// of prefix + name, with the engine's internal keys in the same slot.
func TestClusterKeysUniqueUnderAdversarialSpellings(t *testing.T) {
	tagOf := func(k string) string { return keyslot.SlotTag(keyslot.KeySlot(k)) }
	tA := tagOf("a")
	prefixes := []string{"", "{", "{{", "{}", "}{", "x{", "}", "{" + tA + "}", "{" + tA[:1], "p:{", "{" + tA + "}{"}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "{}a0Z:"
	for _, prefix := range prefixes {
		l := &Locker{cfg: Config{KeyPrefix: prefix}, clustered: true}
		var names []string
		add := func(n string) {
			if n != "" {
				names = append(names, n)
			}
		}
		// Random strings, and each spelled as its key under this prefix,
		// once and twice, with its slot's tag and with another's.
		for range 1000 {
			b := make([]byte, 1+rng.IntN(6))
			for i := range b {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			}
			n := string(b)
			add(n)
			r := prefix + n
			for _, tag := range []string{tagOf(r), tagOf(r + "x")} {
				k := "{" + tag + "}" + r
				for range 3 {
					if name, ok := strings.CutPrefix(k, prefix); ok {
						add(name)
						add("{" + name + "}")
						add("{" + k + "}")
						add(name + "}")
						add("{" + name)
					}
					k = "{" + tag + "}" + k
				}
			}
		}
		for _, n := range []string{"{{" + tA + "}}a", "{" + tA + "}}a", "{" + tA + "}{" + tagOf("b") + "}a", "{" + tA + "}", "{" + tA + "}{" + tA + "}"} {
			add(n)
			add(strings.TrimPrefix(n, prefix))
		}
		owner := map[string]string{}
		for _, name := range names {
			key := l.key(name)
			if other, taken := owner[key]; taken && other != name {
				t.Fatalf("prefix %q: %q and %q share the key %q", prefix, other, name, key)
			}
			owner[key] = name
			if got, want := keyslot.KeySlot(key), keyslot.KeySlot(prefix+name); got != want {
				t.Fatalf("prefix %q: %q kept in slot %d, its key %q's is %d", prefix, name, got, prefix+name, want)
			}
			for _, internal := range []string{fencePrefix + key, queuePrefix + key, rwPrefix + key, rwMarkPrefix + key, l.semBase(name) + "permits"} {
				if keyslot.KeySlot(internal) != keyslot.KeySlot(key) {
					t.Fatalf("prefix %q: %q: %q is not in the lock key %q's slot", prefix, name, internal, key)
				}
			}
		}
		t.Logf("prefix %q: %d names, %d keys", prefix, len(names), len(owner))
	}
}
