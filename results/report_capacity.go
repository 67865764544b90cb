package results

import (
	"fmt"
	textTemplate "text/template"
)

// The capacity plan is built once as a capacityPlan and rendered twice:
// as Markdown (capacity.md, by capacityMarkdown) and as HTML (the page's
// "Capacity plan" section, by the "capacity" template in reportTemplate).
// Neither rendering is derived from the other, and html/template escapes
// every text of the HTML one.

// capacityPlan is the content of a capacity plan.
type capacityPlan struct {
	Intro    []text // the opening paragraph, one line each
	TTL      text   // the TTL rule, a paragraph of its own (optional)
	Sections []capacitySection
}

// capacitySection is one sweep, or all the runs.
type capacitySection struct {
	Title   string
	Lead    text
	Items   []capacityItem
	Config  text   // optional closing paragraph: what the figures rest on
	Command string // optional command line that reproduces the section
}

// capacityItem is a bullet: its first line, its sub-bullets (one level
// deep; their own Subs are not rendered) and its continuation lines.
type capacityItem struct {
	Text text
	Subs []capacityItem
	More []text
}

// span is a run of plain, bold or code text.
type span struct {
	Text       string
	Bold, Code bool
}

// text is a line of spans, built by chaining: text{}.b("Safety:").p(" ok").
type text []span

func (t text) p(format string, a ...any) text {
	return append(t, span{Text: fmt.Sprintf(format, a...)})
}
func (t text) b(format string, a ...any) text {
	return append(t, span{Text: fmt.Sprintf(format, a...), Bold: true})
}
func (t text) c(s string) text { return append(t, span{Text: s, Code: true}) }

// Go raw strings cannot hold the backquotes Markdown's code marks use.
const (
	mdTick  = "`"
	mdFence = "```"
)

var capacityMarkdown = textTemplate.Must(textTemplate.Must(textTemplate.New(CapacityFile).Parse(`# Capacity plan

{{range .Intro}}{{template "text" .}}
{{end}}
{{- with .TTL}}
{{template "text" .}}
{{end}}
{{- range .Sections}}
## {{.Title}}

{{template "text" .Lead}}

{{range .Items}}{{template "item" .}}{{end}}
{{- with .Config}}
{{template "text" .}}
{{end}}
{{- with .Command}}
To reproduce:

` + mdFence + `sh
{{.}}
` + mdFence + `
{{end}}
{{- end}}`)).Parse(`
{{define "text"}}{{range .}}{{if .Bold}}**{{.Text}}**{{else if .Code}}` + mdTick + `{{.Text}}` + mdTick + `{{else}}{{.Text}}{{end}}{{end}}{{end}}
{{define "item"}}- {{template "text" .Text}}
{{range .Subs}}  - {{template "text" .Text}}
{{range .More}}    {{template "text" .}}
{{end}}{{end}}{{range .More}}  {{template "text" .}}
{{end}}{{end}}`))

// capacityHTMLTemplates are parsed into reportTemplate: {{template
// "capacity" .Capacity}} renders a capacityPlan.
const capacityHTMLTemplates = `
{{define "capacityText"}}{{range .}}{{if .Bold}}<b>{{.Text}}</b>{{else if .Code}}<code>{{.Text}}</code>{{else}}{{.Text}}{{end}}{{end}}{{end}}
{{define "capacityItem"}}<li>{{template "capacityText" .Text}}{{with .Subs}}
<ul>
{{range .}}<li>{{template "capacityText" .Text}}{{range .More}}<br>{{template "capacityText" .}}{{end}}</li>
{{end}}</ul>{{end}}{{range .More}}<div>{{template "capacityText" .}}</div>{{end}}</li>
{{end}}
{{define "capacity"}}<p>{{range .Intro}}{{template "capacityText" .}}
{{end}}</p>
{{with .TTL}}<p>{{template "capacityText" .}}</p>
{{end}}{{range .Sections}}<h3>{{.Title}}</h3>
<p>{{template "capacityText" .Lead}}</p>
<ul>
{{range .Items}}{{template "capacityItem" .}}{{end}}</ul>
{{with .Config}}<p>{{template "capacityText" .}}</p>
{{end}}{{with .Command}}<p>To reproduce:</p>
<pre><code>{{.}}</code></pre>
{{end}}{{end}}{{end}}`
