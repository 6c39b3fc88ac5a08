package schedule

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/idempotency"
)

// TestSetIsASetAndHonoursIfMatch: a set creates the schedule, the same set
// again changes nothing (same version), another set replaces it and bumps
// the version; a precondition on another version, or on a schedule that
// does not exist, changes nothing.
func TestSetIsASetAndHonoursIfMatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.search(t)
	b.clock.Set(t0.Add(-time.Hour))
	p := hourly()
	p.Actor = "alice"
	p.IfMatch = func(int64) bool { return true }
	if _, _, err := b.store.Set(b.ctx, b.org, id, p); !errors.Is(err, ErrVersionMismatch) {
		t.Fatalf("Set with If-Match and no schedule = %v, want a version mismatch", err)
	}
	p.IfMatch = nil
	sc, created, err := b.store.Set(b.ctx, b.org, id, p)
	if err != nil || !created || sc.Version != 1 || *sc.UpdatedBy != "alice" || !sc.NextDueAt.Equal(t0) {
		t.Fatalf("Set = %+v created %v, %v; want version 1 by alice, next due %s", sc, created, err, t0)
	}
	again, created, err := b.store.Set(b.ctx, b.org, id, p)
	if err != nil || created || again.Version != 1 || !again.UpdatedAt.Equal(sc.UpdatedAt) {
		t.Errorf("the same Set again = version %d created %v, %v; want nothing changed", again.Version, created, err)
	}
	// Without start_at a replace keeps the stored one, so it is the same
	// set too.
	p.StartAt = nil
	if again, _, err = b.store.Set(b.ctx, b.org, id, p); err != nil || again.Version != 1 {
		t.Errorf("the set without start_at = version %d, %v; want nothing changed", again.Version, err)
	}

	cron, zone := "0 9 * * *", "Europe/Paris"
	p = SetParams{Cron: &cron, TimeZone: &zone, Actor: "bob", IfMatch: func(v int64) bool { return v == 2 }}
	var mismatch *VersionMismatchError
	if _, _, err := b.store.Set(b.ctx, b.org, id, p); !errors.As(err, &mismatch) || mismatch.Current != 1 {
		t.Fatalf("Set If-Match 2 on version 1 = %v, want a mismatch naming 1", err)
	}
	p.IfMatch = func(v int64) bool { return v == 1 }
	sc, _, err = b.store.Set(b.ctx, b.org, id, p)
	if err != nil || sc.Version != 2 || sc.Cron == nil || sc.IntervalSeconds != nil || *sc.UpdatedBy != "bob" {
		t.Fatalf("replace = %+v, %v; want version 2, a cron schedule by bob", sc, err)
	}
	// start_at is kept, t0 (09:00 UTC on 7 January), which is after that
	// day's 09:00 in Paris (08:00 UTC): the first is the next day's.
	if want := utc("2030-01-08T08:00:00Z"); !sc.NextDueAt.Equal(want) {
		t.Errorf("next_due_at = %s, want %s", sc.NextDueAt, want)
	}
	got, err := b.store.Get(b.ctx, b.org, id)
	if err != nil || got.Version != 2 || *got.Cron != cron {
		t.Errorf("Get = %+v, %v", got, err)
	}
}

// TestSetRefusesBadInputBeforeSQLAndACronThatNeverComesDue.
func TestSetRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.search(t)
	never := "0 9 30 2 *"
	_, _, err := b.store.Set(b.ctx, b.org, id, SetParams{Cron: &never})
	if !errs.Is(err, errs.Invalid) || !namesField(err, "cron") {
		t.Errorf("Set of 30 February = %v, want invalid naming cron", err)
	}
	if _, _, err := b.store.Set(b.ctx, b.org, uuid.New(), hourly()); !errors.Is(err, ErrSavedSearchNotFound) {
		t.Errorf("Set on an unknown saved search = %v, want ErrSavedSearchNotFound", err)
	}
	other := setup(t)
	if _, _, err := other.store.Set(other.ctx, uuid.New(), id, hourly()); !errors.Is(err, ErrSavedSearchNotFound) {
		t.Errorf("Set on another organization's saved search = %v, want ErrSavedSearchNotFound", err)
	}
	if _, err := b.store.Get(b.ctx, b.org, id); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get with no schedule = %v, want ErrNotFound", err)
	}
	if n := b.count(t, `SELECT count(*) FROM agent.saved_search_schedules`); n != 0 {
		t.Errorf("%d schedules written by refused sets", n)
	}
}

