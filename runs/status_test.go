package runs_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/runs"
)

func report(status string) runs.StatusReport {
	return runs.StatusReport{Status: status, Reporter: "runtime-1"}
}

// stored reads what the database holds of a Run's status, bypassing the
// store: status, version, updated_at (NULL until the first change),
// result_ref and error code.
func (b bundle) stored(t *testing.T, id uuid.UUID) (status string, version int64, updated *time.Time, ref, code *string) {
	t.Helper()
	if err := b.db.QueryRow(b.ctx, `SELECT status, version, updated_at, result_ref, error_code FROM agent.runs WHERE id = $1`, id).
		Scan(&status, &version, &updated, &ref, &code); err != nil {
		t.Fatal(err)
	}
	return
}

func TestReportMovesTheStatusForwardOnceAndRecordsEachChange(t *testing.T) {
	t.Parallel()
	b := setup(t)
	run := b.admit(t, direct(b.org, "k", "h"))
	steps := []struct {
		name        string
		r           runs.StatusReport
		wantChanged bool
		wantVersion int64
		wantStatus  string
	}{
		{"running", report(runs.StatusRunning), true, 2, runs.StatusRunning},
		{"running again", report(runs.StatusRunning), false, 2, runs.StatusRunning},
		{"succeeded with a result", runs.StatusReport{Status: runs.StatusSucceeded, ResultRef: "s3://results/1", Reporter: "runtime-2"}, true, 3, runs.StatusSucceeded},
		{"the same success again", runs.StatusReport{Status: runs.StatusSucceeded, ResultRef: "s3://results/1", Reporter: "runtime-2"}, false, 3, runs.StatusSucceeded},
	}
	var lastUpdate time.Time
	for _, st := range steps {
		b.clock.Advance(time.Second)
		got, changed, err := b.store.Report(b.ctx, b.org, run.ID, st.r)
		if err != nil {
			t.Fatalf("%s: Report = %v", st.name, err)
		}
		if changed != st.wantChanged || got.Version != st.wantVersion || got.Status != st.wantStatus {
			t.Errorf("%s: Report = %s v%d changed %v, want %s v%d changed %v", st.name, got.Status, got.Version, changed,
				st.wantStatus, st.wantVersion, st.wantChanged)
		}
		if st.wantChanged {
			lastUpdate = b.clock.Now()
		}
		// A report that changes nothing leaves the time of the last change:
		// the same report twice is one change, timestamps included.
		if !got.UpdatedAt.Equal(lastUpdate) {
			t.Errorf("%s: updated_at = %s, want %s", st.name, got.UpdatedAt, lastUpdate)
		}
		status, version, updated, _, _ := b.stored(t, run.ID)
		if status != st.wantStatus || version != st.wantVersion || updated == nil || !updated.Equal(lastUpdate) {
			t.Errorf("%s: stored %s v%d updated %v, want %s v%d updated %s", st.name, status, version, updated,
				st.wantStatus, st.wantVersion, lastUpdate)
		}
	}
	changes, err := b.store.StatusChanges(b.ctx, b.org, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 2 || changes[0].Version != 2 || changes[0].Status != runs.StatusRunning ||
		changes[0].Reporter == nil || *changes[0].Reporter != "runtime-1" ||
		changes[1].Version != 3 || changes[1].Status != runs.StatusSucceeded ||
		changes[1].ResultRef == nil || *changes[1].ResultRef != "s3://results/1" || *changes[1].Reporter != "runtime-2" {
		t.Errorf("status changes = %+v, want running v2 by runtime-1 then succeeded v3 with its result by runtime-2", changes)
	}
}

func TestReportAcceptsAForwardJump(t *testing.T) {
	t.Parallel()
	b := setup(t)
	msg := "the vendor's quota ran out"
	for _, st := range []runs.StatusReport{
		{Status: runs.StatusSucceeded},
		{Status: runs.StatusFailed, Error: &runs.RunError{Code: "quota.exceeded", Message: &msg}},
		{Status: runs.StatusCancelled, Error: &runs.RunError{Code: "user_cancelled"}},
	} {
		run := b.admit(t, direct(b.org, uuid.NewString(), "h"))
		got, changed, err := b.store.Report(b.ctx, b.org, run.ID, st)
		if err != nil || !changed || got.Status != st.Status || got.Version != 2 {
			t.Fatalf("queued -> %s = %+v, %v, %v; want changed to v2", st.Status, got, changed, err)
		}
		if st.Error != nil && (got.Error == nil || got.Error.Code != st.Error.Code ||
			(st.Error.Message != nil) != (got.Error.Message != nil)) {
			t.Errorf("%s error = %+v, want %+v", st.Status, got.Error, st.Error)
		}
	}
}

func TestReportRefusesToChangeAFinishedRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	run := b.admit(t, direct(b.org, "k", "h"))
	if _, _, err := b.store.Report(b.ctx, b.org, run.ID, runs.StatusReport{Status: runs.StatusSucceeded, ResultRef: "r1"}); err != nil {
		t.Fatal(err)
	}
	for _, late := range []runs.StatusReport{
		report(runs.StatusRunning), // out of order: running after the end
		{Status: runs.StatusFailed, Error: &runs.RunError{Code: "boom"}},
		{Status: runs.StatusCancelled},
		{Status: runs.StatusSucceeded, ResultRef: "r2"}, // another result
		{Status: runs.StatusSucceeded},                  // no result
	} {
		b.clock.Advance(time.Second)
		_, changed, err := b.store.Report(b.ctx, b.org, run.ID, late)
		var fin *runs.FinishedError
		if !errors.As(err, &fin) || changed || fin.Status != runs.StatusSucceeded || fin.Version != 2 || !errs.Is(err, errs.Conflict) {
			t.Errorf("Report(%+v) after succeeded = %v, %v; want a conflict naming succeeded v2", late, changed, err)
		}
		status, version, _, ref, _ := b.stored(t, run.ID)
		if status != runs.StatusSucceeded || version != 2 || ref == nil || *ref != "r1" {
			t.Errorf("after the refused %s: stored %s v%d ref %v, want succeeded v2 r1", late.Status, status, version, ref)
		}
	}
}

