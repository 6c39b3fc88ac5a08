package savedsearch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/snapshot"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type bundle struct {
	ctx   context.Context
	db    *pgxpool.Pool
	store *savedsearch.Store
	org   uuid.UUID
}

func setup(t *testing.T) bundle {
	t.Helper()
	db := pgtest.NewDB(t)
	return bundle{ctx: context.Background(), db: db, store: savedsearch.NewStore(db), org: uuid.New()}
}

// createOpts are the fields a test cares about; zero fields get defaults.
type createOpts struct {
	Org   uuid.UUID
	Name  string
	Query string
	Items []string
}

func (b bundle) create(t *testing.T, o createOpts) *savedsearch.SavedSearch {
	t.Helper()
	if o.Org == uuid.Nil {
		o.Org = b.org
	}
	if o.Name == "" {
		o.Name = "weekly rust jobs"
	}
	if o.Query == "" {
		o.Query = "rust engineer"
	}
	ss, err := b.store.Create(b.ctx, o.Org, savedsearch.CreateParams{
		Name:     o.Name,
		Brief:    savedsearch.Brief{Query: o.Query},
		Baseline: savedsearch.Baseline{Items: o.Items},
		Actor:    "user-1",
	})
	if err != nil {
		t.Fatalf("Create(%q) error %v", o.Name, err)
	}
	return ss
}

func TestCreateStartsAtVersionOneAndReadsBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cursor := "page-2"
	created, err := b.store.Create(b.ctx, b.org, savedsearch.CreateParams{
		Name:     "Jobs",
		Brief:    savedsearch.Brief{Query: "go", Filters: map[string]any{"remote": true}},
		Baseline: savedsearch.Baseline{Items: []string{"a", "b"}, Cursor: &cursor},
	})
	if err != nil {
		t.Fatal(err)
	}
	if created.Version != 1 || created.OrganizationID != b.org || created.Name != "Jobs" {
		t.Errorf("Create = %+v, want version 1 in org %s named Jobs", created, b.org)
	}
	got, err := b.store.Get(b.ctx, b.org, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(created)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("Get = %s\nwant %s", gotJSON, wantJSON)
	}
	if got.Brief.Filters["remote"] != true || *got.Baseline.Cursor != "page-2" || len(got.Baseline.Items) != 2 {
		t.Errorf("Get brief %+v baseline %+v", got.Brief, got.Baseline)
	}
}

func TestEmptyBaselineIsWrittenAsEmptyArray(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ss := b.create(t, createOpts{})
	body, err := json.Marshal(ss)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "organization_id", "name", "brief", "baseline", "version", "created_at", "updated_at"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("JSON %s lacks %q", body, k)
		}
	}
	if got := string(doc["baseline"]); got != `{"items":[],"cursor":null}` {
		t.Errorf("baseline JSON = %s, want {\"items\":[],\"cursor\":null}", got)
	}
}

func TestFilterNumbersSurviveExactly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var brief savedsearch.Brief
	if err := json.Unmarshal([]byte(`{"query":"q","filters":{"id":12345678901234567891,"r":0.1}}`), &brief); err != nil {
		t.Fatal(err)
	}
	ss, err := b.store.Create(b.ctx, b.org, savedsearch.CreateParams{Name: "n", Brief: brief})
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.store.Get(b.ctx, b.org, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(got.Brief)
	if want := `{"query":"q","filters":{"id":12345678901234567891,"r":0.1}}`; string(out) != want {
		t.Errorf("brief = %s, want %s", out, want)
	}
}

func TestEveryChangeBumpsTheVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ss := b.create(t, createOpts{})
	name := "renamed"
	steps := []struct {
		what   string
		change func() (*savedsearch.SavedSearch, error)
	}{
		{"rename", func() (*savedsearch.SavedSearch, error) {
			return b.store.Update(b.ctx, b.org, ss.ID, savedsearch.UpdateParams{Name: &name})
		}},
		{"new brief", func() (*savedsearch.SavedSearch, error) {
			return b.store.Update(b.ctx, b.org, ss.ID, savedsearch.UpdateParams{Brief: &savedsearch.Brief{Query: "zig"}})
		}},
		{"baseline replace", func() (*savedsearch.SavedSearch, error) {
			return b.store.ReplaceBaseline(b.ctx, b.org, ss.ID, savedsearch.Baseline{Items: []string{"x"}})
		}},
		{"same items, a cursor", func() (*savedsearch.SavedSearch, error) {
			cursor := "page-2"
			return b.store.ReplaceBaseline(b.ctx, b.org, ss.ID, savedsearch.Baseline{Items: []string{"x"}, Cursor: &cursor})
		}},
	}
	for i, step := range steps {
		got, err := step.change()
		if err != nil {
			t.Fatalf("%s: %v", step.what, err)
		}
		if want := int64(i + 2); got.Version != want {
			t.Errorf("%s: version = %d, want %d", step.what, got.Version, want)
		}
	}
	got, err := b.store.Get(b.ctx, b.org, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 5 || got.Name != "renamed" || got.Brief.Query != "zig" || strings.Join(got.Baseline.Items, ",") != "x" {
		t.Errorf("after the changes Get = %+v", got)
	}
	if !got.UpdatedAt.After(ss.UpdatedAt) {
		t.Errorf("updated_at %v not after %v", got.UpdatedAt, ss.UpdatedAt)
	}

	// An update that sets nothing changes nothing.
	same, err := b.store.Update(b.ctx, b.org, ss.ID, savedsearch.UpdateParams{})
	if err != nil || same.Version != 5 {
		t.Errorf("empty Update = %+v, %v; want version 5", same, err)
	}

	// Replacing with an empty baseline clears it, and reads [] back.
	cleared, err := b.store.ReplaceBaseline(b.ctx, b.org, ss.ID, savedsearch.Baseline{})
	if err != nil || cleared.Version != 6 || cleared.Baseline.Items == nil || len(cleared.Baseline.Items) != 0 {
		t.Errorf("ReplaceBaseline(empty) = %+v, %v; want version 6 and no items", cleared, err)
	}

	if err := b.store.Archive(b.ctx, b.org, ss.ID); err != nil {
		t.Fatal(err)
	}
	var version int64
	if err := b.db.QueryRow(b.ctx, `SELECT version FROM agent.saved_searches WHERE id = $1`, ss.ID).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != 7 {
		t.Errorf("version after archive = %d, want 7", version)
	}
}