// TestFirstOccurrenceIsAfterTheLatest: re-setting a schedule within the
// second an occurrence came due (the natural key is taken) starts the new
// cadence after it, so the next occurrence is written, not lost to the
// key.
func TestFirstOccurrenceIsAfterTheLatest(t *testing.T) {
	t.Parallel()
	b, id := setupHourly(t)
	b.clock.Set(t0)
	b.tick(t, b.drain(t, drainOpts{}))
	iv := int64(60)
	sc := b.schedule(t, id, SetParams{IntervalSeconds: &iv}) // start_at kept: t0
	if !sc.NextDueAt.After(t0) {
		t.Errorf("next_due_at = %s, want after the occurrence at %s", sc.NextDueAt, t0)
	}
}

// TestPauseResumeRemoveAreConditional: each honours If-Match, pause and
// resume are sets (a repeat changes nothing), and remove deletes the
// schedule but keeps its occurrences.
func TestPauseResumeRemoveAreConditional(t *testing.T) {
	t.Parallel()
	b, id := setupHourly(t)
	b.clock.Set(t0)
	b.tick(t, b.drain(t, drainOpts{}))
	wrong := func(v int64) bool { return v == 99 }
	if _, err := b.store.Pause(b.ctx, b.org, id, wrong); !errors.Is(err, ErrVersionMismatch) {
		t.Errorf("Pause If-Match 99 = %v, want a mismatch", err)
	}
	sc, err := b.store.Pause(b.ctx, b.org, id, func(v int64) bool { return v == 1 })
	if err != nil || !sc.Paused || sc.Version != 2 {
		t.Fatalf("Pause = %+v, %v", sc, err)
	}
	if sc, err = b.store.Pause(b.ctx, b.org, id, nil); err != nil || sc.Version != 2 {
		t.Errorf("Pause again = version %d, %v; want nothing changed", sc.Version, err)
	}
	if sc, err = b.store.Resume(b.ctx, b.org, id, nil); err != nil || sc.Paused || sc.Version != 3 {
		t.Errorf("Resume = %+v, %v", sc, err)
	}
	if sc, err = b.store.Resume(b.ctx, b.org, id, nil); err != nil || sc.Version != 3 {
		t.Errorf("Resume again = version %d, %v; want nothing changed", sc.Version, err)
	}
	if err := b.store.Remove(b.ctx, b.org, id, wrong); !errors.Is(err, ErrVersionMismatch) {
		t.Errorf("Remove If-Match 99 = %v, want a mismatch", err)
	}
	if err := b.store.Remove(b.ctx, b.org, id, func(v int64) bool { return v == 3 }); err != nil {
		t.Fatal(err)
	}
	if err := b.store.Remove(b.ctx, b.org, id, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("Remove again = %v, want ErrNotFound", err)
	}
	if _, err := b.store.Pause(b.ctx, b.org, id, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("Pause with no schedule = %v, want ErrNotFound", err)
	}
	if got := b.dues(t, id); len(got) != 1 {
		t.Errorf("occurrences after the remove: %v, want the one kept", got)
	}
}

