package searchd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readmeMaxLines is the most lines README.md may have: it is the front
// door (what searchd is, the set-up, the first run, the curl tour, the
// table of contents and the license), and everything else is in docs/.
const readmeMaxLines = 200

// TestReadmeIsAFrontDoor holds README.md to at most readmeMaxLines lines,
// naming the license, and checks that every page of docs/ can be found
// from it: linked from the README, or from a Markdown file reached that
// way. A page nobody links to is a page nobody reads.
func TestReadmeIsAFrontDoor(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	lines := strings.Count(readme, "\n")
	if !strings.HasSuffix(readme, "\n") {
		lines++
	}
	if lines > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than the front door's %d: move the detail into docs/", lines, readmeMaxLines)
	}
	if !strings.Contains(readme, "](LICENSE)") {
		t.Error("README.md does not link the LICENSE")
	}

	reached := map[string]bool{"README.md": true}
	queue := []string{"README.md"}
	for len(queue) > 0 {
		doc := queue[0]
		queue = queue[1:]
		for _, l := range markdownLinks(t, doc) {
			target, _, _ := strings.Cut(l.target, "#")
			if !strings.HasSuffix(target, ".md") {
				continue
			}
			path := filepath.Join(filepath.Dir(doc), filepath.FromSlash(target))
			if reached[path] {
				continue
			}
			if _, err := os.Stat(path); err != nil {
				continue // the link check reports it
			}
			reached[path] = true
			queue = append(queue, path)
		}
	}
	pages, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 5 {
		t.Fatalf("found %d pages in docs/ (%v); the glob is broken", len(pages), pages)
	}
	for _, p := range pages {
		if !reached[p] {
			t.Errorf("%s is linked from neither README.md nor any page it leads to: add it to the README's Documentation table", p)
		}
	}
	t.Logf("README.md: %d lines; %d Markdown files reached from it, %d pages in docs/", lines, len(reached), len(pages))
}