// TestSettingTheValuesItHasChangesNothing: a PATCH or a baseline PUT is a
// set-to-value write, so one that sets the values already stored changes
// nothing, neither the version nor updated_at, and a start frozen after it
// snapshots the same content under the same version.
func TestSettingTheValuesItHasChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ss := b.create(t, createOpts{Items: []string{"a", "b"}})
	var brief savedsearch.Brief
	if err := json.Unmarshal([]byte(`{"query":"rust engineer","filters":{"remote":true,"salary":{"min":100000,"max":150000.0},"tags":["x","y"]}}`), &brief); err != nil {
		t.Fatal(err)
	}
	cursor := "page-3"
	if _, err := b.store.Update(b.ctx, b.org, ss.ID, savedsearch.UpdateParams{Brief: &brief}); err != nil {
		t.Fatal(err)
	}
	base, err := b.store.ReplaceBaseline(b.ctx, b.org, ss.ID, savedsearch.Baseline{Items: []string{"a", "b"}, Cursor: &cursor})
	if err != nil {
		t.Fatal(err)
	}
	if base.Version != 3 {
		t.Fatalf("after a brief and a baseline change version = %d, want 3", base.Version)
	}
	before, err := snapshot.Freeze(b.ctx, b.db, b.org, ss.ID, "", uuid.Nil)
	if err != nil {
		t.Fatal(err)
	}
	baselineUpdatedAt := func() (at string) {
		t.Helper()
		if err := b.db.QueryRow(b.ctx, `SELECT updated_at::text FROM agent.saved_search_baselines WHERE saved_search_id = $1`, ss.ID).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	baseAt := baselineUpdatedAt()

	// The same brief written in another key order and spacing is the same
	// brief.
	var reordered savedsearch.Brief
	if err := json.Unmarshal([]byte(`{ "filters": {"tags": ["x", "y"], "salary": {"max": 150000.0, "min": 100000}, "remote": true}, "query": "rust engineer" }`), &reordered); err != nil {
		t.Fatal(err)
	}
	name := ss.Name
	for _, step := range []struct {
		what string
		do   func() (*savedsearch.SavedSearch, error)
	}{
		{"PATCH the same name", func() (*savedsearch.SavedSearch, error) {
			return b.store.Update(b.ctx, b.org, ss.ID, savedsearch.UpdateParams{Name: &name})
		}},
		{"PATCH the same brief", func() (*savedsearch.SavedSearch, error) {
			return b.store.Update(b.ctx, b.org, ss.ID, savedsearch.UpdateParams{Brief: &brief})
		}},
		{"PATCH the same brief reordered, and the same name", func() (*savedsearch.SavedSearch, error) {
			return b.store.Update(b.ctx, b.org, ss.ID, savedsearch.UpdateParams{Name: &name, Brief: &reordered})
		}},
		{"PUT the same baseline", func() (*savedsearch.SavedSearch, error) {
			return b.store.ReplaceBaseline(b.ctx, b.org, ss.ID, savedsearch.Baseline{Items: []string{"a", "b"}, Cursor: &cursor})
		}},
	} {
		for range 2 {
			got, err := step.do()
			if err != nil {
				t.Fatalf("%s: %v", step.what, err)
			}
			if got.Version != base.Version || !got.UpdatedAt.Equal(base.UpdatedAt) {
				t.Fatalf("%s: version %d updated_at %v, want %d and %v unchanged", step.what, got.Version, got.UpdatedAt, base.Version, base.UpdatedAt)
			}
			if got.Name != name || got.Brief.Query != "rust engineer" || strings.Join(got.Baseline.Items, ",") != "a,b" ||
				got.Baseline.Cursor == nil || *got.Baseline.Cursor != cursor {
				t.Fatalf("%s: answered %+v, want the saved search as stored", step.what, got)
			}
		}
	}
	if at := baselineUpdatedAt(); at != baseAt {
		t.Errorf("the baseline's updated_at moved from %s to %s on a replace that changed nothing", baseAt, at)
	}
	stored, err := b.store.Get(b.ctx, b.org, ss.ID)
	if err != nil || stored.Version != base.Version || !stored.UpdatedAt.Equal(base.UpdatedAt) {
		t.Fatalf("Get = %+v, %v; want version %d unchanged", stored, err, base.Version)
	}
	after, err := snapshot.Freeze(b.ctx, b.db, b.org, ss.ID, "", uuid.Nil)
	if err != nil {
		t.Fatal(err)
	}
	if after.ContentHash != before.ContentHash || after.SavedSearchVersion != before.SavedSearchVersion {
		t.Errorf("snapshot after the no-op writes = (%s, v%d), want (%s, v%d)",
			after.ContentHash, after.SavedSearchVersion, before.ContentHash, before.SavedSearchVersion)
	}

	// Anything that does differ is a change: a number written differently
	// (kept as written), and a cursor cleared.
	var rewritten savedsearch.Brief
	if err := json.Unmarshal([]byte(`{"query":"rust engineer","filters":{"remote":true,"salary":{"min":100000,"max":150000},"tags":["x","y"]}}`), &rewritten); err != nil {
		t.Fatal(err)
	}
	if got, err := b.store.Update(b.ctx, b.org, ss.ID, savedsearch.UpdateParams{Brief: &rewritten}); err != nil || got.Version != base.Version+1 || !got.UpdatedAt.After(base.UpdatedAt) {
		t.Fatalf("PATCH 150000.0 -> 150000 = %+v, %v; want version %d", got, err, base.Version+1)
	}
	if got, err := b.store.ReplaceBaseline(b.ctx, b.org, ss.ID, savedsearch.Baseline{Items: []string{"a", "b"}}); err != nil || got.Version != base.Version+2 || got.Baseline.Cursor != nil {
		t.Fatalf("PUT without the cursor = %+v, %v; want version %d and no cursor", got, err, base.Version+2)
	}
}