// TestSetOnceIsIdempotentByKey: a keyed set runs once per key; a repeat
// answers the schedule as it is now, replayed; the key with another body
// is refused.
func TestSetOnceIsIdempotentByKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.search(t)
	p := hourly()
	sc, created, replayed, err := b.store.SetOnce(b.ctx, b.plane, b.org, id, "k-1", p)
	if err != nil || !created || replayed || sc.Version != 1 {
		t.Fatalf("SetOnce = %+v created %v replayed %v, %v", sc, created, replayed, err)
	}
	if _, err := b.store.Pause(b.ctx, b.org, id, nil); err != nil {
		t.Fatal(err)
	}
	again, created, replayed, err := b.store.SetOnce(b.ctx, b.plane, b.org, id, "k-1", p)
	if err != nil || created || !replayed || again.Version != 2 || !again.Paused {
		t.Errorf("SetOnce repeated = %+v created %v replayed %v, %v; want the schedule as it is now, replayed",
			again, created, replayed, err)
	}
	iv := int64(120)
	if _, _, _, err := b.store.SetOnce(b.ctx, b.plane, b.org, id, "k-1", SetParams{IntervalSeconds: &iv}); !errors.Is(err, idempotency.ErrKeyReused) {
		t.Errorf("SetOnce with the key and another body = %v, want key reused", err)
	}
}

