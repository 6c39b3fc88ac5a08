package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/dbclock/dbclocktest"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/snapshot"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type bundle struct {
	ctx   context.Context
	db    *pgxpool.Pool
	clock *dbclocktest.Stub
	store *runs.Store
	org   uuid.UUID
}

func setup(t *testing.T) bundle {
	t.Helper()
	db := pgtest.NewDB(t)
	c := dbclocktest.New(time.Now().UTC().Truncate(time.Microsecond))
	return bundle{ctx: context.Background(), db: db, clock: c, store: runs.NewStore(db, runs.Config{Clock: c.Clock()}), org: uuid.New()}
}

func direct(org uuid.UUID, key, hash string) runs.AdmitParams {
	name := "enrich.company"
	return runs.AdmitParams{
		OrganizationID: org,
		Kind:           runs.KindCapability,
		StartKey:       runs.DirectStartKey(key),
		RequestHash:    hash,
		Name:           &name,
		Input:          json.RawMessage(`{"domain":"example.com"}`),
		Actor:          "user-1",
	}
}

// admit admits p and returns its Run, failing the test on an error.
func (b bundle) admit(t *testing.T, p runs.AdmitParams) *runs.Run {
	t.Helper()
	run, _, err := b.store.Admit(b.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// savedSearchRun makes a saved search and a snapshot of it and returns the
// params of a Run on them.
func (b bundle) savedSearchRun(t *testing.T, key string) runs.AdmitParams {
	t.Helper()
	ss, err := savedsearch.NewStore(b.db).Create(b.ctx, b.org, savedsearch.CreateParams{
		Name: "jobs", Brief: savedsearch.Brief{Query: "q"},
	})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot.Freeze(b.ctx, b.db, b.org, ss.ID, "", uuid.Nil)
	if err != nil {
		t.Fatal(err)
	}
	return runs.AdmitParams{
		OrganizationID: b.org,
		Kind:           runs.KindSavedSearch,
		StartKey:       runs.SavedSearchStartKey(key),
		RequestHash:    "h-" + key,
		SavedSearchID:  &ss.ID,
		SnapshotID:     &snap.ID,
		Name:           &ss.Name,
		Options:        json.RawMessage(`{"max_results":100,"note":""}`),
	}
}

func TestAdmitInsertsOnceThenReplays(t *testing.T) {
	t.Parallel()
	b := setup(t)
	run, created, err := b.store.Admit(b.ctx, direct(b.org, "k1", "h1"))
	if err != nil || !created {
		t.Fatalf("first Admit = %v, %v; want created", created, err)
	}
	if run.Status != runs.StatusQueued || run.Kind != runs.KindCapability || *run.Name != "enrich.company" ||
		run.SavedSearchID != nil || run.SnapshotID != nil || *run.CreatedBy != "user-1" {
		t.Errorf("Admit = %+v", run)
	}
	if !run.CreatedAt.Equal(b.clock.Now()) || !run.RetainUntil.Equal(run.CreatedAt.Add(runs.Retention)) {
		t.Errorf("created_at %v retain_until %v; want %v and 396 days later", run.CreatedAt, run.RetainUntil, b.clock.Now())
	}

	b.clock.Advance(400 * time.Hour)
	again, created, err := b.store.Admit(b.ctx, direct(b.org, "k1", "h1"))
	if err != nil || created || again.ID != run.ID || !again.CreatedAt.Equal(run.CreatedAt) {
		t.Errorf("repeat Admit = %+v, %v, %v; want Run %s replayed", again, created, err, run.ID)
	}
	if _, _, err := b.store.Admit(b.ctx, direct(b.org, "k1", "h2")); !errors.Is(err, runs.ErrKeyReused) {
		t.Errorf("Admit(same key, other hash) = %v, want ErrKeyReused", err)
	}
	// The key is the organization's: another one admits its own Run.
	mine, created, err := b.store.Admit(b.ctx, direct(uuid.New(), "k1", "h2"))
	if err != nil || !created || mine.ID == run.ID {
		t.Errorf("Admit(other org, same key) = %v, %v; want a new Run", created, err)
	}
}

func TestRunJSONHasTheContractShape(t *testing.T) {
	t.Parallel()
	b := setup(t)
	run := b.admit(t, direct(b.org, "k", "h"))
	body, _ := json.Marshal(run)
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range doc {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"cancel_requested_at", "created_at", "created_by", "error", "id", "idempotency_key", "input", "kind", "name", "options",
		"organization_id", "result_ref", "retain_until", "saved_search_id", "snapshot_id", "status", "updated_at", "version"}
	if !slices.Equal(keys, want) {
		t.Errorf("Run JSON keys = %v, want %v", keys, want)
	}
	if string(doc["idempotency_key"]) != `"k"` {
		t.Errorf("Run idempotency_key = %s, want the client's key \"k\" without the start-key namespace", doc["idempotency_key"])
	}
	for _, k := range []string{"saved_search_id", "snapshot_id", "options"} {
		if string(doc[k]) != "null" {
			t.Errorf("direct Run %s = %s, want null", k, doc[k])
		}
	}
	if string(doc["input"]) != `{"domain":"example.com"}` {
		t.Errorf("input = %s, want {\"domain\":\"example.com\"}", doc["input"])
	}
	// A new Run: version 1, updated when created, no result and no error.
	if string(doc["version"]) != "1" || string(doc["updated_at"]) != string(doc["created_at"]) ||
		string(doc["result_ref"]) != "null" || string(doc["error"]) != "null" {
		t.Errorf("new Run version %s, updated_at %s (created_at %s), result_ref %s, error %s; want 1, created_at, null, null",
			doc["version"], doc["updated_at"], doc["created_at"], doc["result_ref"], doc["error"])
	}
}

func TestConcurrentAdmitsInsertOneRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const callers = 20
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		ids     = map[uuid.UUID]int{}
		created int
	)
	for range callers {
		wg.Go(func() {
			run, c, err := b.store.Admit(b.ctx, direct(b.org, "same", "h"))
			if err != nil {
				t.Errorf("Admit: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			ids[run.ID]++
			if c {
				created++
			}
		})
	}
	wg.Wait()
	var rows int
	if err := b.db.QueryRow(b.ctx, `SELECT count(*) FROM agent.runs`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || created != 1 || rows != 1 {
		t.Errorf("%d callers: %d distinct Runs, %d created, %d rows; want 1, 1, 1", callers, len(ids), created, rows)
	}
}

func TestStartKeyNamespacesAndShapesAreEnforced(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if runs.SavedSearchStartKey("k") == runs.DirectStartKey("k") {
		t.Fatal("saved-search and direct start keys of one key are equal")
	}
	ok := b.savedSearchRun(t, "k")
	if _, _, err := b.store.Admit(b.ctx, ok); err != nil {
		t.Fatalf("saved-search Admit: %v", err)
	}
	// The direct Run of the same key lives in its own namespace.
	if _, created, err := b.store.Admit(b.ctx, direct(b.org, "k", "h")); err != nil || !created {
		t.Errorf("direct Admit with the saved-search Run's key = %v, %v; want created", created, err)
	}

	otherOrg := ok
	otherOrg.OrganizationID = uuid.New()
	otherOrg.StartKey = runs.SavedSearchStartKey("k2")
	noSnapshot := ok
	noSnapshot.StartKey, noSnapshot.SnapshotID = runs.SavedSearchStartKey("k3"), nil
	wrongSpace := direct(b.org, "k4", "h")
	wrongSpace.StartKey = runs.SavedSearchStartKey("k4")
	badKind := direct(b.org, "k5", "h")
	badKind.Kind = "tool"
	noHash := direct(b.org, "k6", "")
	tests := []struct {
		name string
		p    runs.AdmitParams
	}{
		{"snapshot of another organization", otherOrg},
		{"saved-search Run without snapshot", noSnapshot},
		{"direct Run in the saved-search namespace", wrongSpace},
		{"unknown kind", badKind},
		{"no request hash", noHash},
	}
	for _, tt := range tests {
		if _, _, err := b.store.Admit(b.ctx, tt.p); !errors.Is(err, runs.ErrInvalid) {
			t.Errorf("Admit(%s) = %v, want ErrInvalid", tt.name, err)
		}
	}
}

func TestReadsAreScopedToTheOrganization(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.savedSearchRun(t, "k")
	run := b.admit(t, p)
	if got, err := b.store.Get(b.ctx, b.org, run.ID); err != nil || got.ID != run.ID {
		t.Errorf("Get = %v, %v", got, err)
	}
	if got, err := b.store.GetByStartKey(b.ctx, b.org, p.StartKey); err != nil || got.ID != run.ID {
		t.Errorf("GetByStartKey = %v, %v", got, err)
	}
	other := uuid.New()
	if _, err := b.store.Get(b.ctx, other, run.ID); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("Get(other org) = %v, want ErrNotFound", err)
	}
	if _, err := b.store.GetByStartKey(b.ctx, other, p.StartKey); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("GetByStartKey(other org) = %v, want ErrNotFound", err)
	}
	if _, _, err := b.store.LookupStart(b.ctx, other, p.StartKey); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("LookupStart(other org) = %v, want ErrNotFound", err)
	}
	if list, _, err := b.store.List(b.ctx, other, runs.ListParams{}); err != nil || len(list) != 0 {
		t.Errorf("List(other org) = %d Runs, %v; want none", len(list), err)
	}
}

