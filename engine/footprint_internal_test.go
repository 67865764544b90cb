package engine

import (
	"testing"
	"unsafe"
)

// A lease on one resource is allocated by every TryLock and Lock, a
// subscription by every waiter: the multi-resource lock's fields must not
// move them into a larger size class (a Lease was 552 bytes, in the
// 576-byte class; a subscription 56, in the 64-byte one).
func TestSingleResourceStructsKeepTheirSizeClass(t *testing.T) {
	for _, c := range []struct {
		name      string
		size, max uintptr
	}{
		{"Lease", unsafe.Sizeof(Lease{}), 576},
		{"subscription", unsafe.Sizeof(subscription{}), 64},
		{"ticket", unsafe.Sizeof(ticket{}), 48},
		{"waiter", unsafe.Sizeof(waiter{}), 128},
	} {
		if c.size > c.max {
			t.Errorf("%s is %d bytes, over its size class of %d: put what only a lease on several resources needs behind one pointer", c.name, c.size, c.max)
		}
	}
}
