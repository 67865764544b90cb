// Package keyslot is Redis Cluster's key-to-slot mapping (CRC16 of a
// key's hash tag, modulo 16384) and the short tags that move a name to a
// chosen slot: what the engine needs to keep a resource's keys in one
// slot, multiplex to route a command, and the tests and tools to find a
// key. It talks to no server.
package keyslot

import "sync"

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// KeySlot is key's Redis Cluster hash slot: CRC16 (XMODEM) of its hash
// tag, the part between its first "{" and the first "}" after it when
// that part is not empty, else of the whole key; modulo Slots.
func KeySlot(key string) int { return int(crc16(hashPart(key)) % Slots) }

// HasTag reports whether key has a hash tag (see KeySlot). A key with one
// keeps its slot whatever is put before it, as long as that has no "{".
func HasTag(key string) bool { return len(hashPart(key)) < len(key) }

func hashPart(key string) string {
	for s := 0; s < len(key); s++ {
		if key[s] != '{' {
			continue
		}
		for e := s + 1; e < len(key); e++ {
			if key[e] == '}' {
				if e == s+1 {
					return key
				}
				return key[s+1 : e]
			}
		}
		return key
	}
	return key
}

// SlotTag returns a short string, of letters and digits, whose slot is
// slot: "{" + SlotTag(s) + "}" put before a name moves it to slot s. The
// table is built on first use (a few milliseconds).
func SlotTag(slot int) string {
	tagsOnce.Do(buildTags)
	return tags[slot%Slots]
}

var (
	tagsOnce sync.Once
	tags     []string
)

// buildTags finds the first tag in a fixed order for every slot: all
// two-character strings of tagChars, then three. Two characters cover
// under a quarter of the slots; three cover them all.
func buildTags() {
	const tagChars = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	tags = make([]string, Slots)
	left := Slots
	var b [3]byte
	for n := 2; n <= 3 && left > 0; n++ {
		idx := make([]int, n)
		for {
			for i, x := range idx {
				b[i] = tagChars[x]
			}
			if s := crc16(string(b[:n])) % Slots; tags[s] == "" {
				tags[s] = string(b[:n])
				left--
			}
			i := n - 1
			for ; i >= 0; i-- {
				if idx[i]++; idx[i] < len(tagChars) {
					break
				}
				idx[i] = 0
			}
			if i < 0 {
				break
			}
		}
	}
	if left > 0 {
		panic("keyslot: no tag for some slots")
	}
}

// crc16 is CRC-16/XMODEM, as Redis Cluster hashes keys.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crc16tab[byte(crc>>8)^s[i]]
	}
	return crc
}

var crc16tab = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()
