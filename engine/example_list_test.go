package engine_test

import (
	"context"
	"fmt"
	"log"
	"slices"
)

// Walk yields the names a quorum holds as it finds them, in the
// masters' order, holding a few batches of them at a time however many
// there are. Breaking out of the loop stops the walk, and the last
// name's Cursor resumes it, here for a second page.
func ExampleLocker_Walk() {
	ctx := context.Background()
	locker := exampleLocker(nil)
	defer locker.Close()
	for _, name := range []string{"example:walk:a", "example:walk:b", "example:walk:c"} {
		lease, err := locker.TryLock(ctx, name)
		if err != nil {
			log.Fatal(err)
		}
		defer lease.Release(ctx)
	}

	var names []string
	cursor := ""
	for n, err := range locker.Walk(ctx, "example:walk:") {
		if err != nil {
			log.Fatal(err)
		}
		names = append(names, n.Name)
		if len(names) == 2 {
			cursor = n.Cursor()
			break
		}
	}
	for n, err := range locker.WalkFrom(ctx, "example:walk:", cursor) {
		if err != nil {
			log.Fatal(err)
		}
		names = append(names, n.Name)
	}
	// Unsorted; and a name may repeat if the masters' keys change a lot
	// during the walk (see Walk).
	slices.Sort(names)
	fmt.Println(slices.Compact(names))
	// Output: [example:walk:a example:walk:b example:walk:c]
}
