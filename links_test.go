package searchd

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestMarkdownRelativeLinksResolve checks every relative link of every
// Markdown file in the repository (README.md, docs/, the clients' and the
// examples' READMEs, CHANGELOG.md): the file or directory it names exists,
// and a #fragment names a heading (or an <a id>) of the file it points
// into, by GitHub's rule for heading anchors.
func TestMarkdownRelativeLinksResolve(t *testing.T) {
	t.Parallel()
	docs := markdownFiles(t)
	if len(docs) < 3 {
		t.Fatalf("found %d Markdown files (%v); the walk is broken", len(docs), docs)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if _, ok := anchors[path]; !ok {
			anchors[path] = markdownAnchors(t, path)
		}
		return anchors[path]
	}
	checked := 0
	for _, doc := range docs {
		for _, l := range markdownLinks(t, doc) {
			target, fragment, _ := strings.Cut(l.target, "#")
			path := doc
			if target != "" {
				path = filepath.Join(filepath.Dir(doc), filepath.FromSlash(target))
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", doc, l.line, l.target, path)
					continue
				}
			}
			checked++
			if fragment == "" {
				continue
			}
			if !strings.HasSuffix(path, ".md") {
				t.Errorf("%s:%d: link %q: a fragment into %s, which is not Markdown", doc, l.line, l.target, path)
				continue
			}
			if !anchorsOf(path)[fragment] {
				t.Errorf("%s:%d: link %q: %s has no heading or anchor %q", doc, l.line, l.target, path, fragment)
			}
		}
	}
	t.Logf("checked %d relative links in %d Markdown files", checked, len(docs))
}

// TestAnchorsFollowGitHubsRule pins the heading-to-anchor rule the link
// check relies on to examples of what GitHub renders.
func TestAnchorsFollowGitHubsRule(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ heading, want string }{
		{"Quick start", "quick-start"},
		{"The `agent.idempotency_keys` table", "the-agentidempotency_keys-table"},
		{"Inbound deliveries are never lost: two stages", "inbound-deliveries-are-never-lost-two-stages"},
		{"HTTP API", "http-api"},
		{"[0.7.0] - 2026-12-01", "070---2026-12-01"},
		{"Tokens, CORS & the page", "tokens-cors--the-page"},
		{"**Bold** and *it*", "bold-and-it"},
		{"A [link](x.md) in it", "a-link-in-it"},
	} {
		if got := anchorOf(c.heading); got != c.want {
			t.Errorf("anchorOf(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
}

// markdownFiles lists the repository's Markdown files, but those of
// installed packages and build output.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", ".build", ".searchd-dev", "dist":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".md") {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type mdLink struct {
	line   int
	target string
}

var (
	// inlineLink matches [text](target) and ![alt](target "title").
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// refLink matches a reference definition: [name]: target.
	refLink  = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	codeSpan = regexp.MustCompile("`+[^`]*`+")
	scheme   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	htmlID   = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
)

// markdownLinks returns the relative links of path, outside code.
func markdownLinks(t *testing.T, path string) []mdLink {
	t.Helper()
	var out []mdLink
	eachProseLine(t, path, func(n int, line string) {
		line = codeSpan.ReplaceAllString(line, "")
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		if m := refLink.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
				continue // a URL: not this test's business
			}
			out = append(out, mdLink{line: n, target: target})
		}
	})
	return out
}

// markdownAnchors returns the anchors of path: one per heading (the
// second of a name gets -1, the third -2), and every <a id> or <a name>.
func markdownAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	seen := map[string]int{}
	out := map[string]bool{}
	eachProseLine(t, path, func(_ int, line string) {
		for _, m := range htmlID.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		trimmed := strings.TrimLeft(line, " ")
		if len(line)-len(trimmed) > 3 || !strings.HasPrefix(trimmed, "#") {
			return
		}
		text := strings.TrimLeft(trimmed, "#")
		if n := len(trimmed) - len(text); n > 6 || (text != "" && text[0] != ' ' && text[0] != '\t') {
			return
		}
		a := anchorOf(strings.TrimSpace(strings.TrimRight(strings.TrimSpace(text), "#")))
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	})
	return out
}

var textLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// anchorOf is GitHub's anchor of a heading: its text (links replaced by
// theirs, markup dropped) in lower case, with every character but letters,
// digits, marks, '_', '-' and spaces removed and each space made a '-'.
func anchorOf(heading string) string {
	heading = textLink.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), unicode.IsMark(r), r == '_', r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// eachProseLine calls fn with each line of path that is not inside a
// fenced code block, numbered from 1.
func eachProseLine(t *testing.T, path string, fn func(n int, line string)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	fence := ""
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			for _, c := range trimmed[3:] {
				if c != rune(fence[0]) {
					break
				}
				fence += string(c)
			}
			continue
		}
		fn(n, line)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}
