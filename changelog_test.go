package searchd

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestChangelogVersionsAndVersionFile holds CHANGELOG.md to its form (Keep
// a Changelog with Semantic Versioning): an optional Unreleased section,
// then released versions, newest first, strictly descending, with
// non-increasing dates, each with only the standard sections plus
// "Upgrade notes", which every release has. And VERSION, which every build
// reports, names the newest release.
func TestChangelogVersionsAndVersionFile(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	release := regexp.MustCompile(`^## \[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})$`)
	sections := map[string]bool{"Added": true, "Changed": true, "Deprecated": true, "Removed": true, "Fixed": true, "Security": true, "Upgrade notes": true}
	type version struct {
		name, date string
		n          [3]int
		notes      bool
	}
	var versions []*version
	var cur *version
	for i, line := range strings.Split(string(b), "\n") {
		switch {
		case line == "## [Unreleased]":
			if len(versions) > 0 || cur != nil {
				t.Errorf("CHANGELOG.md:%d: Unreleased must come before every release", i+1)
			}
			cur = &version{name: "Unreleased"}
		case strings.HasPrefix(line, "## "):
			m := release.FindStringSubmatch(line)
			if m == nil {
				t.Errorf("CHANGELOG.md:%d: %q is neither \"## [Unreleased]\" nor \"## [X.Y.Z] - YYYY-MM-DD\"", i+1, line)
				continue
			}
			cur = &version{name: strings.Join(m[1:4], "."), date: m[4]}
			for k := range 3 {
				cur.n[k], _ = strconv.Atoi(m[k+1])
			}
			versions = append(versions, cur)
		case strings.HasPrefix(line, "### "):
			name := strings.TrimPrefix(line, "### ")
			if cur == nil || !sections[name] {
				t.Errorf("CHANGELOG.md:%d: section %q is not one of Keep a Changelog's (or Upgrade notes), or stands outside a version", i+1, name)
				continue
			}
			cur.notes = cur.notes || name == "Upgrade notes"
		}
	}
	if len(versions) == 0 {
		t.Fatal("CHANGELOG.md names no released version")
	}
	for i, v := range versions {
		if !v.notes {
			t.Errorf("version %s has no \"### Upgrade notes\"", v.name)
		}
		if i == 0 {
			continue
		}
		prev := versions[i-1]
		if !(prev.n[0] > v.n[0] || prev.n[0] == v.n[0] && (prev.n[1] > v.n[1] || prev.n[1] == v.n[1] && prev.n[2] > v.n[2])) {
			t.Errorf("version %s follows %s: versions must be newest first, each once", v.name, prev.name)
		}
		if prev.date < v.date {
			t.Errorf("version %s (%s) is dated after %s (%s), which is newer", v.name, v.date, prev.name, prev.date)
		}
	}
	if got := Version(); got != versions[0].name {
		t.Errorf("VERSION says %q; the newest version of CHANGELOG.md is %s", got, versions[0].name)
	}
}
