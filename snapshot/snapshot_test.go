package snapshot_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/snapshot"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type bundle struct {
	ctx      context.Context
	db       *pgxpool.Pool
	searches *savedsearch.Store
	store    *snapshot.Store
	org      uuid.UUID
}

func setup(t *testing.T) bundle {
	t.Helper()
	db := pgtest.NewDB(t)
	return bundle{
		ctx:      context.Background(),
		db:       db,
		searches: savedsearch.NewStore(db),
		store:    snapshot.NewStore(db),
		org:      uuid.New(),
	}
}

func (b bundle) createSearch(t *testing.T, query string, items ...string) *savedsearch.SavedSearch {
	t.Helper()
	ss, err := b.searches.Create(b.ctx, b.org, savedsearch.CreateParams{
		Name:     "search " + query,
		Brief:    savedsearch.Brief{Query: query},
		Baseline: savedsearch.Baseline{Items: items},
	})
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

// freeze freezes in a transaction of its own and commits.
func (b bundle) freeze(org, id uuid.UUID) (*snapshot.Snapshot, error) {
	var snap *snapshot.Snapshot
	err := pgx.BeginFunc(b.ctx, b.db, func(tx pgx.Tx) error {
		var err error
		snap, err = snapshot.Freeze(b.ctx, tx, org, id, "user-7", uuid.Nil)
		return err
	})
	return snap, err
}

// TestFreezeStoresTheClaimItAnswers: the sweeper finds a snapshot's claim
// by the claim_id it was stored with; none is stored as NULL.
func TestFreezeStoresTheClaimItAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ss := b.createSearch(t, "rust", "a")
	claim := uuid.New()
	for _, want := range []uuid.UUID{claim, uuid.Nil} {
		snap, err := snapshot.Freeze(b.ctx, b.db, b.org, ss.ID, "", want)
		if err != nil {
			t.Fatal(err)
		}
		var got *uuid.UUID
		if err := b.db.QueryRow(b.ctx, `SELECT claim_id FROM agent.saved_search_snapshots WHERE id = $1`, snap.ID).
			Scan(&got); err != nil {
			t.Fatal(err)
		}
		if want == uuid.Nil && got != nil || want != uuid.Nil && (got == nil || *got != want) {
			t.Errorf("Freeze(claim %s) stored claim_id %v", want, got)
		}
	}
}

func TestFreezeCopiesBriefBaselineAndVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ss := b.createSearch(t, "rust", "a", "b")
	cursor := "c1"
	ss, err := b.searches.ReplaceBaseline(b.ctx, b.org, ss.ID, savedsearch.Baseline{Items: []string{"c"}, Cursor: &cursor})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := b.freeze(b.org, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	if snap.SavedSearchVersion != 2 || snap.Brief.Query != "rust" || !slices.Equal(snap.Baseline.Items, []string{"c"}) ||
		*snap.Baseline.Cursor != "c1" || snap.SavedSearchName != "search rust" || *snap.CreatedBy != "user-7" ||
		snap.OrganizationID != b.org || snap.SavedSearchID != ss.ID {
		t.Errorf("Freeze = %+v, want version 2 of %s with query rust and items [c]", snap, ss.ID)
	}
	want, err := snapshot.ContentHash(ss.Brief, ss.Baseline)
	if err != nil {
		t.Fatal(err)
	}
	if snap.ContentHash != want {
		t.Errorf("content hash = %s, want %s", snap.ContentHash, want)
	}

	got, err := b.store.Get(b.ctx, b.org, snap.ID)
	if err != nil {
		t.Fatal(err)
	}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(snap)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("Get = %s\nwant %s", gotJSON, wantJSON)
	}
	var doc map[string]json.RawMessage
	_ = json.Unmarshal(gotJSON, &doc)
	for _, k := range []string{"id", "organization_id", "saved_search_id", "saved_search_version", "brief",
		"baseline", "content_hash", "created_by", "origin", "created_at"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("snapshot JSON %s lacks %q", gotJSON, k)
		}
	}
	if len(doc) != 10 {
		t.Errorf("snapshot JSON has %d fields, want 10: %s", len(doc), gotJSON)
	}
	if got.Origin != snapshot.OriginAPI {
		t.Errorf("origin of a freeze = %q, want %q", got.Origin, snapshot.OriginAPI)
	}
	sum := snap.Summary()
	if sum.ID != snap.ID || sum.SavedSearchVersion != 2 || sum.ContentHash != snap.ContentHash || !sum.CreatedAt.Equal(snap.CreatedAt) {
		t.Errorf("Summary = %+v", sum)
	}
}

