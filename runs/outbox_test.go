package runs_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/runs"
)

// dispatchRows counts the outbox rows of org, and those whose Run is not
// in agent.runs (which the foreign key forbids; counted all the same).
func (b bundle) dispatchRows(t *testing.T, org uuid.UUID) (rows, orphans int) {
	t.Helper()
	err := b.db.QueryRow(b.ctx, `
		SELECT count(*), count(*) FILTER (WHERE r.id IS NULL)
		FROM agent.run_dispatches d
		LEFT JOIN agent.runs r ON r.id = d.run_id AND r.organization_id = d.organization_id
		WHERE d.organization_id = $1`, org).Scan(&rows, &orphans)
	if err != nil {
		t.Fatal(err)
	}
	return rows, orphans
}

// TestAdmissionWritesItsDispatchInTheSameStatement proves the hand-off: the
// insert that admits a Run writes its pending dispatch, due at once; a
// replay and a refused key write none.
func TestAdmissionWritesItsDispatchInTheSameStatement(t *testing.T) {
	t.Parallel()
	b := setup(t)
	run, created, err := b.store.Admit(b.ctx, direct(b.org, "k", "h"))
	if err != nil || !created {
		t.Fatalf("Admit = %v, %v", created, err)
	}
	var (
		state          string
		attempts       int
		due, createdAt time.Time
		runID          uuid.UUID
		dispatchedAt   *string
	)
	err = b.db.QueryRow(b.ctx, `SELECT run_id, state, attempts, next_attempt_at, created_at, dispatched_at::text
		FROM agent.run_dispatches WHERE organization_id = $1`, b.org).
		Scan(&runID, &state, &attempts, &due, &createdAt, &dispatchedAt)
	if err != nil {
		t.Fatalf("reading the dispatch of the admitted Run: %v", err)
	}
	if runID != run.ID || state != "pending" || attempts != 0 || !due.Equal(run.CreatedAt) ||
		!createdAt.Equal(run.CreatedAt) || dispatchedAt != nil {
		t.Errorf("dispatch = run %s, %s, %d attempts, due %s, created %s, dispatched %v; want run %s, pending, 0, due and created at %s, not dispatched",
			runID, state, attempts, due, createdAt, dispatchedAt, run.ID, run.CreatedAt)
	}
	if _, created, err := b.store.Admit(b.ctx, direct(b.org, "k", "h")); err != nil || created {
		t.Fatalf("replay = %v, %v", created, err)
	}
	if _, _, err := b.store.Admit(b.ctx, direct(b.org, "k", "other")); !errors.Is(err, runs.ErrKeyReused) {
		t.Fatalf("reused key = %v", err)
	}
	if n, orphans := b.dispatchRows(t, b.org); n != 1 || orphans != 0 {
		t.Errorf("after a replay and a reused key: %d dispatches (%d orphans), want 1", n, orphans)
	}
}

// TestConcurrentAdmitsWriteOneDispatch: of 20 concurrent admissions of one
// key, and 20 of distinct keys, each admitted Run has exactly one dispatch
// and no dispatch exists without its Run.
func TestConcurrentAdmitsWriteOneDispatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var wg sync.WaitGroup
	for i := range 40 {
		key := "same"
		if i%2 == 1 {
			key = uuid.NewString()
		}
		wg.Go(func() {
			if _, _, err := b.store.Admit(b.ctx, direct(b.org, key, "h")); err != nil {
				t.Errorf("Admit: %v", err)
			}
		})
	}
	wg.Wait()
	var admitted int
	if err := b.db.QueryRow(b.ctx, `SELECT count(*) FROM agent.runs WHERE organization_id = $1`, b.org).Scan(&admitted); err != nil {
		t.Fatal(err)
	}
	n, orphans := b.dispatchRows(t, b.org)
	var missing int
	if err := b.db.QueryRow(b.ctx, `SELECT count(*) FROM agent.runs r WHERE r.organization_id = $1
		AND NOT EXISTS (SELECT 1 FROM agent.run_dispatches d WHERE d.run_id = r.id AND d.organization_id = r.organization_id)`,
		b.org).Scan(&missing); err != nil {
		t.Fatal(err)
	}
	if admitted != 21 || n != admitted || orphans != 0 || missing != 0 {
		t.Errorf("%d Runs, %d dispatches, %d orphan dispatches, %d Runs without one; want 21, 21, 0, 0", admitted, n, orphans, missing)
	}
}

// TestAnAbortedAdmissionLeavesNoDispatch: QueueAdmit in a transaction that
// rolls back leaves neither the Run nor its dispatch; committed, both.
func TestAnAbortedAdmissionLeavesNoDispatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, commit := range []bool{false, true} {
		tx, err := b.db.Begin(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		batch := &pgx.Batch{}
		q, err := b.store.QueueAdmit(batch, direct(b.org, "tx-key", "h"))
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.SendBatch(b.ctx, batch).Close(); err != nil {
			t.Fatal(err)
		}
		if run, err := q.Run(); err != nil || run == nil {
			t.Fatalf("queued admission = %v, %v", run, err)
		}
		if commit {
			err = tx.Commit(b.ctx)
		} else {
			err = tx.Rollback(b.ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		if commit {
			want = 1
		}
		if n, orphans := b.dispatchRows(t, b.org); n != want || orphans != 0 {
			t.Errorf("committed %v: %d dispatches (%d orphans), want %d", commit, n, orphans, want)
		}
	}
}

// TestADispatchGoesWithItsRun: deleting a Run (the retention sweep, or an
// expired Run replaced under its key) deletes its dispatch, attempts,
// retries and status changes too.
func TestADispatchGoesWithItsRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	run := b.admit(t, direct(b.org, "k", "h"))
	if _, _, err := b.store.Report(b.ctx, b.org, run.ID, runs.StatusReport{Status: runs.StatusRunning, Reporter: "rt"}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO agent.run_dispatch_attempts (run_id, organization_id, attempt, started_at) VALUES ($1, $2, 1, now())`,
		`INSERT INTO agent.run_dispatch_retries (id, run_id, organization_id, actor, reason, retried_at)
			VALUES (gen_random_uuid(), $1, $2, 'op', 'why', now())`,
	} {
		if _, err := b.db.Exec(b.ctx, q, run.ID, b.org); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.db.Exec(b.ctx, `DELETE FROM agent.runs WHERE id = $1`, run.ID); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := b.db.QueryRow(b.ctx, `SELECT
		(SELECT count(*) FROM agent.run_dispatches WHERE run_id = $1) +
		(SELECT count(*) FROM agent.run_dispatch_attempts WHERE run_id = $1) +
		(SELECT count(*) FROM agent.run_dispatch_retries WHERE run_id = $1) +
		(SELECT count(*) FROM agent.run_status_changes WHERE run_id = $1)`, run.ID).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d dispatch, attempt, retry and status rows outlived their Run, want 0", left)
	}
}
