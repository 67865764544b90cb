package results

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// A run on Sentinel votes records them in its config: summary.json says
// so, summary.txt names them as votes, the command that reproduces the
// run repeats --sentinel for each (one value would not parse), and a
// merge of runs keeps each vote whole (its sentinels are separated by
// commas, which the other settings' joins split on).
func TestConfigRecordsSentinelVotes(t *testing.T) {
	const votes = "mymaster@127.0.0.1:26379,127.0.0.1:26380 other@127.0.0.1:26381"
	c := RunConfig{Workers: 8, Masters: "127.0.0.1:7000,127.0.0.1:7001", Engine: "redlock", TTL: "10s", Sentinel: votes}

	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"sentinel":"` + votes + `"`; !bytes.Contains(b, []byte(want)) {
		t.Errorf("config JSON %s lacks %s", b, want)
	}
	if b, _ := json.Marshal(RunConfig{Workers: 8}); bytes.Contains(b, []byte("sentinel")) {
		t.Errorf("config without Sentinel votes names them: %s", b)
	}

	got := reproduce("run", c.Map(), false, nil)
	if want := " --sentinel=mymaster@127.0.0.1:26379,127.0.0.1:26380 --sentinel=other@127.0.0.1:26381 "; !strings.Contains(got+" ", want) {
		t.Errorf("reproduce: %s lacks %q", got, want)
	}
	if n := strings.Count(got, "--sentinel"); n != 2 {
		t.Errorf("reproduce: %s has %d --sentinel, want 2", got, n)
	}

	var txt strings.Builder
	s := &Summary{Engine: "redlock", Masters: []string{"127.0.0.1:7000", "127.0.0.1:7001"}, Config: c}
	if err := WriteText(&txt, s); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"sentinel 2   mymaster@127.0.0.1:26379,127.0.0.1:26380\n", "sentinel 3   other@127.0.0.1:26381\n"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("summary.txt lacks %q:\n%s", want, txt.String())
		}
	}

	same := c
	if notes := same.merge(c); len(notes) != 0 || same.Sentinel != votes {
		t.Errorf("merge of equal configs: sentinel %q, notes %q", same.Sentinel, notes)
	}
	other := c
	other.Sentinel = "mymaster@127.0.0.1:26379,127.0.0.1:26380 third@127.0.0.1:26390,127.0.0.1:26391"
	notes := c.merge(other)
	if want := votes + " third@127.0.0.1:26390,127.0.0.1:26391"; c.Sentinel != want {
		t.Errorf("merged sentinel %q, want %q", c.Sentinel, want)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "config sentinel differs") {
		t.Errorf("merge notes %q, want one on sentinel", notes)
	}
}
