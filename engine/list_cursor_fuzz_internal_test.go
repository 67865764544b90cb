package engine

import (
	"errors"
	"reflect"
	"testing"
)

// FuzzListCursor: a cursor (--cursor is user input) decodes to what
// Listed.Cursor encoded, for the walk's prefix and number of masters
// only; anything else is ErrBadCursor, never a panic, and never a
// master's walk in a state Walk does not know.
func FuzzListCursor(f *testing.F) {
	f.Add("job:", 3, 1, "a:1", "127.0.0.1:6379", uint64(12345), true, false, "eyJ2IjoxfQ")
	f.Add("", 5, 4, "", "", uint64(0), false, true, "")
	f.Fuzz(func(t *testing.T, prefix string, votes, m int, name, node string, cursor uint64, sem, fin bool, raw string) {
		if votes < 1 || votes > 16 || m < 0 || m >= votes {
			return
		}
		pos := make([]walkPos, votes)
		pos[m] = walkPos{State: posWalking, Sem: sem, Node: node, Cursor: cursor, Fin: fin}
		pos[(m+1)%votes].State = posDone
		c := Listed{Name: name, at: &listAt{prefix: prefix, m: m, pos: pos}}.Cursor()
		got, err := decodeCursor(c, prefix, votes)
		want := append([]walkPos(nil), pos...)
		want[m].After = name
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("decodeCursor(Cursor()) = %+v, %v; want %+v", got, err, want)
		}
		if _, err := decodeCursor(c, prefix+"x", votes); !errors.Is(err, ErrBadCursor) {
			t.Fatalf("another prefix: %v, want ErrBadCursor", err)
		}
		if _, err := decodeCursor(c, prefix, votes+1); !errors.Is(err, ErrBadCursor) {
			t.Fatalf("another number of masters: %v, want ErrBadCursor", err)
		}
		got, err = decodeCursor(raw, prefix, votes)
		if err != nil && !errors.Is(err, ErrBadCursor) {
			t.Fatalf("decodeCursor(%q): %v, want ErrBadCursor", raw, err)
		}
		for _, p := range got {
			if p.State > posDone {
				t.Fatalf("decodeCursor(%q): a master in state %d", raw, p.State)
			}
		}
		if err == nil && len(got) != votes {
			t.Fatalf("decodeCursor(%q): %d masters, want %d", raw, len(got), votes)
		}
	})
}
