package snapshot_test

import (
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/snapshot"
)

// TestDiffBaselinesCountsAndPagesEachSide: the diff the database computes
// names the added items in the newer's order and the removed ones in the
// older's, counts all three kinds, pages each side on its own, and
// answers nothing of a snapshot of another organization.
func TestDiffBaselinesCountsAndPagesEachSide(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ss := b.createSearch(t, "diff", "a", "b", "c", "d")
	older, err := b.freeze(b.org, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.searches.ReplaceBaseline(b.ctx, b.org, ss.ID, savedsearch.Baseline{Items: []string{"c", "e", "a", "f", "g"}}); err != nil {
		t.Fatal(err)
	}
	newer, err := b.freeze(b.org, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	var added, removed []string
	p := snapshot.DiffParams{Limit: 2}
	for pages := 0; ; pages++ {
		d, err := b.store.DiffBaselines(b.ctx, b.org, older.ID, newer.ID, p)
		if err != nil {
			t.Fatal(err)
		}
		if d.AddedCount != 3 || d.RemovedCount != 2 || d.KeptCount != 2 {
			t.Fatalf("DiffBaselines counts = %d added, %d removed, %d kept; want 3, 2, 2", d.AddedCount, d.RemovedCount, d.KeptCount)
		}
		if len(d.Added) > 2 || len(d.Removed) > 2 {
			t.Fatalf("a page of 2 holds %v added and %v removed", d.Added, d.Removed)
		}
		added, removed = append(added, d.Added...), append(removed, d.Removed...)
		if d.AddedNext == 0 && d.RemovedNext == 0 {
			break
		}
		if pages > 3 {
			t.Fatalf("the pages do not end: %+v", d)
		}
		p.AddedAfter, p.RemovedAfter = d.AddedNext, d.RemovedNext
		if d.RemovedNext == 0 {
			p.RemovedAfter = 1 << 20 // that side is done
		}
	}
	if !slices.Equal(added, []string{"e", "f", "g"}) || !slices.Equal(removed, []string{"b", "d"}) {
		t.Errorf("DiffBaselines paged through added %v, removed %v; want [e f g] and [b d]", added, removed)
	}
	// Another organization's snapshots have no items to it.
	d, err := b.store.DiffBaselines(b.ctx, uuid.New(), older.ID, newer.ID, snapshot.DiffParams{Limit: 10})
	if err != nil || d.AddedCount+d.RemovedCount+d.KeptCount != 0 || len(d.Added)+len(d.Removed) != 0 {
		t.Errorf("DiffBaselines of another organization = %+v, %v; want nothing", d, err)
	}
	items, next, err := b.store.BaselineItems(b.ctx, b.org, newer.ID, 1, 3)
	if err != nil || !slices.Equal(items, []string{"e", "a", "f"}) || next != 4 {
		t.Errorf("BaselineItems(after 1, 3) = %v, %d, %v; want [e a f], 4", items, next, err)
	}
	if items, next, err := b.store.BaselineItems(b.ctx, b.org, newer.ID, 4, 3); err != nil || !slices.Equal(items, []string{"g"}) || next != 0 {
		t.Errorf("BaselineItems(after 4, 3) = %v, %d, %v; want [g], 0", items, next, err)
	}
}
