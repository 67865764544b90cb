package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// After Release returns, the same process can take the resource again at
// once: the deletes it sent have all landed, so none is overtaken by the
// new SET. Many goroutines make the masters' queues deep.
func TestReacquireRightAfterRelease(t *testing.T) {
	e := newEnv(t, 5)
	l := e.locker(nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	var once sync.Once
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("reacquire:%d", g)
			prev := ""
			for i := 0; i < 200; i++ {
				le, err := l.TryLock(ctx, name)
				if err != nil {
					once.Do(func() {
						vals := []string{}
						for n := 0; n < 5; n++ {
							vals = append(vals, e.get(n, name))
						}
						t.Errorf("iter %d: %v\nprev=%s\nvalues now=%q", i, err, prev, vals)
					})
					return
				}
				prev = le.Value()
				if err := le.Release(ctx); err != nil {
					t.Errorf("release: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