func TestLookupStartJoinsTheSnapshotSummary(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.savedSearchRun(t, "k")
	run := b.admit(t, p)
	snap, err := snapshot.NewStore(b.db).Get(b.ctx, b.org, *p.SnapshotID)
	if err != nil {
		t.Fatal(err)
	}
	got, sum, err := b.store.LookupStart(b.ctx, b.org, p.StartKey)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != run.ID || sum == nil || *sum != snap.Summary() {
		t.Errorf("LookupStart = %+v, %+v; want Run %s with summary %+v", got, sum, run.ID, snap.Summary())
	}
	var opts map[string]any
	if err := json.Unmarshal(got.Options, &opts); err != nil || opts["max_results"] != 100.0 || opts["note"] != "" {
		t.Errorf("options = %s, %v; want max_results 100 and an empty note", got.Options, err)
	}

	d := b.admit(t, direct(b.org, "k", "h"))
	got, sum, err = b.store.LookupStart(b.ctx, b.org, runs.DirectStartKey("k"))
	if err != nil || got.ID != d.ID || sum != nil {
		t.Errorf("LookupStart(direct) = %v, %+v, %v; want Run %s and no snapshot", got, sum, err, d.ID)
	}
	if _, _, err := b.store.LookupStart(b.ctx, b.org, runs.DirectStartKey("absent")); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("LookupStart(absent) = %v, want ErrNotFound", err)
	}
}

