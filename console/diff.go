package console

import (
	"maps"
	"slices"

	"github.com/searchd/searchd/internal/canonjson"
	"github.com/searchd/searchd/snapshot"
)

// snapshotDiff is what changed from the older snapshot to the newer.
type snapshotDiff struct {
	Older, Newer *snapshot.Header
	// Baseline is the change of the baseline items: the counts, and a page
	// of the added and of the removed ones (compared in the database).
	Baseline *snapshot.BaselineDiff
	// Fields are the brief fields that changed (query, filters.<name>)
	// and the baseline cursor.
	Fields []fieldChange
	// BriefCut reports that a brief was stored too large to read (before
	// the limits existed): only the queries are compared.
	BriefCut bool
	// SameContent reports equal content hashes: nothing changed.
	SameContent bool
}

// fieldChange is one changed field. Old and New are the values as JSON
// text (null for a null value), the query as it is; a field absent from
// one side has Kind added or removed and "" on that side.
type fieldChange struct {
	Field    string
	Old, New string
	// Kind is added, removed or changed.
	Kind string
}

// olderFirst returns a and b, whichever is older first.
func olderFirst(a, b *snapshot.Header) (older, newer *snapshot.Header) {
	if b.CreatedAt.Before(a.CreatedAt) || (b.CreatedAt.Equal(a.CreatedAt) && b.SavedSearchVersion < a.SavedSearchVersion) {
		return b, a
	}
	return a, b
}

// diffBriefs compares the briefs and baseline cursors of a, older, and b.
func diffBriefs(a, b *snapshot.Header, baseline *snapshot.BaselineDiff) snapshotDiff {
	d := snapshotDiff{Older: a, Newer: b, Baseline: baseline, SameContent: a.ContentHash == b.ContentHash,
		BriefCut: a.BriefCut() || b.BriefCut()}
	if a.Brief.Query != b.Brief.Query {
		d.Fields = append(d.Fields, fieldChange{"query", a.Brief.Query, b.Brief.Query, "changed"})
	}
	names := slices.AppendSeq(slices.Collect(maps.Keys(a.Brief.Filters)), maps.Keys(b.Brief.Filters))
	slices.Sort(names)
	for _, k := range slices.Compact(names) {
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
	if oc, nc := jsonText(a.BaselineCursor), jsonText(b.BaselineCursor); oc != nc {
		d.Fields = append(d.Fields, fieldChange{"baseline.cursor", oc, nc, "changed"})
	}
	return d
}

// jsonText is v as canonical JSON: equal values, equal text; a nil value
// (JSON null, or no cursor) is null.
func jsonText(v any) string {
	b, err := canonjson.Marshal(v)
	if err != nil {
		return "?"
	}
	return string(b)
}
