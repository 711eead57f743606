// Package docs_test keeps the user guide (README.md, docs/*.md) and the
// design contract (docs/design.md) true to the code: every config example
// loads (or fails with the message shown), every `autox` command line parses
// against the real command tree, every script and path shown exists, every
// relative link and anchor resolves, and every metric autox registers, every
// flag of every command and every config field is documented.
//
// Markers, HTML comments on the line before a fenced block, say what a block
// is when its content alone cannot:
//
//	<!-- invalid -->                 a config that must fail to load, with exactly
//	                                 the `config.yaml: <path>: <message>` lines of
//	                                 the next fenced block
//	<!-- file: DIR/NAME -->          a file of a kustomize recipe (DIR under the repository)
//	<!-- kustomization: DIR -->      a kustomization.yaml that must build in DIR,
//	                                 beside a copy of manifests/ and the files above
package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"go.uber.org/goleak"
)

// repoRoot is the repository, one directory up from this package.
const repoRoot = ".."

// doc is one Markdown file, split into what the checks read.
type doc struct {
	path   string // relative to the repository root
	lines  []string
	fences []fence
	// prose is the text outside fenced blocks, by paragraph (lines joined
	// with spaces), with the line each starts at.
	prose []paragraph
	// anchors are the ids of its headings, as GitHub makes them, and of
	// explicit <a id> tags.
	anchors map[string]bool
	// headings in order.
	headings []heading
}

type fence struct {
	info   string // the info string: yaml, sh, text, ...
	marker string // the HTML comment just before it, without <!-- -->
	body   string
	line   int // of the opening fence, 1-based
}

type paragraph struct {
	text string
	line int
}

type heading struct {
	level int
	text  string
	line  int // index into lines
}

func (d *doc) where(line int) string { return d.path + ":" + strconv.Itoa(line) }

var (
	docsOnce []*doc
	anchorID = regexp.MustCompile(`<a (?:id|name)="([^"]+)"`)
)

// docs reads README.md, the other Markdown files at the root and docs/*.md.
func docs(t *testing.T) []*doc {
	t.Helper()
	if docsOnce != nil {
		return docsOnce
	}
	var paths []string
	for _, pattern := range []string{"*.md", "docs/*.md"} {
		m, err := filepath.Glob(filepath.Join(repoRoot, pattern))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, m...)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, p)
		docsOnce = append(docsOnce, parse(filepath.ToSlash(rel), string(data)))
	}
	if len(docsOnce) < 2 {
		t.Fatalf("found only %d Markdown files under %s", len(docsOnce), repoRoot)
	}
	return docsOnce
}

// find returns the document at path (relative to the repository root).
func find(t *testing.T, path string) *doc {
	t.Helper()
	for _, d := range docs(t) {
		if d.path == path {
			return d
		}
	}
	t.Fatalf("no document %s", path)
	return nil
}

func parse(path, text string) *doc {
	d := &doc{path: path, lines: strings.Split(text, "\n"), anchors: map[string]bool{}}
	slugs := map[string]int{}
	var para []string
	paraLine := 0
	flush := func() {
		if len(para) > 0 {
			d.prose = append(d.prose, paragraph{strings.Join(para, " "), paraLine})
			para = nil
		}
	}
	lastNonBlank := ""
	for i := 0; i < len(d.lines); i++ {
		l := d.lines[i]
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "```") {
			flush()
			indent := l[:strings.Index(l, "```")]
			f := fence{info: strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), line: i + 1}
			if m := strings.TrimSpace(lastNonBlank); strings.HasPrefix(m, "<!--") && strings.HasSuffix(m, "-->") {
				f.marker = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(m, "<!--"), "-->"))
			}
			var body []string
			for i++; i < len(d.lines) && strings.TrimSpace(d.lines[i]) != "```"; i++ {
				body = append(body, strings.TrimPrefix(d.lines[i], indent))
			}
			f.body = strings.Join(body, "\n") + "\n"
			d.fences = append(d.fences, f)
			lastNonBlank = "```"
			continue
		}
		if trimmed != "" {
			lastNonBlank = trimmed
		}
		for _, m := range anchorID.FindAllStringSubmatch(l, -1) {
			d.anchors[m[1]] = true
		}
		if level := headingLevel(l); level > 0 {
			flush()
			text := strings.TrimSpace(l[level:])
			d.headings = append(d.headings, heading{level, text, i})
			s := slug(text)
			if n := slugs[s]; n > 0 {
				d.anchors[s+"-"+strconv.Itoa(n)] = true
			} else {
				d.anchors[s] = true
			}
			slugs[s]++
			continue
		}
		if trimmed == "" || strings.HasPrefix(trimmed, "|") || strings.HasPrefix(trimmed, "- ") {
			// Table rows and list items are paragraphs of their own.
			flush()
		}
		if trimmed != "" {
			if len(para) == 0 {
				paraLine = i + 1
			}
			para = append(para, trimmed)
		}
	}
	flush()
	return d
}

func headingLevel(l string) int {
	n := 0
	for n < len(l) && l[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || n >= len(l) || l[n] != ' ' {
		return 0
	}
	return n
}

// slug is GitHub's anchor of a heading: lower case, spaces to dashes,
// punctuation other than - and _ dropped.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// spans are the inline code spans of the document's prose.
func (d *doc) spans() []paragraph {
	var out []paragraph
	for _, p := range d.prose {
		for _, m := range codeSpan.FindAllStringSubmatch(p.text, -1) {
			out = append(out, paragraph{m[1], p.line})
		}
	}
	return out
}

// section returns the lines under the first heading that contains title,
// up to the next heading of the same or a higher level, within lines
// [from, to) of the document.
func (d *doc) section(title string, from, to int) (string, bool) {
	for i, h := range d.headings {
		if h.line < from || h.line >= to || !strings.Contains(h.text, title) {
			continue
		}
		end := to
		for _, next := range d.headings[i+1:] {
			if next.level <= h.level {
				end = min(end, next.line)
				break
			}
		}
		return strings.Join(d.lines[h.line+1:end], "\n"), true
	}
	return "", false
}

// lineOf returns the index of the first line starting with prefix, or -1.
func (d *doc) lineOf(prefix string) int {
	for i, l := range d.lines {
		if strings.HasPrefix(l, prefix) {
			return i
		}
	}
	return -1
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