// TestStartKeyReplaysUntilItsRetentionPassesAndNotAfter checks both sides
// of the Run retention with a stubbed database clock: the start key replays
// at its last retained microsecond, and at retain_until it answers nothing,
// although the sweeper has not deleted the Run. A start with the key is then
// admitted afresh rather than handed the Run nothing replays any more.
func TestStartKeyReplaysUntilItsRetentionPassesAndNotAfter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.savedSearchRun(t, "k")
	run := b.admit(t, p)
	d := direct(b.org, "d", "h")
	drun := b.admit(t, d)

	b.clock.Advance(runs.Retention - time.Microsecond)
	if got, sum, err := b.store.LookupStart(b.ctx, b.org, p.StartKey); err != nil || got.ID != run.ID || sum == nil {
		t.Fatalf("LookupStart a microsecond before retain_until = %v, %v, %v; want Run %s", got, sum, err, run.ID)
	}
	if got, err := b.store.GetByStartKey(b.ctx, b.org, d.StartKey); err != nil || got.ID != drun.ID {
		t.Fatalf("GetByStartKey a microsecond before retain_until = %v, %v; want Run %s", got, err, drun.ID)
	}
	if again, created, err := b.store.Admit(b.ctx, d); err != nil || created || again.ID != drun.ID {
		t.Fatalf("Admit a microsecond before retain_until = %v, %v, %v; want Run %s replayed", again, created, err, drun.ID)
	}

	b.clock.Advance(time.Microsecond)
	if got, _, err := b.store.LookupStart(b.ctx, b.org, p.StartKey); !errors.Is(err, runs.ErrNotFound) {
		t.Fatalf("LookupStart at retain_until = %v, %v; want ErrNotFound", got, err)
	}
	if got, err := b.store.GetByStartKey(b.ctx, b.org, d.StartKey); !errors.Is(err, runs.ErrNotFound) {
		t.Fatalf("GetByStartKey at retain_until = %v, %v; want ErrNotFound", got, err)
	}
	var stored int
	if err := b.db.QueryRow(b.ctx, `SELECT count(*) FROM agent.runs WHERE organization_id = $1`, b.org).Scan(&stored); err != nil || stored != 2 {
		t.Fatalf("%d Runs stored (%v), want both still there: the sweeper has not run", stored, err)
	}

	// A new start with the key is a new Run, even for another request.
	d.RequestHash = "h-other"
	fresh, created, err := b.store.Admit(b.ctx, d)
	if err != nil || !created || fresh.ID == drun.ID || !fresh.CreatedAt.Equal(b.clock.Now()) {
		t.Fatalf("Admit after retain_until = %v, %v, %v; want a new Run created now", fresh, created, err)
	}
	if got, err := b.store.Get(b.ctx, b.org, drun.ID); !errors.Is(err, runs.ErrNotFound) {
		t.Fatalf("the expired Run = %v, %v; want it gone", got, err)
	}
	// The saved-search Run past retention is still stored, untouched by the
	// direct start's admission.
	if got, err := b.store.Get(b.ctx, b.org, run.ID); err != nil || got.ID != run.ID {
		t.Fatalf("Get(expired saved-search Run) = %v, %v; want it stored until the sweeper runs", got, err)
	}
}

