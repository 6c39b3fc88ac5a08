package sweeper

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/dbclock/dbclocktest"
	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/snapshot"
	"github.com/searchd/searchd/tools"
)

// admitDirect admits a direct Run under key on a store whose clock reads at.
func (b *bundle) admitDirect(t *testing.T, at time.Time, key string) *runs.Run {
	t.Helper()
	name := "digest"
	store := runs.NewStore(b.db, runs.Config{Clock: dbclocktest.New(at).Clock()})
	run, created, err := store.Admit(b.ctx, runs.AdmitParams{
		OrganizationID: b.org,
		Kind:           runs.KindDefinition,
		StartKey:       runs.DirectStartKey(key),
		RequestHash:    "hash",
		Name:           &name,
		Input:          json.RawMessage(`{}`),
	})
	if err != nil || !created {
		t.Fatalf("Admit(%q) = %v, %v", key, created, err)
	}
	return run
}

// wantSwept checks that one run's pass over table read and deleted n rows
// in one pass with no backlog, and that query then lists left.
func (b *bundle) wantSwept(t *testing.T, r TableReport, table string, n int, query string, left ...string) {
	t.Helper()
	if r.Table != table || r.Read != n || r.Deleted != n || r.Passes != 1 || r.Backlog {
		t.Errorf("%s report = %+v, want %d read, %d deleted in 1 pass, no backlog", table, r, n, n)
	}
	if got := b.strings(t, query); !slices.Equal(got, left) {
		t.Errorf("%s left = %q, want %q", table, got, left)
	}
}

func TestRunRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now()
	old := b.admitDirect(t, now.Add(-runs.Retention-day), "old")
	inside := b.admitDirect(t, now.Add(-runs.Retention+day), "inside")

	// On the database's clock, as in production.
	s, err := New(b.db, Config{})
	if err != nil {
		t.Fatal(err)
	}
	rep := b.runOnce(t, s)
	if r := rep.Runs; r.Read != 1 || r.Deleted != 1 || r.Backlog {
		t.Errorf("runs report = %+v, want 1 read and 1 deleted", r)
	}

	store := runs.NewStore(b.db, runs.Config{})
	got, err := store.GetByStartKey(b.ctx, b.org, runs.DirectStartKey("old"))
	if !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("GetByStartKey(old) = %v, %v; want ErrNotFound: Run %s is past its 396 days", got, err, old.ID)
	}
	// Inside its window the start key still replays the Run.
	got, err = store.GetByStartKey(b.ctx, b.org, runs.DirectStartKey("inside"))
	if err != nil || got.ID != inside.ID {
		t.Errorf("GetByStartKey(inside) = %v, %v; want Run %s", got, err, inside.ID)
	}
}

