// Package docs_test keeps the documentation navigable: every relative link
// in README.md and docs/*.md points at a file that exists (and, into a
// Markdown page, at a heading that exists), and every page of docs/ is
// linked from the README, so that nothing moved out of the README is lost
// from view.
package docs_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// root is the repository root, seen from this package's directory.
const root = "../.."

// pages are README.md and every docs/*.md, relative to root.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatalf("no docs/*.md under %s: is the test run from internal/docs?", root)
	}
	out := []string{"README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

// link is one Markdown link: where it is and where it points.
type link struct {
	page   string // relative to root, e.g. docs/library.md
	line   int
	target string // as written
}

var (
	linkRE = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// codeSpanRE matches inline code, whose brackets are not links.
	codeSpanRE = regexp.MustCompile("(`+)[^`]*?(?:`[^`]+)*?`+")
	schemeRE   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	headingRE  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	mdLinkRE   = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// prose calls f with each line of the page outside fenced code blocks.
func prose(t *testing.T, page string, f func(n int, line string)) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(nil, 1<<20)
	fence := ""
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")) {
			fence = trimmed[:3]
			continue
		}
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		f(n, line)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

func links(t *testing.T, page string) []link {
	var out []link
	prose(t, page, func(n int, line string) {
		// Keep the code spans' length out of it: only their brackets matter.
		line = codeSpanRE.ReplaceAllString(line, "code")
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			out = append(out, link{page: page, line: n, target: m[1]})
		}
	})
	return out
}

// slug is the anchor GitHub gives a heading: its text lower-cased, without
// punctuation but hyphens and underscores, spaces turned into hyphens.
func slug(heading string) string {
	text := mdLinkRE.ReplaceAllString(heading, "$1")
	text = strings.NewReplacer("`", "", "*", "").Replace(text)
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the fragments a page's headings can be linked with; a heading
// that repeats an earlier one's slug gets -1, -2, ... as on GitHub.
func anchors(t *testing.T, page string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	prose(t, page, func(_ int, line string) {
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			return
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	})
	return out
}

// resolve returns the link's file relative to root (empty: the page itself)
// and its fragment.
func resolve(l link) (file, fragment string) {
	target, fragment, _ := strings.Cut(l.target, "#")
	if target == "" {
		return l.page, fragment
	}
	return filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(l.page), target))), fragment
}

func TestRelativeLinksResolve(t *testing.T) {
	cache := map[string]map[string]bool{}
	checked := 0
	for _, page := range pages(t) {
		for _, l := range links(t, page) {
			if schemeRE.MatchString(l.target) {
				continue // http:, https:, mailto:
			}
			checked++
			file, fragment := resolve(l)
			where := fmt.Sprintf("%s:%d: link %q", l.page, l.line, l.target)
			if strings.HasPrefix(file, "../") {
				t.Errorf("%s leaves the repository (%s)", where, file)
				continue
			}
			if _, err := os.Stat(filepath.Join(root, file)); err != nil {
				t.Errorf("%s: %s does not exist: fix the path (relative to %s)", where, file, filepath.Dir(l.page))
				continue
			}
			if fragment == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			a, ok := cache[file]
			if !ok {
				a = anchors(t, file)
				cache[file] = a
			}
			if !a[fragment] {
				t.Errorf("%s: %s has no heading with anchor #%s (anchors: %s)", where, file, fragment, strings.Join(sortedKeys(a), ", "))
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no relative links at all: the link pattern no longer matches the pages")
	}
	t.Logf("%d relative links checked", checked)
}

func TestEveryDocsPageIsLinkedFromTheREADME(t *testing.T) {
	linked := map[string]bool{}
	for _, l := range links(t, "README.md") {
		if !schemeRE.MatchString(l.target) {
			file, _ := resolve(l)
			linked[file] = true
		}
	}
	for _, page := range pages(t) {
		if page != "README.md" && !linked[page] {
			t.Errorf("%s is not linked from README.md: add it to the README's documentation table", page)
		}
	}
}

// TestSlug pins the anchor rule on the kinds of headings the pages use.
func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Library quick start":                                "library-quick-start",
		"`redlock exec`: a distributed `flock(1)`":           "redlock-exec-a-distributed-flock1",
		"Live metrics: `--metrics-addr`":                     "live-metrics---metrics-addr",
		"Faults: `--fault`":                                  "faults---fault",
		"Guaranteed, under the assumptions below":            "guaranteed-under-the-assumptions-below",
		"Comparing engines: `redlock-bench compare`":         "comparing-engines-redlock-bench-compare",
		"Waiting: notifications, not polling":                "waiting-notifications-not-polling",
		"Restarts: quarantine":                               "restarts-quarantine",
		"OpenTelemetry: `otelredlock`":                       "opentelemetry-otelredlock",
		"See [the guarantees](docs/guarantees.md) *at once*": "see-the-guarantees-at-once",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
