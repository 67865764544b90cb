package multiplex

import (
	"testing"
	"unsafe"
)

// A Command is copied into every round, and a round is pooled per
// command in flight: further keys (Command.Keys) must not make either
// larger for the commands on one key (a Command was 160 bytes, a round
// 256, the top of its size class).
func TestOneKeyCommandsStaySmall(t *testing.T) {
	if n := unsafe.Sizeof(Command{}); n > 160 {
		t.Errorf("Command is %d bytes, over 160", n)
	}
	if n := unsafe.Sizeof(round{}); n > 256 {
		t.Errorf("round is %d bytes, over its size class of 256", n)
	}
}
