package bench

import (
	"os"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	// rueidislock gives up a key attempt after 20 ms, as the bench runs
	// it: beside other work a healthy master can take longer to answer,
	// and the baseline's runs would then acquire nothing. The tests check
	// the adapter and the oracle, not that deadline.
	rueidislockTryNextAfter = 200 * time.Millisecond
	os.Exit(m.Run())
}
