package engine

import (
	"strings"
	"testing"
)

// A cluster vote's scripts publish on their shard because multiplex
// rewrites their one form of publish (see multiplex's sharded): a
// publish written otherwise would stay a PUBLISH, which the cluster
// forwards to every node and no sharded subscription receives.
func TestScriptsPublishInTheShardedForm(t *testing.T) {
	const form = `redis.call("PUBLISH", `
	scripts := append(append(allScripts[:len(allScripts):len(allScripts)], multiScripts...), rwScripts...)
	publishing := 0
	for _, s := range scripts {
		for ; s != nil; s = s.Multi {
			all := strings.Count(strings.ToUpper(s.Body), "PUBLISH")
			if n := strings.Count(s.Body, form); n != all {
				t.Errorf("script %s publishes %d times, %d of them as %s:\n%s", s.SHA, all, n, form, s.Body)
			}
			if all > 0 {
				publishing++
			}
		}
	}
	if publishing == 0 {
		t.Fatal("no script publishes: the check checks nothing")
	}
}
