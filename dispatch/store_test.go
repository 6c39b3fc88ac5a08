package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/dbclock/dbclocktest"
	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/snapshot"
)

func TestMain(m *testing.M) { pgtest.MainNoLeaks(m) }

type bundle struct {
	ctx   context.Context
	db    *pgxpool.Pool
	clock *dbclocktest.Stub
	runs  *runs.Store
	store *dispatch.Store
	org   uuid.UUID
}

func setup(t *testing.T) *bundle {
	t.Helper()
	db := pgtest.NewDB(t)
	c := dbclocktest.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	return &bundle{ctx: context.Background(), db: db, clock: c,
		runs: runs.NewStore(db, runs.Config{Clock: c.Clock()}), store: dispatch.NewStore(db, c.Clock()), org: uuid.New()}
}

// admit admits a direct Run of org and returns it.
func (b *bundle) admit(t *testing.T, org uuid.UUID) *runs.Run {
	t.Helper()
	name := "enrich.company"
	run, created, err := b.runs.Admit(b.ctx, runs.AdmitParams{OrganizationID: org, Kind: runs.KindCapability,
		StartKey: runs.DirectStartKey(uuid.NewString()), RequestHash: "h", Name: &name,
		Input: json.RawMessage(`{"domain":"example.com"}`), Actor: "alice"})
	if err != nil || !created {
		t.Fatalf("Admit = %v, %v", created, err)
	}
	return run
}