// TestConcurrentDuplicateReportsChangeTheRunOnce: 20 copies of one report
// at once change the Run once; every answer carries the one version.
// Then 10 succeeded and 10 failed reports race: exactly one status wins,
// and every loser is refused as finished.
func TestConcurrentDuplicateReportsChangeTheRunOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	run := b.admit(t, direct(b.org, "k", "h"))
	race := func(reports []runs.StatusReport) (changed int, versions map[int64]int, finished int, winners map[string]int) {
		var (
			wg sync.WaitGroup
			mu sync.Mutex
		)
		versions, winners = map[int64]int{}, map[string]int{}
		for _, r := range reports {
			wg.Go(func() {
				got, c, err := b.store.Report(b.ctx, b.org, run.ID, r)
				mu.Lock()
				defer mu.Unlock()
				var fin *runs.FinishedError
				switch {
				case errors.As(err, &fin):
					finished++
				case err != nil:
					t.Errorf("Report(%s): %v", r.Status, err)
				default:
					versions[got.Version]++
					if c {
						changed++
						winners[got.Status]++
					}
				}
			})
		}
		wg.Wait()
		return
	}
	dup := make([]runs.StatusReport, 20)
	for i := range dup {
		dup[i] = report(runs.StatusRunning)
	}
	changed, versions, finished, _ := race(dup)
	if changed != 1 || versions[2] != 20 || len(versions) != 1 || finished != 0 {
		t.Errorf("20 duplicate reports: %d changed, versions %v, %d refused; want 1 changed, all at v2", changed, versions, finished)
	}
	mixed := make([]runs.StatusReport, 20)
	for i := range mixed {
		mixed[i] = runs.StatusReport{Status: runs.StatusSucceeded}
		if i%2 == 1 {
			mixed[i] = runs.StatusReport{Status: runs.StatusFailed, Error: &runs.RunError{Code: "boom"}}
		}
	}
	changed, versions, finished, winners := race(mixed)
	status, version, _, _, _ := b.stored(t, run.ID)
	if changed != 1 || version != 3 || winners[status] != 1 || versions[3] != 10 || finished != 10 {
		t.Errorf("10 succeeded and 10 failed at once: %d changed (winners %v), stored %s v%d, answers by version %v, %d refused; "+
			"want 1 change to v3, the 10 copies of the winner answered v3, the 10 others refused", changed, winners, status, version, versions, finished)
	}
	changes, err := b.store.StatusChanges(b.ctx, b.org, run.ID)
	if err != nil || len(changes) != 2 {
		t.Errorf("status changes = %d, %v; want 2 (running, then the winner)", len(changes), err)
	}
}