func TestListPagesNewestFirstAndFiltersBySavedSearch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var all, ofSearch []uuid.UUID
	var searchID uuid.UUID
	for i, key := range []string{"a", "b", "c", "d", "e"} {
		b.clock.Advance(time.Second)
		var p runs.AdmitParams
		if i%2 == 0 {
			p = b.savedSearchRun(t, key)
		} else {
			p = direct(b.org, key, "h")
		}
		run := b.admit(t, p)
		all = append([]uuid.UUID{run.ID}, all...)
		if i == 2 {
			searchID = *p.SavedSearchID
			ofSearch = []uuid.UUID{run.ID}
			// A second Run of the same saved search.
			b.clock.Advance(time.Second)
			p2 := p
			p2.StartKey, p2.RequestHash = runs.SavedSearchStartKey("c2"), "h-c2"
			run2 := b.admit(t, p2)
			all = append([]uuid.UUID{run2.ID}, all...)
			ofSearch = append([]uuid.UUID{run2.ID}, ofSearch...)
		}
	}

	collect := func(p runs.ListParams) []uuid.UUID {
		t.Helper()
		var got []uuid.UUID
		for range 10 {
			page, next, err := b.store.List(b.ctx, b.org, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page {
				got = append(got, r.ID)
			}
			if next == "" {
				return got
			}
			p.Cursor = next
		}
		t.Fatal("List never returned an empty next cursor")
		return nil
	}
	if got := collect(runs.ListParams{Limit: 2}); !slices.Equal(got, all) {
		t.Errorf("List in pages of 2 = %v, want %v", got, all)
	}
	if got := collect(runs.ListParams{Limit: 1, SavedSearchID: &searchID}); !slices.Equal(got, ofSearch) {
		t.Errorf("List(saved search) = %v, want %v", got, ofSearch)
	}
	if _, _, err := b.store.List(b.ctx, b.org, runs.ListParams{Cursor: "zzz"}); !errors.Is(err, runs.ErrInvalidCursor) {
		t.Errorf("List(bad cursor) = %v, want ErrInvalidCursor", err)
	}
}

// TestGetAuditReadsTheInputAndItsSize checks that the audit read returns a
// small input whole with its stored size, and 0 for a Run without input.
func TestGetAuditReadsTheInputAndItsSize(t *testing.T) {
	b := setup(t)
	run := b.admit(t, direct(b.org, "with-input", "h1"))
	got, size, err := b.store.GetAudit(b.ctx, b.org, run.ID)
	// jsonb text of {"domain":"example.com"} adds a space after the colon.
	if want := int64(len(`{"domain": "example.com"}`)); err != nil || size != want || string(got.Input) != string(run.Input) {
		t.Errorf("GetAudit(with input) = %s, %d, %v; want %s, %d", got.Input, size, err, run.Input, want)
	}
	p := direct(b.org, "without-input", "h2")
	p.Input = nil
	bare := b.admit(t, p)
	if got, size, err := b.store.GetAudit(b.ctx, b.org, bare.ID); err != nil || size != 0 || got.Input != nil {
		t.Errorf("GetAudit(no input) = %s, %d, %v; want no input, 0", got.Input, size, err)
	}
}
