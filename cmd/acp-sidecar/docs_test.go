package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// The README is one page, and the reference lives in docs/. These tests keep
// that true: the README stays short and links every docs page, and no link in
// the README or docs/ points at a file or heading that does not exist.

const (
	repoRoot        = "../.."
	readmeMaxLines  = 150
	readmeFirstCmds = "go run ./cmd/acp-sidecar demo" // TestDemo runs it
)

var (
	// mdLink is an inline link's target, with an optional title: [text](target "title").
	mdLink   = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpan = regexp.MustCompile("`[^`]*`")
	linkText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// mdDoc is a Markdown file as the link check sees it.
type mdDoc struct {
	lines   []string        // outside fenced code blocks
	anchors map[string]bool // the ids GitHub gives its headings
	links   []string        // every inline link's target
}

func readDoc(t *testing.T, path string) mdDoc {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := mdDoc{anchors: map[string]bool{}}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		d.lines = append(d.lines, line)
		if h, ok := strings.CutPrefix(line, "#"); ok {
			a := headingAnchor(strings.TrimLeft(h, "#"))
			if n := seen[a]; n > 0 {
				d.anchors[fmt.Sprintf("%s-%d", a, n)] = true
			} else {
				d.anchors[a] = true
			}
			seen[a]++
		}
		// A link's text may hold code, but code never holds a link.
		for _, m := range mdLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			d.links = append(d.links, m[1])
		}
	}
	if fenced {
		t.Errorf("%s: a code fence is not closed", path)
	}
	return d
}

// headingAnchor is the id GitHub gives a heading: its text as rendered
// (code without backticks, links as their text), lower case, with
// punctuation other than '-' and '_' dropped and spaces turned into '-'.
func headingAnchor(h string) string {
	h = linkText.ReplaceAllString(strings.TrimSpace(h), "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestDocsHeadingAnchor(t *testing.T) {
	for h, want := range map[string]string{
		"The record: `sessions` and `show`":      "the-record-sessions-and-show",
		"When the agent dies, and when it comes": "when-the-agent-dies-and-when-it-comes",
		"`_sidecar/*` methods and the handoff":   "_sidecar-methods-and-the-handoff",
		"Prove it on your agent: `conformance`":  "prove-it-on-your-agent-conformance",
	} {
		if got := headingAnchor(h); got != want {
			t.Errorf("headingAnchor(%q) = %q, want %q", h, got, want)
		}
	}
}

// docPaths are the README and every page under docs/.
func docPaths(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no pages in docs/")
	}
	return append([]string{filepath.Join(repoRoot, "README.md")}, pages...)
}

func TestDocsREADMEIsOnePage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move reference material to docs/", n, readmeMaxLines)
	}
	// The first command a newcomer runs is the one TestDemo runs.
	text := string(b)
	i := strings.Index(text, "```sh\n")
	if i < 0 || !strings.HasPrefix(text[i+len("```sh\n"):], readmeFirstCmds) {
		t.Errorf("README.md's first command is not %q", readmeFirstCmds)
	}
}

func TestDocsREADMELinksEveryPage(t *testing.T) {
	readme := readDoc(t, filepath.Join(repoRoot, "README.md"))
	linked := map[string]bool{}
	for _, l := range readme.links {
		target, _, _ := strings.Cut(l, "#")
		linked[filepath.Clean(target)] = true
	}
	for _, p := range docPaths(t)[1:] {
		rel, err := filepath.Rel(repoRoot, p)
		if err != nil {
			t.Fatal(err)
		}
		if !linked[rel] {
			t.Errorf("README.md does not link %s", rel)
		}
	}
}

func TestDocsLinksResolve(t *testing.T) {
	docs := map[string]mdDoc{}
	paths := docPaths(t)
	for _, p := range paths {
		docs[filepath.Clean(p)] = readDoc(t, p)
	}
	for _, p := range paths {
		for _, l := range docs[filepath.Clean(p)].links {
			if strings.Contains(l, "://") || strings.HasPrefix(l, "mailto:") {
				continue
			}
			target, anchor, _ := strings.Cut(l, "#")
			file := filepath.Clean(p)
			if target != "" {
				file = filepath.Join(filepath.Dir(p), target)
			}
			if _, err := os.Stat(file); err != nil {
				t.Errorf("%s: link %q: %v", p, l, err)
				continue
			}
			if anchor == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			d, ok := docs[file]
			if !ok {
				d = readDoc(t, file)
				docs[file] = d
			}
			if !d.anchors[anchor] {
				t.Errorf("%s: link %q: %s has no heading with that anchor", p, l, file)
			}
		}
	}
}