// TestADispatchIsSweptWithItsRun: a Run's dispatch, its attempts, the
// operator's retries and the Run's status history go when the sweeper
// deletes the Run past its 396 days, and stay with a Run inside them.
func TestADispatchIsSweptWithItsRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now()
	old := b.admitDirect(t, now.Add(-runs.Retention-day), "old")
	inside := b.admitDirect(t, now.Add(-runs.Retention+day), "inside")
	store := runs.NewStore(b.db, runs.Config{})
	outbox := dispatch.NewStore(b.db, nil)
	for _, run := range []*runs.Run{old, inside} {
		leased, err := outbox.LeasePass(b.ctx, 1, time.Minute)
		if err != nil || len(leased) != 1 {
			t.Fatalf("LeasePass = %v, %v", leased, err)
		}
		if _, err := outbox.End(b.ctx, dispatch.End{Leased: dispatch.Leased{OrganizationID: leased[0].OrganizationID, RunID: leased[0].RunID,
			Attempt: leased[0].Attempt}, Outcome: dispatch.OutcomeFailed, StatusCode: 400}); err != nil {
			t.Fatal(err)
		}
		if _, err := outbox.Retry(b.ctx, dispatch.RetryParams{RunID: leased[0].RunID, Actor: "op", Reason: "r"}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := store.Report(b.ctx, b.org, run.ID, runs.StatusReport{Status: runs.StatusSucceeded, Reporter: "rt"}); err != nil {
			t.Fatal(err)
		}
	}
	rows := func(id uuid.UUID) (n int) {
		t.Helper()
		if err := b.db.QueryRow(b.ctx, `SELECT
			(SELECT count(*) FROM agent.run_dispatches WHERE run_id = $1) +
			(SELECT count(*) FROM agent.run_dispatch_attempts WHERE run_id = $1) +
			(SELECT count(*) FROM agent.run_dispatch_retries WHERE run_id = $1) +
			(SELECT count(*) FROM agent.run_status_changes WHERE run_id = $1)`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if rows(old.ID) != 4 || rows(inside.ID) != 4 {
		t.Fatalf("before the sweep: %d and %d rows, want 4 each (dispatch, attempt, retry, status change)", rows(old.ID), rows(inside.ID))
	}
	s, err := New(b.db, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if rep := b.runOnce(t, s); rep.Runs.Deleted != 1 {
		t.Fatalf("runs report = %+v, want the old Run deleted", rep.Runs)
	}
	if n := rows(old.ID); n != 0 {
		t.Errorf("%d dispatch rows outlived their swept Run, want 0", n)
	}
	if n := rows(inside.ID); n != 4 {
		t.Errorf("the retained Run keeps %d dispatch rows, want 4", n)
	}
}

// snapshotBundle adds a saved search and starters on clocks of the test's
// choosing to a bundle.
type snapshotBundle struct {
	*bundle
	search *savedsearch.SavedSearch
}

func setupSnapshots(t *testing.T) snapshotBundle {
	t.Helper()
	b := setup(t)
	ss, err := savedsearch.NewStore(b.db).Create(b.ctx, b.org, savedsearch.CreateParams{
		Name:     "rust jobs",
		Brief:    savedsearch.Brief{Query: "rust"},
		Baseline: savedsearch.Baseline{Items: []string{"seen-1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return snapshotBundle{bundle: b, search: ss}
}

// start runs a whole saved-search start under key, with the plane and the
// Run on a clock that reads at. The snapshot is stamped by the database's
// own clock.
func (b snapshotBundle) start(t *testing.T, at time.Time, key string) admission.Result {
	t.Helper()
	clock := dbclocktest.New(at).Clock()
	starter, err := admission.NewStarter(admission.Deps{
		Pool:          b.db,
		Plane:         idempotency.NewService(b.db, idempotency.Config{Clock: clock}),
		SavedSearches: savedsearch.NewStore(b.db),
		Snapshots:     snapshot.NewStore(b.db),
		Runs:          runs.NewStore(b.db, runs.Config{Clock: clock}),
	}, admission.Config{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := starter.StartSavedSearch(b.ctx,
		admission.SavedSearchStart{Org: b.org, SavedSearchID: b.search.ID, IdempotencyKey: key})
	if err != nil || !res.Created {
		t.Fatalf("StartSavedSearch(%q) = %+v, %v", key, res, err)
	}
	return res
}

// prepare does what a saved-search start does before admission, and stops
// there: it claims key on a plane whose clock reads at, freezes a snapshot
// and completes the claim with it in one transaction. No Run refers to the
// snapshot; the claim holds it. A legacy snapshot is stored without the
// claim it answers, as before migration 00021.
func (b snapshotBundle) prepare(t *testing.T, at time.Time, key string, legacy bool) uuid.UUID {
	t.Helper()
	plane := idempotency.NewService(b.db, idempotency.Config{Clock: dbclocktest.New(at).Clock()})
	c := b.claim(t, plane, idempotency.ScopeSavedSearchStart, key, idempotency.SavedSearchStartLease)
	named := c.ID
	if legacy {
		named = uuid.Nil
	}
	var id uuid.UUID
	err := pgx.BeginFunc(b.ctx, b.db, func(tx pgx.Tx) error {
		snap, err := snapshot.Freeze(b.ctx, tx, b.org, b.search.ID, "", named)
		if err != nil {
			return err
		}
		id = snap.ID
		ok, err := plane.CompleteTx(b.ctx, tx, c, idempotency.Completion{
			ResourceType: admission.ResourceType,
			ResourceID:   snap.ID.String(),
			Response:     json.RawMessage(`{"snapshot":{}}`),
		})
		if err == nil && !ok {
			err = errors.New("fence lost")
		}
		return err
	})
	if err != nil {
		t.Fatalf("prepare(%q): %v", key, err)
	}
	return id
}

// snapshots returns the ids of the stored snapshots.
func (b snapshotBundle) snapshots(t *testing.T) map[uuid.UUID]bool {
	t.Helper()
	set := map[uuid.UUID]bool{}
	for _, id := range column[uuid.UUID](t, b.bundle, `SELECT id FROM agent.saved_search_snapshots`) {
		set[id] = true
	}
	return set
}

func TestSnapshotRetention(t *testing.T) {
	t.Parallel()
	b := setupSnapshots(t)
	now := time.Now().UTC().Truncate(time.Microsecond)

	// Referenced: a whole start; its Run keeps the snapshot for 396 days.
	referenced := *b.start(t, now, "referenced").Snapshot
	// Of a Run past its retention: the Run goes, then its snapshot.
	ofOldRun := *b.start(t, now.Add(-runs.Retention-day), "old-run").Snapshot
	// Frozen, claim completed, Run not yet admitted, and the claim was
	// taken three hours after the others, so it is retained longest; the
	// legacy one names no claim, as before migration 00021.
	held := b.prepare(t, now.Add(3*time.Hour), "held", false)
	heldLegacy := b.prepare(t, now.Add(3*time.Hour), "held-legacy", true)
	// Frozen and claimed, and the Run never came: an orphan once the
	// claim is gone.
	orphan := b.prepare(t, now, "orphan", false)
	if n := len(b.snapshots(t)); n != 5 {
		t.Fatalf("%d snapshots, want 5", n)
	}
	s := b.sweeper(t, Config{})

	// 24.5 hours later every claim but held's has passed, and no snapshot
	// is old enough to go: one a start may still be admitting stays, claim
	// or no claim.
	b.clock.Set(now.Add(24*time.Hour + 30*time.Minute))
	rep := b.runOnce(t, s)
	if rep.Runs.Deleted != 1 || rep.Snapshots.Read != 0 || len(b.snapshots(t)) != 5 {
		t.Errorf("at 24.5 h: report %+v and %d snapshots, want the old Run deleted and every snapshot kept",
			rep, len(b.snapshots(t)))
	}

	// Past SnapshotMinAge: the orphan and the snapshot of the deleted Run
	// go; the referenced one and the held ones stay.
	b.clock.Set(now.Add(SnapshotMinAge + time.Hour))
	rep = b.runOnce(t, s)
	if got := b.snapshots(t); len(got) != 3 || !got[referenced.ID] || !got[held] || !got[heldLegacy] {
		t.Errorf("at %s: snapshots %v, want referenced %s, held %s and held-legacy %s",
			SnapshotMinAge+time.Hour, got, referenced.ID, held, heldLegacy)
	}
	if sn := rep.Snapshots; sn.Read != 2 || sn.Deleted != 2 {
		t.Errorf("snapshots report = %+v, want 2 read (orphan %s, of the old Run %s) and 2 deleted", sn, orphan, ofOldRun.ID)
	}

	// Once the held claims have passed too, nothing holds them.
	b.clock.Set(now.Add(3*time.Hour + idempotency.SavedSearchStartRetention + time.Minute))
	rep = b.runOnce(t, s)
	if got := b.snapshots(t); len(got) != 1 || !got[referenced.ID] {
		t.Errorf("after the held claims passed: snapshots %v, want referenced %s alone", got, referenced.ID)
	}
	if rep.Snapshots.Deleted != 2 {
		t.Errorf("snapshots report = %+v, want 2 deleted", rep.Snapshots)
	}
	// The referenced snapshot's Run still replays its start key, with it.
	run, sum, err := runs.NewStore(b.db, runs.Config{}).LookupStart(b.ctx, b.org, runs.SavedSearchStartKey("referenced"))
	if err != nil || sum == nil || sum.ID != referenced.ID {
		t.Errorf("LookupStart(referenced) = %v, %v, %v; want its Run and snapshot %s", run, sum, err, referenced.ID)
	}
}

// TestSnapshotClaimedBetweenReadAndDeleteStays: a snapshot that names no
// claim (written before migration 00021) is kept by any retained start
// claim naming it, seen by the delete's re-check too. (A snapshot that
// names its claim is kept by that claim alone: a start's claim is
// completed with the snapshot its own preparation froze, never an older
// one.)
func TestSnapshotClaimedBetweenReadAndDeleteStays(t *testing.T) {
	t.Parallel()
	b := setupSnapshots(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	id := b.prepare(t, now, "orphan", true)
	b.clock.Set(now.Add(SnapshotMinAge + time.Hour))

	// Between the read and the delete, a claim comes to name the snapshot.
	// The delete's re-check sees it: the read counts the snapshot, the
	// delete keeps it.
	plane := idempotency.NewService(b.db, idempotency.Config{Clock: b.clock.Clock()})
	s := b.sweeper(t, Config{beforeDelete: func(ctx context.Context, table string, ids []uuid.UUID) error {
		if table != TableSnapshots {
			return nil
		}
		c, err := plane.Claim(ctx, b.org, idempotency.ScopeSavedSearchStart, "late", "hash", idempotency.SavedSearchStartLease)
		if err != nil {
			return err
		}
		_, err = plane.Complete(ctx, c.Claim, idempotency.Completion{ResourceType: admission.ResourceType, ResourceID: id.String()})
		return err
	}})
	rep := b.runOnce(t, s)
	if sn := rep.Snapshots; sn.Read != 1 || sn.Deleted != 0 {
		t.Errorf("snapshots report = %+v, want 1 read and 0 deleted", sn)
	}
	if !b.snapshots(t)[id] {
		t.Errorf("snapshot %s deleted though a retained claim named it before the delete", id)
	}
}

// TestDropRetention: a dropped delivery stays in the audit for
// providerjobs.DropRetention after it was received, to the microsecond on
// the stubbed clock, and goes after it; each table's pass is its own, so
// the drops' counts are reported apart.
func TestDropRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := b.clock.Now()
	drop := func(deliveryID string, received time.Time) {
		t.Helper()
		b.exec(t, `
INSERT INTO agent.webhook_drops
	(id, provider, path_job_id, delivery_id, request_hash, reason, organization_id, received_at)
VALUES ($1, 'acme', 'job', $2, repeat('0', 64), 'duplicate', $3, $4)`, uuid.New(), deliveryID, b.org, received)
	}
	drop("older", now.Add(-providerjobs.DropRetention-day))
	drop("exactly-at-retention", now.Add(-providerjobs.DropRetention))
	drop("a-microsecond-inside", now.Add(-providerjobs.DropRetention+time.Microsecond))
	drop("recent", now.Add(-time.Hour))

	var observed []string
	s := b.sweeper(t, Config{Observer: ObserverFunc(func(table string, read, deleted int, _ time.Duration) {
		if table == TableDrops {
			observed = append(observed, fmt.Sprintf("%d/%d", read, deleted))
		}
	})})
	rep := b.runOnce(t, s)
	b.wantSwept(t, rep.Drops, TableDrops, 2, `SELECT delivery_id FROM agent.webhook_drops ORDER BY delivery_id`,
		"a-microsecond-inside", "recent")
	if len(observed) != 1 || observed[0] != "2/2" {
		t.Errorf("observer saw drop passes %v, want one of 2 read, 2 deleted", observed)
	}
	if c := rep.Claims; c.Read != 0 {
		t.Errorf("claims report = %+v, want nothing: the drops are a table of their own", c)
	}
}

// TestResolutionRetention: a person's resolution of an uncertain tool call
// is kept until its retain_until (tools.ResolutionRetention after it was
// made), to the microsecond on the stubbed clock, and goes at it.
func TestResolutionRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := b.clock.Now()
	resolution := func(key string, resolvedAt time.Time) {
		t.Helper()
		b.exec(t, `
INSERT INTO agent.tool_call_resolutions
	(id, organization_id, scope, key, claim_id, resolution, actor, reason, uncertain_answer, resolved_at, retain_until)
VALUES ($1, $2, 'tool.email.send', $3, $1, 'retry', 'ada@ops', 'checked', '{"ok": false, "outcome": "uncertain"}', $4, $5)`,
			uuid.New(), b.org, key, resolvedAt, resolvedAt.Add(tools.ResolutionRetention))
	}
	resolution("older", now.Add(-tools.ResolutionRetention-day))
	resolution("exactly-at-retention", now.Add(-tools.ResolutionRetention))
	resolution("a-microsecond-inside", now.Add(-tools.ResolutionRetention+time.Microsecond))
	resolution("recent", now.Add(-time.Hour))

	b.wantSwept(t, b.runOnce(t, b.sweeper(t, Config{})).Resolutions, TableResolutions, 2,
		`SELECT key FROM agent.tool_call_resolutions ORDER BY key`, "a-microsecond-inside", "recent")
}

// TestInboxRetention: a finished arrival of the provider inbox is kept as
// long as the drop audit (providerjobs.DropRetention after it was
// received) and goes after it with its copies; a pending arrival, a
// delivery acknowledged and not yet applied, is never swept.
func TestInboxRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := b.clock.Now()
	arrival := func(deliveryID, status string, received time.Time) {
		t.Helper()
		id := uuid.New()
		var reason, finished any
		if status != "pending" {
			finished = received
		}
		if status == "dropped" {
			reason = "unknown_job"
		}
		// Each arrival in an organization of its own, so a cluster
		// spreads them over its shards.
		org, job := uuid.New(), uuid.New()
		b.exec(t, `
INSERT INTO agent.provider_inbox
	(id, provider, delivery_id, path_job_id, job_id, organization_id, request_hash, body_job_id, body_status,
	 received_at, status, reason, finished_at, lease_expires_at)
VALUES ($1, 'acme', $2, $7::uuid::text, $7::uuid, $8, repeat('0', 64), 'j', 'running', $3, $4, $5, $6, $3)`,
			id, deliveryID, received, status, reason, finished, job, org)
		b.exec(t, `INSERT INTO agent.provider_inbox_copies (inbox_id, organization_id, duplicates, first_copy_at, last_copy_at)
			VALUES ($1, $2, 3, $3, $3)`, id, org, received)
	}
	old := now.Add(-providerjobs.DropRetention - day)
	arrival("applied-old", "applied", old)
	arrival("dropped-at-retention", "dropped", now.Add(-providerjobs.DropRetention))
	arrival("pending-old", "pending", old)
	arrival("applied-inside", "applied", now.Add(-providerjobs.DropRetention+time.Microsecond))

	rep := b.runOnce(t, b.sweeper(t, Config{}))
	b.wantSwept(t, rep.Inbox, TableInbox, 2, `SELECT delivery_id FROM agent.provider_inbox ORDER BY delivery_id`,
		"applied-inside", "pending-old")
	var copies int
	if err := b.db.QueryRow(b.ctx, `SELECT count(*) FROM agent.provider_inbox_copies`).Scan(&copies); err != nil || copies != 2 {
		t.Errorf("copies rows left = %d, %v; want 2: they go with their arrival", copies, err)
	}
}

// TestOccurrenceRetention: an occurrence of a schedule is kept as long as
// its Run (a started one's retain_until is its Run's), and the two go in
// the same run of the sweeper; a closed occurrence with no Run goes at its
// own retain_until; an open one, which has none, is never swept.
func TestOccurrenceRetention(t *testing.T) {
	t.Parallel()
	b := setupSnapshots(t)
	now := b.clock.Now()
	run := b.start(t, now.Add(-runs.Retention-day), "scheduled").Run
	occurrence := func(due time.Time, status string, runID *uuid.UUID, retain *time.Time) {
		t.Helper()
		var reason, closed any
		if status == "refused" || status == "not_ready" {
			reason = "invalid"
		}
		if retain != nil {
			closed = due
		}
		b.exec(t, `
INSERT INTO agent.schedule_occurrences
	(organization_id, saved_search_id, due_at, id, status, reason, run_id, deadline, next_attempt_at,
	 created_at, closed_at, retain_until)
VALUES ($1, $2, $3::timestamptz, gen_random_uuid(), $4, $5, $6, $3::timestamptz + interval '1 day', $3, $3,
	$7::timestamptz, $8::timestamptz)`,
			b.org, b.search.ID, due, status, reason, runID, closed, retain)
	}
	long := now.Add(-runs.Retention - 2*day)
	occurrence(long, "started", &run.ID, &run.RetainUntil)
	occurrence(long.Add(time.Hour), "refused", nil, new(now.Add(-time.Second)))
	occurrence(long.Add(2*time.Hour), "missed", nil, new(now.Add(day)))
	occurrence(long.Add(3*time.Hour), "not_ready", nil, nil)

	rep := b.runOnce(t, b.sweeper(t, Config{}))
	b.wantSwept(t, rep.Occurrences, TableOccurrences, 2, `SELECT status FROM agent.schedule_occurrences ORDER BY due_at`,
		"missed", "not_ready")
	if r := rep.Runs; r.Deleted != 1 {
		t.Errorf("runs report = %+v, want the occurrence's Run deleted in the same run", r)
	}
}

// TestSessionRetention: a console session is deleted once it has expired,
// to the microsecond on the stubbed clock; a live one stays.
func TestSessionRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := b.clock.Now()
	session := func(actor string, expires time.Time) {
		t.Helper()
		hash := sha256.Sum256([]byte(actor))
		b.exec(t, `
INSERT INTO agent.console_sessions (id, secret_hash, organization_id, actor, role, via, created_at, expires_at)
VALUES ($1, $2, $3, $4, '', 'oidc', $5, $6)`, uuid.New(), hash[:], b.org, actor, expires.Add(-8*time.Hour), expires)
	}
	session("expired-yesterday", now.Add(-day))
	session("expiring-now", now)
	session("a-microsecond-left", now.Add(time.Microsecond))
	session("signed-in-an-hour-ago", now.Add(7*time.Hour))

	b.wantSwept(t, b.runOnce(t, b.sweeper(t, Config{})).Sessions, TableSessions, 2,
		`SELECT actor FROM agent.console_sessions ORDER BY actor`, "a-microsecond-left", "signed-in-an-hour-ago")
}

// TestDirectoryRetention: an entry of the provider job directory goes once
// its retention (its registration plus the Run retention) has passed, one
// a microsecond inside it stays, and an entry a registration took over
// (its retention moved on) stays. On a cluster the directory is sharded by
// provider_job_id, apart from every other table: the pass reads and
// deletes per shard.
func TestDirectoryRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := b.clock.Now()
	entry := func(providerJobID string, retainUntil time.Time) {
		t.Helper()
		b.exec(t, `
INSERT INTO agent.provider_job_directory (provider, provider_job_id, organization_id, job_id, registered_at, retain_until)
VALUES ('acme', $1, $2, $3, $4::timestamptz - interval '396 days', $4)`, providerJobID, uuid.New(), uuid.New(), retainUntil)
	}
	for i := range 6 {
		entry(fmt.Sprintf("old-%d", i), now.Add(-time.Duration(i+1)*time.Hour))
	}
	entry("at-retention", now)
	entry("inside", now.Add(time.Microsecond))

	b.wantSwept(t, b.runOnce(t, b.sweeper(t, Config{})).Directory, TableDirectory, 7,
		`SELECT provider_job_id FROM agent.provider_job_directory ORDER BY 1`, "inside")
}
