package results

import "testing"

// The capacity plan's markdown becomes HTML, with every text escaped.
func TestCapacityHTML(t *testing.T) {
	md := "# Capacity plan\n\nIntro `x` <b>\nmore\n\n## Sweep a<b\n\n- **one**: `c`\n  continued\n- two\n  - sub **a**\n    sub continued\n  - sub b\n  back in two\n\n```sh\nredlock-bench sweep --slo='p99<5ms'\n```\n"
	got := string(capacityHTML(md))
	want := "<p>Intro <code>x</code> &lt;b&gt;\nmore</p>\n<h3>Sweep a&lt;b</h3>\n<ul>\n<li><b>one</b>: <code>c</code><br>continued</li>\n<li>two\n<ul>\n<li>sub <b>a</b><br>sub continued</li>\n<li>sub b</li></ul><br>back in two</li></ul>\n<pre><code>redlock-bench sweep --slo=&#39;p99&lt;5ms&#39;\n</code></pre>\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
