package console

import (
	"sort"

	"github.com/searchd/searchd/internal/canonjson"
	"github.com/searchd/searchd/snapshot"
)

// snapshotDiff is what changed from the older snapshot to the newer.
type snapshotDiff struct {
	Older, Newer *snapshot.Snapshot
	// Added and Removed are the baseline items of Newer not in Older, and
	// of Older not in Newer, in their snapshots' order; Kept counts the
	// items in both.
	Added, Removed []string
	Kept           int
	// Fields are the brief fields that changed (query, filters.<name>)
	// and the baseline cursor.
	Fields []fieldChange
	// SameContent reports equal content hashes: nothing changed.
	SameContent bool
}

type fieldChange struct {
	Field    string
	Old, New string
	// Kind is added, removed or changed.
	Kind string
}

// diffSnapshots compares a and b, whichever is older first.
func diffSnapshots(a, b *snapshot.Snapshot) snapshotDiff {
	if b.CreatedAt.Before(a.CreatedAt) || (b.CreatedAt.Equal(a.CreatedAt) && b.SavedSearchVersion < a.SavedSearchVersion) {
		a, b = b, a
	}
	d := snapshotDiff{Older: a, Newer: b, SameContent: a.ContentHash == b.ContentHash}
	old := make(map[string]bool, len(a.Baseline.Items))
	for _, it := range a.Baseline.Items {
		old[it] = true
	}
	now := make(map[string]bool, len(b.Baseline.Items))
	for _, it := range b.Baseline.Items {
		now[it] = true
		if !old[it] {
			d.Added = append(d.Added, it)
		} else {
			d.Kept++
		}
	}
	for _, it := range a.Baseline.Items {
		if !now[it] {
			d.Removed = append(d.Removed, it)
		}
	}
	if a.Brief.Query != b.Brief.Query {
		d.Fields = append(d.Fields, fieldChange{"query", a.Brief.Query, b.Brief.Query, "changed"})
	}
	names := make([]string, 0, len(a.Brief.Filters)+len(b.Brief.Filters))
	for k := range a.Brief.Filters {
		names = append(names, k)
	}
	for k := range b.Brief.Filters {
		if _, ok := a.Brief.Filters[k]; !ok {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		ov, inOld := a.Brief.Filters[k]
		nv, inNew := b.Brief.Filters[k]
		os, ns := jsonText(ov), jsonText(nv)
		switch {
		case inOld && !inNew:
			d.Fields = append(d.Fields, fieldChange{"filters." + k, os, "", "removed"})
		case !inOld && inNew:
			d.Fields = append(d.Fields, fieldChange{"filters." + k, "", ns, "added"})
		case os != ns:
			d.Fields = append(d.Fields, fieldChange{"filters." + k, os, ns, "changed"})
		}
	}
	oc, nc := deref(a.Baseline.Cursor), deref(b.Baseline.Cursor)
	if oc != nc {
		d.Fields = append(d.Fields, fieldChange{"baseline.cursor", oc, nc, "changed"})
	}
	return d
}

// jsonText is v as canonical JSON: equal values, equal text.
func jsonText(v any) string {
	if v == nil {
		return ""
	}
	b, err := canonjson.Marshal(v)
	if err != nil {
		return "?"
	}
	return string(b)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