func TestReportIsScopedToTheOrganization(t *testing.T) {
	t.Parallel()
	b := setup(t)
	run := b.admit(t, direct(b.org, "k", "h"))
	other := uuid.New()
	if _, _, err := b.store.Report(b.ctx, other, run.ID, report(runs.StatusSucceeded)); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("another organization's report = %v, want ErrNotFound", err)
	}
	if _, _, err := b.store.Report(b.ctx, b.org, uuid.New(), report(runs.StatusRunning)); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("a report for no Run = %v, want ErrNotFound", err)
	}
	status, version, updated, _, _ := b.stored(t, run.ID)
	if status != runs.StatusQueued || version != 1 || updated != nil {
		t.Errorf("after another organization's report: %s v%d updated %v, want queued v1 never updated", status, version, updated)
	}
	if changes, _ := b.store.StatusChanges(b.ctx, other, run.ID); len(changes) != 0 {
		t.Errorf("another organization reads %d status changes, want 0", len(changes))
	}
}

func TestReportValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	run := b.admit(t, direct(b.org, "k", "h"))
	long := strings.Repeat("x", runs.MaxErrorMessageLen+1)
	for _, tc := range []struct {
		r     runs.StatusReport
		field string
	}{
		{runs.StatusReport{Status: "queued"}, "status"},
		{runs.StatusReport{Status: "dispatched"}, "status"},
		{runs.StatusReport{Status: "done"}, "status"},
		{runs.StatusReport{Status: ""}, "status"},
		{runs.StatusReport{Status: "running", ResultRef: "r"}, "result_ref"},
		{runs.StatusReport{Status: "failed", ResultRef: "r", Error: &runs.RunError{Code: "x"}}, "result_ref"},
		{runs.StatusReport{Status: "succeeded", ResultRef: strings.Repeat("r", runs.MaxResultRefBytes+1)}, "result_ref"},
		{runs.StatusReport{Status: "succeeded", ResultRef: "a\x00b"}, "result_ref"},
		{runs.StatusReport{Status: "succeeded", Error: &runs.RunError{Code: "x"}}, "error"},
		{runs.StatusReport{Status: "failed", Error: &runs.RunError{}}, "error.code"},
		{runs.StatusReport{Status: "failed", Error: &runs.RunError{Code: "Upper"}}, "error.code"},
		{runs.StatusReport{Status: "failed", Error: &runs.RunError{Code: strings.Repeat("a", 101)}}, "error.code"},
		{runs.StatusReport{Status: "failed", Error: &runs.RunError{Code: "x", Message: &long}}, "error.message"},
	} {
		_, _, err := b.store.Report(b.ctx, b.org, run.ID, tc.r)
		fields := errs.FieldsOf(err)
		if !errors.Is(err, runs.ErrInvalid) || len(fields) == 0 || fields[0].Name != tc.field {
			t.Errorf("Report(%+v) = %v (fields %v), want ErrInvalid naming %s", tc.r, err, fields, tc.field)
		}
	}
	if status, version, _, _, _ := b.stored(t, run.ID); status != runs.StatusQueued || version != 1 {
		t.Errorf("after refused reports: %s v%d, want queued v1", status, version)
	}
}