// TestOccurrencesPaginateLatestFirst.
func TestOccurrencesPaginateLatestFirst(t *testing.T) {
	t.Parallel()
	b, id := setupHourly(t)
	d := b.drain(t, drainOpts{batch: 100})
	b.clock.Set(t0.Add(4 * time.Hour))
	b.tick(t, d)
	var seen []time.Time
	cursor := ""
	for range 10 {
		page, next, err := b.store.Occurrences(b.ctx, b.org, id, ListParams{Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page {
			seen = append(seen, o.DueAt)
			if o.Status != StatusStarted || o.RunID == nil || o.ClosedAt == nil || o.NextAttemptAt != nil {
				t.Errorf("occurrence %+v, want started, closed", o)
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if len(seen) != 5 {
		t.Fatalf("pages held %v, want the 5 occurrences", seen)
	}
	for i := range seen {
		if want := t0.Add(time.Duration(4-i) * time.Hour); !seen[i].Equal(want) {
			t.Errorf("item %d due %s, want %s", i, seen[i], want)
		}
	}
	if _, _, err := b.store.Occurrences(b.ctx, b.org, id, ListParams{Cursor: "nope"}); !errors.Is(err, ErrInvalidCursor) {
		t.Errorf("a foreign cursor = %v, want ErrInvalidCursor", err)
	}
	if _, _, err := b.store.Occurrences(b.ctx, uuid.New(), id, ListParams{}); !errors.Is(err, ErrSavedSearchNotFound) {
		t.Errorf("another organization's list = %v, want ErrSavedSearchNotFound", err)
	}
}

// TestNewIntervalScheduleComesDueAtOnce: without a start time, a new
// interval schedule comes due first at the time it is set (rounded up to
// the second), not an interval later.
func TestNewIntervalScheduleComesDueAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.search(t)
	b.clock.Set(t0.Add(123 * time.Millisecond))
	iv := int64(3600)
	sc := b.schedule(t, id, SetParams{IntervalSeconds: &iv})
	if want := t0.Add(time.Second); !sc.StartAt.Equal(want) || !sc.NextDueAt.Equal(want) {
		t.Errorf("start %s, next due %s; want both %s", sc.StartAt, sc.NextDueAt, want)
	}
}

// TestSchedulesPerOrganizationAreBounded: an organization has at most the
// store's limit of schedules; a set beyond it is ErrTooMany and writes
// nothing, a change of one it has is not refused, and another
// organization has its own. Creates racing for the last places take no
// more than there are (issue 36: one organization's 600 schedules).
func TestSchedulesPerOrganizationAreBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := b.store.Limit(3)
	every := "0 * * * *"
	ids := make([]uuid.UUID, 4)
	for i := range ids {
		ids[i] = b.search(t)
	}
	for _, id := range ids[:3] {
		if _, _, err := store.Set(b.ctx, b.org, id, SetParams{Cron: &every, Actor: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := store.Set(b.ctx, b.org, ids[3], SetParams{Cron: &every, Actor: "alice"}); !errors.Is(err, ErrTooMany) {
		t.Errorf("a fourth schedule = %v, want ErrTooMany", err)
	}
	hourly := "30 * * * *"
	if _, _, err := store.Set(b.ctx, b.org, ids[0], SetParams{Cron: &hourly, Actor: "alice"}); err != nil {
		t.Errorf("changing a schedule at the limit = %v, want it changed", err)
	}
	if n := b.count(t, `SELECT count(*) FROM agent.saved_search_schedules`); n != 3 {
		t.Errorf("%d schedules, want 3", n)
	}

	// Eight creates of another organization race for five places.
	other := *b
	other.org = uuid.New()
	racers := make([]uuid.UUID, 8)
	for i := range racers {
		racers[i] = other.search(t)
	}
	store = b.store.Limit(5)
	var wg sync.WaitGroup
	var made, refused atomic.Int32
	for _, id := range racers {
		wg.Go(func() {
			_, _, err := store.Set(b.ctx, other.org, id, SetParams{Cron: &every, Actor: "bob"})
			switch {
			case err == nil:
				made.Add(1)
			case errors.Is(err, ErrTooMany):
				refused.Add(1)
			default:
				t.Errorf("racing create: %v", err)
			}
		})
	}
	wg.Wait()
	if made.Load() != 5 || refused.Load() != 3 {
		t.Errorf("racing creates: %d made, %d refused; want 5 and 3", made.Load(), refused.Load())
	}
}

// TestListPagesAnOrganizationsSchedulesNewestFirst: the overview lists
// each schedule once, the newest set first, with its saved search's name
// and its latest occurrence (none before the first); another
// organization's list is empty and a cursor not of this list is refused.
func TestListPagesAnOrganizationsSchedulesNewestFirst(t *testing.T) {
	t.Parallel()
	b, first := setupHourly(t)
	var ids []uuid.UUID // newest first
	for i := range 3 {
		b.clock.Set(t0.Add(time.Duration(i+1) * time.Minute))
		id := b.search(t)
		b.schedule(t, id, hourly())
		ids = append([]uuid.UUID{id}, ids...)
	}
	ids = append(ids, first)
	b.clock.Set(t0.Add(30 * time.Minute))
	b.tick(t, b.drain(t, drainOpts{batch: 100}))
	var got []Summary
	cursor := ""
	for range 10 {
		page, next, err := b.store.List(b.ctx, b.org, ListParams{Limit: 3, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(got) != len(ids) {
		t.Fatalf("List held %d schedules, want %d", len(got), len(ids))
	}
	for i, sm := range got {
		if sm.SavedSearchID != ids[i] || sm.SavedSearchName != "rust jobs" || sm.ArchivedAt != nil {
			t.Errorf("item %d = %s %q, want %s, its name, live", i, sm.SavedSearchID, sm.SavedSearchName, ids[i])
		}
	}
	// Only the first (hourly from t0) came due by t0+30min.
	if l := got[3].Last; l == nil || !l.DueAt.Equal(t0) || l.Status != StatusStarted || l.RunID == nil {
		t.Errorf("the first schedule's latest occurrence = %+v, want started at %s", l, t0)
	}
	if got[0].Last != nil {
		t.Errorf("a schedule not yet due has latest occurrence %+v, want none", got[0].Last)
	}
	if page, _, err := b.store.List(b.ctx, uuid.New(), ListParams{}); err != nil || len(page) != 0 {
		t.Errorf("another organization's list = %d schedules, %v; want none", len(page), err)
	}
	if _, _, err := b.store.Occurrences(b.ctx, b.org, first, ListParams{Cursor: cursor}); !errors.Is(err, ErrInvalidCursor) {
		t.Errorf("the overview's cursor on a list of occurrences = %v, want ErrInvalidCursor", err)
	}
}