func TestFreezeAnswersNotFoundForAbsentArchivedAndForeign(t *testing.T) {
	t.Parallel()
	b := setup(t)
	archived := b.createSearch(t, "old")
	if err := b.searches.Archive(b.ctx, b.org, archived.ID); err != nil {
		t.Fatal(err)
	}
	live := b.createSearch(t, "live")
	for name, c := range map[string]struct{ org, id uuid.UUID }{
		"absent":    {b.org, uuid.New()},
		"archived":  {b.org, archived.ID},
		"other org": {uuid.New(), live.ID},
	} {
		if snap, err := b.freeze(c.org, c.id); !errors.Is(err, snapshot.ErrNotFound) {
			t.Errorf("Freeze(%s) = %+v, %v; want ErrNotFound", name, snap, err)
		}
	}
	var n int
	if err := b.db.QueryRow(b.ctx, `SELECT count(*) FROM agent.saved_search_snapshots`).Scan(&n); err != nil || n != 0 {
		t.Errorf("snapshot rows = %d, %v; want 0", n, err)
	}
}

func TestContentHashFollowsContentNotVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ss := b.createSearch(t, "q", "x")
	first, err := b.freeze(b.org, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.searches.ReplaceBaseline(b.ctx, b.org, ss.ID, savedsearch.Baseline{Items: []string{"y"}}); err != nil {
		t.Fatal(err)
	}
	changed, err := b.freeze(b.org, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.searches.ReplaceBaseline(b.ctx, b.org, ss.ID, savedsearch.Baseline{Items: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	back, err := b.freeze(b.org, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	if first.ContentHash == changed.ContentHash {
		t.Errorf("hash of items [x] = hash of items [y] = %s", first.ContentHash)
	}
	if first.ContentHash != back.ContentHash || first.SavedSearchVersion == back.SavedSearchVersion {
		t.Errorf("same content at versions %d and %d: hashes %s and %s, want equal",
			first.SavedSearchVersion, back.SavedSearchVersion, first.ContentHash, back.ContentHash)
	}

	// Filter key order and an empty filter map do not change the hash.
	var ab, ba savedsearch.Brief
	_ = json.Unmarshal([]byte(`{"query":"q","filters":{"a":1,"b":{"c":2,"d":3}}}`), &ab)
	_ = json.Unmarshal([]byte(`{ "filters" : {"b":{"d":3,"c":2},"a":1}, "query":"q" }`), &ba)
	h1, _ := snapshot.ContentHash(ab, savedsearch.Baseline{})
	h2, _ := snapshot.ContentHash(ba, savedsearch.Baseline{Items: []string{}})
	if h1 != h2 {
		t.Errorf("ContentHash differs by filter key order: %s, %s", h1, h2)
	}
	h3, _ := snapshot.ContentHash(savedsearch.Brief{Query: "q", Filters: map[string]any{}}, savedsearch.Baseline{})
	h4, _ := snapshot.ContentHash(savedsearch.Brief{Query: "q"}, savedsearch.Baseline{})
	if h3 != h4 {
		t.Errorf("ContentHash differs for empty and absent filters: %s, %s", h3, h4)
	}
}

func TestSnapshotsRefuseUpdate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	snap, err := b.freeze(b.org, b.createSearch(t, "q").ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Exec(b.ctx, `UPDATE agent.saved_search_snapshots SET brief = '{"query":"forged"}' WHERE id = $1`, snap.ID); err == nil {
		t.Error("UPDATE of a snapshot succeeded, want it refused")
	}
	got, err := b.store.Get(b.ctx, b.org, snap.ID)
	if err != nil || got.Brief.Query != "q" {
		t.Errorf("after the refused UPDATE Get = %+v, %v", got, err)
	}
}

func TestListBySavedSearchIsTheAuditTrail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ss := b.createSearch(t, "q")
	other := b.createSearch(t, "other")

	empty, next, err := b.store.ListBySavedSearch(b.ctx, b.org, ss.ID, snapshot.ListParams{})
	if err != nil || empty == nil || len(empty) != 0 || next != "" {
		t.Errorf("ListBySavedSearch(no snapshots) = %v, %q, %v; want an empty slice", empty, next, err)
	}
	var want []uuid.UUID
	for range 3 {
		snap, err := b.freeze(b.org, ss.ID)
		if err != nil {
			t.Fatal(err)
		}
		want = append([]uuid.UUID{snap.ID}, want...)
	}
	if _, err := b.freeze(b.org, other.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.searches.Archive(b.ctx, b.org, ss.ID); err != nil {
		t.Fatal(err)
	}
	list := listAll(t, b, b.org, ss.ID, 2)
	var got []uuid.UUID
	for _, s := range list {
		got = append(got, s.ID)
	}
	if !slices.Equal(got, want) {
		t.Errorf("ListBySavedSearch(archived) = %v, want %v (newest first)", got, want)
	}
	if _, err := b.store.Get(b.ctx, b.org, want[0]); err != nil {
		t.Errorf("Get of an archived saved search's snapshot: %v", err)
	}

	foreign := uuid.New()
	if _, _, err := b.store.ListBySavedSearch(b.ctx, foreign, ss.ID, snapshot.ListParams{}); !errors.Is(err, snapshot.ErrNotFound) {
		t.Errorf("ListBySavedSearch(other org) = %v, want ErrNotFound", err)
	}
	if _, _, err := b.store.ListBySavedSearch(b.ctx, b.org, uuid.New(), snapshot.ListParams{}); !errors.Is(err, snapshot.ErrNotFound) {
		t.Errorf("ListBySavedSearch(absent) = %v, want ErrNotFound", err)
	}
	if _, _, err := b.store.ListBySavedSearch(b.ctx, b.org, ss.ID, snapshot.ListParams{Cursor: "nope"}); !errors.Is(err, snapshot.ErrInvalidCursor) {
		t.Errorf("ListBySavedSearch(bad cursor) = %v, want ErrInvalidCursor", err)
	}
	if _, err := b.store.Get(b.ctx, foreign, want[0]); !errors.Is(err, snapshot.ErrNotFound) {
		t.Errorf("Get(other org) = %v, want ErrNotFound", err)
	}
}

// TestFreezeNeverMixesVersions races freezes against a writer that keeps
// changing the brief and the baseline, alternately, through the store. Each
// change writes a marker naming the version it creates, so the writer knows
// exactly what every version holds; a snapshot that read the brief of one
// version and the baseline (or version number) of another disagrees with
// that record.
func TestFreezeNeverMixesVersions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ss := b.createSearch(t, "v1", "v1")

	type state struct{ query, item string }
	history := map[int64]state{1: {"v1", "v1"}} // written by the writer alone, read after it ends
	const changes = 300
	var (
		done    atomic.Bool
		wg      sync.WaitGroup
		freezes atomic.Int64
	)
	wg.Go(func() {
		defer done.Store(true)
		cur := history[1]
		for v := int64(2); v <= changes+1; v++ {
			marker := fmt.Sprintf("v%d", v)
			var got *savedsearch.SavedSearch
			var err error
			if v%2 == 0 {
				cur.query = marker
				got, err = b.searches.Update(b.ctx, b.org, ss.ID, savedsearch.UpdateParams{Brief: &savedsearch.Brief{Query: marker}})
			} else {
				cur.item = marker
				got, err = b.searches.ReplaceBaseline(b.ctx, b.org, ss.ID, savedsearch.Baseline{Items: []string{marker}})
			}
			if err != nil {
				t.Errorf("change to %s: %v", marker, err)
				return
			}
			if got.Version != v {
				t.Errorf("change to %s made version %d, want %d", marker, got.Version, v)
				return
			}
			history[v] = cur
		}
	})
	for range 4 {
		wg.Go(func() {
			for !done.Load() {
				if _, err := b.freeze(b.org, ss.ID); err != nil {
					t.Errorf("Freeze: %v", err)
					return
				}
				freezes.Add(1)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	list := listAll(t, b, b.org, ss.ID, snapshot.MaxListLimit)
	if int64(len(list)) != freezes.Load() || len(list) < 10 {
		t.Fatalf("%d snapshots stored, %d freezes made; want equal and at least 10", len(list), freezes.Load())
	}
	versions := map[int64]bool{}
	for _, item := range list {
		snap, err := b.store.Get(b.ctx, b.org, item.ID)
		if err != nil {
			t.Fatal(err)
		}
		if snap.SavedSearchVersion != item.SavedSearchVersion || snap.ContentHash != item.ContentHash {
			t.Errorf("list item %+v disagrees with the snapshot %+v", item, snap)
		}
		want, ok := history[snap.SavedSearchVersion]
		got := state{snap.Brief.Query, ""}
		if len(snap.Baseline.Items) == 1 {
			got.item = snap.Baseline.Items[0]
		}
		if !ok || got != want {
			t.Errorf("snapshot of version %d holds %+v, but that version held %+v", snap.SavedSearchVersion, got, want)
		}
		versions[snap.SavedSearchVersion] = true
	}
	t.Logf("%d snapshots over %d distinct versions", len(list), len(versions))
}

// listAll pages through the snapshot list of a saved search, limit at a
// time, and returns every item, failing on a page over limit or a list that
// never ends.
func listAll(t *testing.T, b bundle, org, id uuid.UUID, limit int) []snapshot.ListItem {
	t.Helper()
	var all []snapshot.ListItem
	cursor := ""
	for pages := 0; ; pages++ {
		page, next, err := b.store.ListBySavedSearch(b.ctx, org, id, snapshot.ListParams{Limit: limit, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > limit || pages > 10000 {
			t.Fatalf("page %d holds %d items, limit %d", pages, len(page), limit)
		}
		all = append(all, page...)
		if next == "" {
			return all
		}
		cursor = next
	}
}

// TestListItemsSummarizeTheSnapshot checks that a list item names the
// snapshot and its sizes: the item count and sizes of the brief and the
// baseline it leaves out, consistent with the full snapshot.
func TestListItemsSummarizeTheSnapshot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ss := b.createSearch(t, "sizes", "a", "bb", "ccc")
	snap, err := b.freeze(b.org, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	page, _, err := b.store.ListBySavedSearch(b.ctx, b.org, ss.ID, snapshot.ListParams{})
	if err != nil || len(page) != 1 {
		t.Fatalf("ListBySavedSearch = %v, %v; want one item", page, err)
	}
	it := page[0]
	brief, _ := json.Marshal(snap.Brief)
	baseline, _ := json.Marshal(snap.Baseline)
	switch {
	case it.ID != snap.ID || it.ContentHash != snap.ContentHash || it.SavedSearchVersion != snap.SavedSearchVersion ||
		!it.CreatedAt.Equal(snap.CreatedAt):
		t.Errorf("item %+v does not name snapshot %+v", it, snap)
	case it.BaselineItems != 3:
		t.Errorf("BaselineItems = %d, want 3", it.BaselineItems)
	case it.BriefBytes < int64(len(brief)) || it.BriefBytes > 2*int64(len(brief)):
		t.Errorf("BriefBytes = %d for a brief of %d bytes of JSON", it.BriefBytes, len(brief))
	case it.BaselineBytes < int64(len(baseline)) || it.BaselineBytes > 2*int64(len(baseline)):
		t.Errorf("BaselineBytes = %d for a baseline of %d bytes of JSON", it.BaselineBytes, len(baseline))
	}
}
