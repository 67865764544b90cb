package results

import (
	"html"
	"html/template"
	"regexp"
	"strings"
)

var (
	mdBold = regexp.MustCompile(`\*\*(.+?)\*\*`)
	mdCode = regexp.MustCompile("`([^`]+)`")
)

// capacityHTML renders the markdown WriteCapacity writes, and only that
// subset: "## " headings, "- " bullets with two-space continuation lines
// and "  - " sub-bullets with four-space ones,
// ``` fenced blocks, paragraphs, **bold** and `code`. Text is escaped
// before any markup is added, so nothing in a label can inject HTML.
func capacityHTML(md string) template.HTML {
	var b strings.Builder
	inline := func(s string) string {
		s = html.EscapeString(s)
		s = mdCode.ReplaceAllString(s, "<code>$1</code>")
		return mdBold.ReplaceAllString(s, "<b>$1</b>")
	}
	inList, inSub, inPara, inFence := false, false, false, false
	closeSub := func() {
		if inSub {
			b.WriteString("</li></ul>")
			inSub = false
		}
	}
	closeBlocks := func() {
		closeSub()
		if inList {
			b.WriteString("</li></ul>\n")
			inList = false
		}
		if inPara {
			b.WriteString("</p>\n")
			inPara = false
		}
	}
	for _, line := range strings.Split(md, "\n") {
		switch {
		case inFence:
			if strings.HasPrefix(line, "```") {
				b.WriteString("</code></pre>\n")
				inFence = false
				continue
			}
			b.WriteString(html.EscapeString(line) + "\n")
		case strings.HasPrefix(line, "```"):
			closeBlocks()
			b.WriteString("<pre><code>")
			inFence = true
		case strings.HasPrefix(line, "# "):
			closeBlocks() // the page has its own heading
		case strings.HasPrefix(line, "## "):
			closeBlocks()
			b.WriteString("<h3>" + inline(strings.TrimPrefix(line, "## ")) + "</h3>\n")
		case strings.HasPrefix(line, "- "):
			if inPara {
				closeBlocks()
			}
			closeSub()
			if inList {
				b.WriteString("</li>\n<li>")
			} else {
				b.WriteString("<ul>\n<li>")
				inList = true
			}
			b.WriteString(inline(strings.TrimPrefix(line, "- ")))
		case inList && strings.HasPrefix(line, "  - "):
			if inSub {
				b.WriteString("</li>\n<li>")
			} else {
				b.WriteString("\n<ul>\n<li>")
				inSub = true
			}
			b.WriteString(inline(strings.TrimPrefix(line, "  - ")))
		case inSub && strings.HasPrefix(line, "    "):
			b.WriteString("<br>" + inline(strings.TrimSpace(line)))
		case inList && strings.HasPrefix(line, "  "):
			closeSub()
			b.WriteString("<br>" + inline(strings.TrimSpace(line)))
		case strings.TrimSpace(line) == "":
			closeBlocks()
		default:
			if inList {
				closeBlocks()
			}
			if inPara {
				b.WriteString("\n")
			} else {
				b.WriteString("<p>")
				inPara = true
			}
			b.WriteString(inline(line))
		}
	}
	if inFence {
		b.WriteString("</code></pre>\n")
	}
	closeBlocks()
	return template.HTML(b.String()) // every text above went through html.EscapeString
}
