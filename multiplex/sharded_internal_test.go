package multiplex

import (
	"strings"
	"testing"
)

// A cluster vote's form of a script publishes with SPUBLISH, falling back
// to PUBLISH where the server has no SPUBLISH, on the lines the body had;
// a script that publishes nothing is left as it was.
func TestClusterFormPublishesOnTheShard(t *testing.T) {
	body := "local v = redis.call(\"GET\", KEYS[1])\nredis.call(\"PUBLISH\", \"c:\" .. KEYS[1], v)\nreturn redis.call(\"PUBLISH\", \"d\", \"\")"
	g := NewScript(body).guarded().Body
	if strings.Count(g, "\n") != strings.Count(body, "\n") {
		t.Errorf("lines moved:\n%s", g)
	}
	if n := strings.Count(g, `redis.call("PUBLISH"`); n != 1 || !strings.Contains(g, `pcall(redis.call, "SPUBLISH", c, m)`) {
		t.Errorf("cluster form publishes otherwise than through spub:\n%s", g)
	}
	if strings.Count(g, "spub(") != 3 { // its definition and two calls
		t.Errorf("want two publishes through spub:\n%s", g)
	}
	plain := "return redis.call(\"GET\", KEYS[1])"
	if g := NewScript(plain).guarded().Body; g != guardPrologue+plain {
		t.Errorf("a script that publishes nothing changed: %q", g)
	}
}