// admitSaved admits a saved-search Run of the bundle's organization, on a
// snapshot of a saved search with a baseline, and returns it.
func (b *bundle) admitSaved(t *testing.T) *runs.Run {
	t.Helper()
	ss, err := savedsearch.NewStore(b.db).Create(b.ctx, b.org, savedsearch.CreateParams{
		Name: "jobs", Brief: savedsearch.Brief{Query: "go jobs <remote>", Filters: map[string]any{"lang": "en"}},
		Baseline: savedsearch.Baseline{Items: []string{"https://example.com/1", "https://example.com/2"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot.Freeze(b.ctx, b.db, b.org, ss.ID, "bob", uuid.Nil)
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := b.runs.Admit(b.ctx, runs.AdmitParams{OrganizationID: b.org, Kind: runs.KindSavedSearch,
		StartKey: runs.SavedSearchStartKey(uuid.NewString()), RequestHash: "h", SavedSearchID: &ss.ID,
		SnapshotID: &snap.ID, Name: &ss.Name, Options: json.RawMessage(`{"max_results":10,"note":""}`), Actor: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func (b *bundle) lease(t *testing.T, n int) []dispatch.Leased {
	t.Helper()
	l, err := b.store.LeasePass(b.ctx, n, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (b *bundle) get(t *testing.T, run *runs.Run) *dispatch.Dispatch {
	t.Helper()
	d, err := b.store.Get(b.ctx, run.OrganizationID, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestLeasePassTakesDueDispatchesOnceUntilTheLeasePasses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.admit(t, b.org)
	b.clock.Advance(time.Second)
	second := b.admit(t, b.org)
	leased := b.lease(t, 10)
	if len(leased) != 2 || leased[0].RunID != first.ID || leased[1].RunID != second.ID ||
		leased[0].Attempt != 1 || leased[0].OrganizationID != b.org {
		t.Fatalf("lease = %+v, want both Runs, the first admitted first, attempt 1", leased)
	}
	if again := b.lease(t, 10); len(again) != 0 {
		t.Errorf("a second pass within the lease took %+v, want none", again)
	}
	d := b.get(t, first)
	if d.State != dispatch.StatePending || d.Attempts != 1 || d.NextAttemptAt == nil ||
		!d.NextAttemptAt.Equal(b.clock.Now().Add(10*time.Second)) || d.LastAttemptAt == nil {
		t.Errorf("leased dispatch = %+v, want pending, 1 attempt, due when the lease passes", d)
	}
	attempts, err := b.store.Attempts(b.ctx, b.org, first.ID)
	if err != nil || len(attempts) != 1 || attempts[0].Outcome != dispatch.OutcomeInFlight || attempts[0].EndedAt != nil {
		t.Errorf("attempts = %+v, %v; want one in flight", attempts, err)
	}
	// The lease passes: the attempt never ended (its dispatcher died), so
	// the dispatch is taken again, with the next attempt's number.
	b.clock.Advance(10 * time.Second)
	retaken := b.lease(t, 1)
	if len(retaken) != 1 || retaken[0].RunID != first.ID || retaken[0].Attempt != 2 {
		t.Errorf("after the lease = %+v, want the first Run again as attempt 2", retaken)
	}
}

// TestConcurrentLeasePassesAreDisjoint: a pass never waits for another in
// progress (SKIP LOCKED): with one pass's transaction still open on five
// dispatches, a second takes the five others at once. Then 8 passes at
// once over 200 due dispatches lease each exactly once.
func TestConcurrentLeasePassesAreDisjoint(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 10 {
		b.admit(t, b.org)
	}
	tx, err := b.db.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(b.ctx) }() // a no-op once committed
	first, err := dispatch.NewStore(tx, b.clock.Clock()).LeasePass(b.ctx, 5, time.Minute)
	if err != nil || len(first) != 5 {
		t.Fatalf("first pass = %d, %v", len(first), err)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 3*time.Second)
	second, err := b.store.LeasePass(ctx, 10, time.Minute)
	cancel()
	if err != nil || len(second) != 5 {
		t.Fatalf("a pass beside an open one = %d, %v; want the 5 others at once, without waiting", len(second), err)
	}
	for _, l := range second {
		for _, f := range first {
			if l.RunID == f.RunID {
				t.Errorf("both passes leased %s", l.RunID)
			}
		}
	}
	if err := tx.Commit(b.ctx); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Hour) // every lease passes: all 10 are due again
	for range 190 {
		b.admit(t, b.org)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seen = map[uuid.UUID]int{}
	)
	for range 8 {
		wg.Go(func() {
			for {
				leased, err := b.store.LeasePass(b.ctx, 7, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if len(leased) == 0 {
					return
				}
				mu.Lock()
				for _, l := range leased {
					seen[l.RunID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	twice := 0
	for _, n := range seen {
		if n != 1 {
			twice++
		}
	}
	if len(seen) != 200 || twice != 0 {
		t.Errorf("%d dispatches leased, %d more than once; want 200, each once", len(seen), twice)
	}
}

func TestEndRecordsTheOutcomeUnderTheFence(t *testing.T) {
	t.Parallel()
	b := setup(t)
	run := b.admit(t, b.org)
	l := b.lease(t, 1)[0]
	end := func(a int, o dispatch.Outcome, code int, answer string, retry time.Duration) bool {
		t.Helper()
		held, err := b.store.End(b.ctx, dispatch.End{Leased: dispatch.Leased{OrganizationID: b.org, RunID: run.ID, Attempt: a}, Outcome: o,
			StatusCode: code, Answer: answer, RetryIn: retry})
		if err != nil {
			t.Fatal(err)
		}
		return held
	}
	// A retry: pending, due after the backoff, the answer recorded.
	b.clock.Advance(time.Second)
	if !end(l.Attempt, dispatch.OutcomeRetry, 503, "503 Service Unavailable", 4*time.Second) {
		t.Fatal("the fence of the live attempt did not hold")
	}
	d := b.get(t, run)
	if d.State != dispatch.StatePending || !d.NextAttemptAt.Equal(b.clock.Now().Add(4*time.Second)) ||
		d.LastStatusCode == nil || *d.LastStatusCode != 503 || d.LastError == nil {
		t.Errorf("after a retry: %+v, want pending, due in 4s, 503 recorded", d)
	}
	if got := b.lease(t, 1); len(got) != 0 {
		t.Errorf("leased during the backoff: %+v", got)
	}
	b.clock.Advance(4 * time.Second)
	stalled := b.lease(t, 1)[0]
	// The second attempt's dispatcher stalls past its lease; a third
	// attempt takes the dispatch over. The stalled one wakes up late: its
	// fence is gone, and only its own attempt records what it got.
	b.clock.Advance(10 * time.Second)
	l2 := b.lease(t, 1)[0]
	if end(stalled.Attempt, dispatch.OutcomeFailed, 400, "stale", 0) {
		t.Error("a stale attempt's end held, want it refused")
	}
	if d := b.get(t, run); d.State != dispatch.StatePending {
		t.Errorf("a stale end changed the dispatch to %s", d.State)
	}
	// Delivered: the dispatch and the Run are dispatched, the change
	// recorded in the Run's history.
	b.clock.Advance(time.Second)
	if !end(l2.Attempt, dispatch.OutcomeDelivered, 202, "202 Accepted", 0) {
		t.Fatal("the live attempt's fence did not hold")
	}
	d = b.get(t, run)
	if d.State != dispatch.StateDispatched || d.DispatchedAt == nil || !d.DispatchedAt.Equal(b.clock.Now()) ||
		d.NextAttemptAt != nil || d.LastError != nil || d.Attempts != 3 {
		t.Errorf("after delivery: %+v, want dispatched now, 3 attempts, no error", d)
	}
	got, err := b.runs.Get(b.ctx, b.org, run.ID)
	if err != nil || got.Status != runs.StatusDispatched || got.Version != 2 || !got.UpdatedAt.Equal(b.clock.Now()) {
		t.Errorf("Run after delivery = %+v, %v; want dispatched v2", got, err)
	}
	changes, _ := b.runs.StatusChanges(b.ctx, b.org, run.ID)
	if len(changes) != 1 || changes[0].Status != runs.StatusDispatched || changes[0].Reporter != nil {
		t.Errorf("status changes = %+v, want one dispatched by searchd (no reporter)", changes)
	}
	attempts, _ := b.store.Attempts(b.ctx, b.org, run.ID)
	if len(attempts) != 3 || attempts[0].Outcome != dispatch.OutcomeRetry || attempts[1].Outcome != dispatch.OutcomeFailed ||
		attempts[1].Answer == nil || *attempts[1].Answer != "stale" || attempts[2].Outcome != dispatch.OutcomeDelivered {
		t.Errorf("attempts = %+v; want a retry, the stale attempt's own answer, then delivered", attempts)
	}
	// Ended dispatches are never leased again, and a second delivery of
	// the same attempt changes nothing.
	if end(l2.Attempt, dispatch.OutcomeDelivered, 200, "", 0) {
		t.Error("a second end of a delivered dispatch held")
	}
	if got, _ := b.runs.Get(b.ctx, b.org, run.ID); got.Version != 2 {
		t.Errorf("Run version after a repeated delivery = %d, want 2", got.Version)
	}
}

// TestDeliveryNeverMovesAStatusTheRuntimeReportedBack: the runtime may
// report running (or finish) before the dispatcher hears its 2xx; the
// delivery then marks the dispatch alone.
func TestDeliveryNeverMovesAStatusTheRuntimeReportedBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	run := b.admit(t, b.org)
	l := b.lease(t, 1)[0]
	if _, _, err := b.runs.Report(b.ctx, b.org, run.ID, runs.StatusReport{Status: runs.StatusSucceeded, Reporter: "rt"}); err != nil {
		t.Fatal(err)
	}
	if held, err := b.store.End(b.ctx, dispatch.End{Leased: dispatch.Leased{OrganizationID: b.org, RunID: run.ID, Attempt: l.Attempt},
		Outcome: dispatch.OutcomeDelivered, StatusCode: 200}); !held || err != nil {
		t.Fatalf("End = %v, %v", held, err)
	}
	got, _ := b.runs.Get(b.ctx, b.org, run.ID)
	if got.Status != runs.StatusSucceeded || got.Version != 2 {
		t.Errorf("Run = %s v%d, want succeeded v2 (the delivery changes the dispatch alone)", got.Status, got.Version)
	}
	if d := b.get(t, run); d.State != dispatch.StateDispatched {
		t.Errorf("dispatch = %s, want dispatched", d.State)
	}
}

func TestFailedDispatchIsRetriedOnlyByAPersonWithAReason(t *testing.T) {
	t.Parallel()
	b := setup(t)
	run := b.admit(t, b.org)
	l := b.lease(t, 1)[0]
	// The other Run is admitted after the lease: on a cluster a lease pass
	// goes shard by shard, so "the oldest of two" is not which it takes.
	other := b.admit(t, uuid.New())
	if held, err := b.store.End(b.ctx, dispatch.End{Leased: dispatch.Leased{OrganizationID: b.org, RunID: run.ID, Attempt: l.Attempt},
		Outcome: dispatch.OutcomeFailed, StatusCode: 422, Answer: "422 Unprocessable Entity {\"error\":\"unknown kind\"}"}); !held || err != nil {
		t.Fatalf("End = %v, %v", held, err)
	}
	b.clock.Advance(time.Hour)
	if got := b.lease(t, 10); len(got) != 1 || got[0].RunID != other.ID {
		t.Errorf("lease = %+v, want only the other Run: a failed dispatch is not retried by itself", got)
	}
	failed, err := b.store.List(b.ctx, dispatch.ListParams{State: dispatch.StateFailed, Limit: 10})
	if err != nil || len(failed) != 1 || failed[0].RunID != run.ID || *failed[0].LastStatusCode != 422 {
		t.Fatalf("failed list = %+v, %v", failed, err)
	}
	for _, p := range []dispatch.RetryParams{
		{RunID: run.ID, Reason: "fixed"},
		{RunID: run.ID, Actor: "ops"},
	} {
		if _, err := b.store.Retry(b.ctx, p); !errors.Is(err, dispatch.ErrInvalid) {
			t.Errorf("Retry(%+v) = %v, want ErrInvalid", p, err)
		}
	}
	if _, err := b.store.Retry(b.ctx, dispatch.RetryParams{RunID: run.ID, OrganizationID: uuid.New(), Actor: "ops", Reason: "r"}); !errors.Is(err, dispatch.ErrNotFound) {
		t.Errorf("Retry naming another organization = %v, want ErrNotFound", err)
	}
	d, err := b.store.Retry(b.ctx, dispatch.RetryParams{RunID: run.ID, Actor: "ops@example.com", Reason: "the runtime knows the kind now"})
	if err != nil || d.State != dispatch.StatePending || !d.NextAttemptAt.Equal(b.clock.Now()) || d.Retries != 1 {
		t.Fatalf("Retry = %+v, %v; want pending, due now, 1 retry", d, err)
	}
	if _, err := b.store.Retry(b.ctx, dispatch.RetryParams{RunID: run.ID, Actor: "ops", Reason: "again"}); !errors.Is(err, dispatch.ErrNotFailed) ||
		!errs.Is(err, errs.Conflict) {
		t.Errorf("Retry of a pending dispatch = %v, want ErrNotFailed", err)
	}
	retries, err := b.store.Retries(b.ctx, b.org, run.ID)
	if err != nil || len(retries) != 1 || retries[0].Actor != "ops@example.com" || retries[0].Reason != "the runtime knows the kind now" ||
		retries[0].PreviousStatusCode == nil || *retries[0].PreviousStatusCode != 422 {
		t.Errorf("retries = %+v, %v; want one by ops@example.com with its reason and the 422", retries, err)
	}
	if got := b.lease(t, 10); len(got) != 1 || got[0].RunID != run.ID || got[0].Attempt != 2 {
		t.Errorf("lease after the retry = %+v, want the Run as attempt 2", got)
	}
}

func TestAttemptsKeepTheNewestAndCountAll(t *testing.T) {
	t.Parallel()
	b := setup(t)
	run := b.admit(t, b.org)
	total := dispatch.KeptAttempts + 5
	for i := range total {
		l := b.lease(t, 1)
		if len(l) != 1 {
			t.Fatalf("attempt %d: nothing leased", i+1)
		}
		if _, err := b.store.End(b.ctx, dispatch.End{Leased: dispatch.Leased{OrganizationID: b.org, RunID: run.ID, Attempt: l[0].Attempt},
			Outcome: dispatch.OutcomeRetry, Answer: fmt.Sprintf("try %d", i+1)}); err != nil {
			t.Fatal(err)
		}
	}
	attempts, err := b.store.Attempts(b.ctx, b.org, run.ID)
	if err != nil || len(attempts) != dispatch.KeptAttempts || attempts[0].Attempt != total-dispatch.KeptAttempts+1 ||
		attempts[len(attempts)-1].Attempt != total {
		t.Errorf("kept %d attempts (%d..%d), %v; want the newest %d, %d..%d", len(attempts), attempts[0].Attempt,
			attempts[len(attempts)-1].Attempt, err, dispatch.KeptAttempts, total-dispatch.KeptAttempts+1, total)
	}
	if d := b.get(t, run); d.Attempts != total {
		t.Errorf("dispatch counts %d attempts, want %d", d.Attempts, total)
	}
}

func TestStatsCountTheBacklog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.admit(t, b.org)
	b.clock.Advance(time.Minute)
	b.admit(t, b.org)
	failed := b.admit(t, uuid.New())
	b.clock.Advance(time.Minute)
	l := b.lease(t, 10)
	for _, x := range l {
		if x.RunID == failed.ID {
			if _, err := b.store.End(b.ctx, dispatch.End{Leased: dispatch.Leased{OrganizationID: x.OrganizationID, RunID: x.RunID,
				Attempt: x.Attempt}, Outcome: dispatch.OutcomeFailed, StatusCode: 400}); err != nil {
				t.Fatal(err)
			}
		}
	}
	st, err := b.store.Stats(b.ctx)
	if err != nil || st.Pending != 2 || st.Failed != 1 || st.OldestPending != 2*time.Minute {
		t.Errorf("Stats = %+v, %v; want 2 pending, 1 failed, the oldest 2m old (Run %s)", st, err, first.ID)
	}
}

func TestMessageIsTheSameBytesEveryTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	saved := b.admitSaved(t)
	direct := b.admit(t, b.org)
	for _, run := range []*runs.Run{saved, direct} {
		one, err := b.store.Message(b.ctx, b.org, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		// The Run changes between deliveries; its message does not.
		if _, _, err := b.runs.Report(b.ctx, b.org, run.ID, runs.StatusReport{Status: runs.StatusRunning}); err != nil {
			t.Fatal(err)
		}
		two, err := b.store.Message(b.ctx, b.org, run.ID)
		if err != nil || string(one) != string(two) {
			t.Fatalf("message changed:\n%s\n%s (%v)", one, two, err)
		}
		var m dispatch.Message
		if err := json.Unmarshal(one, &m); err != nil {
			t.Fatal(err)
		}
		if m.Type != dispatch.MessageType || m.Data.Run.ID != run.ID || m.Data.Run.OrganizationID != b.org ||
			!m.Timestamp.Equal(run.CreatedAt) || m.Data.StatusURL != "/v1/runs/"+run.ID.String()+"/status" ||
			m.Data.Run.IdempotencyKey != run.IdempotencyKey() {
			t.Errorf("message = %s", one)
		}
		switch run {
		case saved:
			if sn := m.Data.Snapshot; sn == nil || sn.ID != *run.SnapshotID || string(sn.Baseline) == "" ||
				len(sn.ContentHash) != 64 || sn.SavedSearchVersion < 1 || sn.CreatedAt.IsZero() || string(m.Data.Run.Input) != "null" {
				t.Errorf("saved-search message = %s, want the whole snapshot", one)
			}
		case direct:
			if m.Data.Snapshot != nil || string(m.Data.Run.Input) != `{"domain":"example.com"}` {
				t.Errorf("direct message = %s, want the input and no snapshot", one)
			}
		}
	}
	if _, err := b.store.Message(b.ctx, uuid.New(), saved.ID); !errors.Is(err, dispatch.ErrNotFound) {
		t.Errorf("another organization's message = %v, want ErrNotFound", err)
	}
}

// TestLeasePassesSpanEveryShard: dispatches of organizations on every node
// of a cluster (and on several shards of each), leased by passes bounded
// below their number. A pass leases at most its bound, the oldest due
// first whichever shard holds them, one statement per shard (issue 25,
// the dispatcher per shard); passes at once lease disjoint sets, and
// every dispatch once. On PostgreSQL a pass is one statement.
func TestLeasePassesSpanEveryShard(t *testing.T) {
	t.Parallel()
	b := setup(t)
	orgs, err := pgtest.OrganizationPerNode(b.ctx, b.db)
	if err != nil {
		t.Fatal(err)
	}
	for range 6 {
		orgs = append(orgs, uuid.New())
	}
	var order []uuid.UUID // admission order: the order they come due
	for i := range 21 {
		order = append(order, b.admit(t, orgs[i%len(orgs)]).ID)
		b.clock.Advance(time.Millisecond)
	}
	first := b.lease(t, 7)
	if len(first) != 7 {
		t.Fatalf("a pass of 7 leased %d", len(first))
	}
	for i, l := range first {
		if !slices.Contains(order[:7], l.RunID) {
			t.Errorf("leased %d: Run %s, not one of the 7 first due", i, l.RunID)
		}
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seen = map[uuid.UUID]int{}
	)
	for _, l := range first {
		seen[l.RunID]++
	}
	for range 4 {
		wg.Go(func() {
			for {
				got, err := b.store.LeasePass(b.ctx, 3, time.Hour)
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) > 3 {
					t.Errorf("a pass of 3 leased %d", len(got))
				}
				mu.Lock()
				for _, l := range got {
					seen[l.RunID]++
				}
				mu.Unlock()
				if len(got) == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	for _, id := range order {
		if seen[id] != 1 {
			t.Errorf("Run %s leased %d times, want once", id, seen[id])
		}
	}
}