func TestArchiveHidesTheSavedSearch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ss := b.create(t, createOpts{})
	kept := b.create(t, createOpts{Name: "kept"})
	if err := b.store.Archive(b.ctx, b.org, ss.ID); err != nil {
		t.Fatal(err)
	}
	assertHidden(t, b, b.org, ss.ID)
	list, _, err := b.store.List(b.ctx, b.org, savedsearch.ListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != kept.ID {
		t.Errorf("List after archive = %v, want only %s", ids(list), kept.ID)
	}
	var rows int
	if err := b.db.QueryRow(b.ctx, `SELECT count(*) FROM agent.saved_searches WHERE id = $1`, ss.ID).Scan(&rows); err != nil || rows != 1 {
		t.Errorf("archived row count = %d, %v; want the row kept", rows, err)
	}
}

func TestAnotherOrganizationSeesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ss := b.create(t, createOpts{})
	other := uuid.New()
	assertHidden(t, b, other, ss.ID)
	list, _, err := b.store.List(b.ctx, other, savedsearch.ListParams{})
	if err != nil || len(list) != 0 {
		t.Errorf("List(other org) = %v, %v; want empty", ids(list), err)
	}
	got, err := b.store.Get(b.ctx, b.org, ss.ID)
	if err != nil || got.Version != 1 {
		t.Errorf("owner's Get = %+v, %v; want it untouched at version 1", got, err)
	}
}

// assertHidden checks that every method answers not found for id in org.
func assertHidden(t *testing.T, b bundle, org, id uuid.UUID) {
	t.Helper()
	name := "x"
	if _, err := b.store.Get(b.ctx, org, id); !errors.Is(err, savedsearch.ErrNotFound) {
		t.Errorf("Get = %v, want ErrNotFound", err)
	}
	if _, err := b.store.Update(b.ctx, org, id, savedsearch.UpdateParams{Name: &name}); !errors.Is(err, savedsearch.ErrNotFound) {
		t.Errorf("Update = %v, want ErrNotFound", err)
	}
	if _, err := b.store.ReplaceBaseline(b.ctx, org, id, savedsearch.Baseline{}); !errors.Is(err, savedsearch.ErrNotFound) {
		t.Errorf("ReplaceBaseline = %v, want ErrNotFound", err)
	}
	if err := b.store.Archive(b.ctx, org, id); !errors.Is(err, savedsearch.ErrNotFound) {
		t.Errorf("Archive = %v, want ErrNotFound", err)
	}
	if ok, err := b.store.Exists(b.ctx, org, id); ok || err != nil {
		t.Errorf("Exists = %v, %v; want false, nil", ok, err)
	}
}

func TestListPagesNewestFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var want []uuid.UUID
	for range 5 {
		want = append([]uuid.UUID{b.create(t, createOpts{}).ID}, want...)
	}
	b.create(t, createOpts{Org: uuid.New()}) // another organization's

	var got []uuid.UUID
	cursor, pages := "", 0
	for {
		page, next, err := b.store.List(b.ctx, b.org, savedsearch.ListParams{Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		got = append(got, ids(page)...)
		if next == "" {
			break
		}
		if pages > 5 {
			t.Fatal("List never returned an empty next cursor")
		}
		cursor = next
	}
	if pages != 3 || len(got) != len(want) {
		t.Fatalf("List in pages of 2: %d pages, %d items; want 3 pages, 5 items", pages, len(got))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("item %d = %s, want %s (newest first)", i, got[i], want[i])
		}
	}

	all, next, err := b.store.List(b.ctx, b.org, savedsearch.ListParams{})
	if err != nil || len(all) != 5 || next != "" {
		t.Errorf("List(default limit) = %d items, next %q, %v; want 5, \"\"", len(all), next, err)
	}
	if _, _, err := b.store.List(b.ctx, b.org, savedsearch.ListParams{Cursor: "not-a-cursor"}); !errors.Is(err, savedsearch.ErrInvalidCursor) {
		t.Errorf("List(bad cursor) = %v, want ErrInvalidCursor", err)
	}
}

func TestValidationRefusesOutOfRangeInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	many := make([]string, savedsearch.MaxBaselineSize+1)
	for i := range many {
		many[i] = "i"
	}
	empty, long := "", strings.Repeat("n", 201)
	tests := []struct {
		name string
		p    savedsearch.CreateParams
	}{
		{"empty name", savedsearch.CreateParams{Brief: savedsearch.Brief{Query: "q"}}},
		{"long name", savedsearch.CreateParams{Name: long, Brief: savedsearch.Brief{Query: "q"}}},
		{"empty query", savedsearch.CreateParams{Name: "n"}},
		{"long query", savedsearch.CreateParams{Name: "n", Brief: savedsearch.Brief{Query: strings.Repeat("q", 2001)}}},
		{"empty item", savedsearch.CreateParams{Name: "n", Brief: savedsearch.Brief{Query: "q"},
			Baseline: savedsearch.Baseline{Items: []string{"a", ""}}}},
		{"long item", savedsearch.CreateParams{Name: "n", Brief: savedsearch.Brief{Query: "q"},
			Baseline: savedsearch.Baseline{Items: []string{strings.Repeat("i", 201)}}}},
		{"too many items", savedsearch.CreateParams{Name: "n", Brief: savedsearch.Brief{Query: "q"},
			Baseline: savedsearch.Baseline{Items: many}}},
	}
	for _, tt := range tests {
		if _, err := b.store.Create(b.ctx, b.org, tt.p); !errors.Is(err, savedsearch.ErrInvalid) {
			t.Errorf("Create(%s) = %v, want ErrInvalid", tt.name, err)
		}
	}

	// The limits count characters, not bytes.
	ss, err := b.store.Create(b.ctx, b.org, savedsearch.CreateParams{
		Name:     strings.Repeat("é", 200),
		Brief:    savedsearch.Brief{Query: strings.Repeat("é", 2000)},
		Baseline: savedsearch.Baseline{Items: many[:savedsearch.MaxBaselineSize]},
	})
	if err != nil {
		t.Fatalf("Create at every limit: %v", err)
	}
	for name, p := range map[string]savedsearch.UpdateParams{
		"empty name":  {Name: &empty},
		"long name":   {Name: &long},
		"empty query": {Brief: &savedsearch.Brief{}},
	} {
		if _, err := b.store.Update(b.ctx, b.org, ss.ID, p); !errors.Is(err, savedsearch.ErrInvalid) {
			t.Errorf("Update(%s) = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := b.store.ReplaceBaseline(b.ctx, b.org, ss.ID, savedsearch.Baseline{Items: many}); !errors.Is(err, savedsearch.ErrInvalid) {
		t.Errorf("ReplaceBaseline(too many) = %v, want ErrInvalid", err)
	}
}

func ids(list []savedsearch.Summary) []uuid.UUID {
	out := make([]uuid.UUID, 0, len(list))
	for _, ss := range list {
		out = append(out, ss.ID)
	}
	return out
}

// TestConcurrentUpdateFuncsSerializeOnTheRow races 16 writers, each making
// 10 read-modify-write changes with real commits: each change reads a
// counter from the brief as stored and writes it plus one. Serialized on
// the row, none is lost (the counter ends at 160, the version at 161) and
// none fails a precondition nobody set.
func TestConcurrentUpdateFuncsSerializeOnTheRow(t *testing.T) {
	t.Parallel()
	const writers, changes = 16, 10
	b := setup(t)
	ss := b.create(t, createOpts{})
	increment := func(cur *savedsearch.SavedSearch) (savedsearch.UpdateParams, error) {
		n := 0
		if v, ok := cur.Brief.Filters["n"].(json.Number); ok {
			i, err := v.Int64()
			if err != nil {
				return savedsearch.UpdateParams{}, err
			}
			n = int(i)
		}
		brief := cur.Brief
		brief.Filters = map[string]any{"n": n + 1}
		return savedsearch.UpdateParams{Brief: &brief}, nil
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range writers {
		wg.Go(func() {
			<-start
			for range changes {
				if _, err := b.store.UpdateFunc(b.ctx, b.org, ss.ID, nil, increment); err != nil {
					t.Errorf("UpdateFunc without a precondition: %v", err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	got, err := b.store.Get(b.ctx, b.org, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := fmt.Sprint(got.Brief.Filters["n"]); n != fmt.Sprint(writers*changes) || got.Version != 1+writers*changes {
		t.Errorf("after %d increments: counter %s at version %d, want %d at %d: a change was lost",
			writers*changes, n, got.Version, writers*changes, 1+writers*changes)
	}
}

// TestUpdateFuncRefusesAndWritesNothing: a precondition the stored version
// fails, an error of change and a change the store's validation refuses
// each write nothing; change's error comes back as it is, and a saved
// search that is not live is not found (change never runs).
func TestUpdateFuncRefusesAndWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ss := b.create(t, createOpts{})
	errChange := errors.New("the change refuses")
	long := strings.Repeat("n", savedsearch.MaxNameLen+1)
	rename := func(name string) func(*savedsearch.SavedSearch) (savedsearch.UpdateParams, error) {
		return func(*savedsearch.SavedSearch) (savedsearch.UpdateParams, error) {
			return savedsearch.UpdateParams{Name: &name}, nil
		}
	}
	for _, tt := range []struct {
		name    string
		ifMatch func(int64) bool
		change  func(*savedsearch.SavedSearch) (savedsearch.UpdateParams, error)
		want    func(error) bool
	}{
		{"a precondition on another version", func(v int64) bool { return v == 7 }, rename("x"),
			func(err error) bool {
				var m *savedsearch.VersionMismatchError
				return errors.As(err, &m) && m.Current == 1
			}},
		{"an error of change", nil,
			func(*savedsearch.SavedSearch) (savedsearch.UpdateParams, error) {
				return savedsearch.UpdateParams{}, errChange
			},
			func(err error) bool { return err == errChange }},
		{"a name over the limit", nil, rename(long), func(err error) bool { return errors.Is(err, savedsearch.ErrInvalid) }},
	} {
		if _, err := b.store.UpdateFunc(b.ctx, b.org, ss.ID, tt.ifMatch, tt.change); !tt.want(err) {
			t.Errorf("%s: UpdateFunc error = %v", tt.name, err)
		}
	}
	if got, err := b.store.Get(b.ctx, b.org, ss.ID); err != nil || got.Version != 1 || got.Name != ss.Name {
		t.Errorf("after the refused changes: %+v, %v; want version 1 unchanged", got, err)
	}
	ran := false
	for _, org := range []uuid.UUID{uuid.New(), b.org} {
		id := ss.ID
		if org == b.org {
			id = uuid.New()
		}
		_, err := b.store.UpdateFunc(b.ctx, org, id, nil, func(*savedsearch.SavedSearch) (savedsearch.UpdateParams, error) {
			ran = true
			return savedsearch.UpdateParams{}, nil
		})
		if !errors.Is(err, savedsearch.ErrNotFound) {
			t.Errorf("UpdateFunc(%s, %s) = %v, want ErrNotFound", org, id, err)
		}
	}
	if ran {
		t.Error("change ran for a saved search that is not there")
	}
}
