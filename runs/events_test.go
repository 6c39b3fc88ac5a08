package runs_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/runs"
)

// TestEventsAreTheHistoryAfterASeq: a Run's events are its admission and
// each status change, seq its version after each, and Events(after) reads
// exactly those after a seq; Version reads where the Run is, and another
// organization's Run is not found.
func TestEventsAreTheHistoryAfterASeq(t *testing.T) {
	t.Parallel()
	b := setup(t)
	run := b.admit(t, direct(b.org, "events", "h"))
	b.clock.Advance(time.Second)
	if _, _, err := b.store.Report(b.ctx, b.org, run.ID, report(runs.StatusRunning)); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Second)
	msg := "it broke"
	if _, _, err := b.store.Report(b.ctx, b.org, run.ID, runs.StatusReport{Status: runs.StatusFailed,
		Error: &runs.RunError{Code: "boom", Message: &msg}}); err != nil {
		t.Fatal(err)
	}
	want := []string{"1 run.admitted queued", "2 run.running running", "3 run.failed failed"}
	for after := int64(-1); after <= 4; after++ {
		events, err := b.store.Events(b.ctx, b.org, run.ID, after)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range events {
			if e.RunID != run.ID {
				t.Errorf("event %d names Run %s, want %s", e.Seq, e.RunID, run.ID)
			}
			got = append(got, fmt.Sprintf("%d %s %s", e.Seq, e.Type, e.Status))
		}
		w := want[min(max(after, 0), 3):]
		if fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("Events(after %d) = %v, want %v", after, got, w)
		}
	}
	all, err := b.store.Events(b.ctx, b.org, run.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !all[0].OccurredAt.Equal(run.CreatedAt) || !all[2].OccurredAt.After(all[1].OccurredAt) ||
		all[2].Error == nil || all[2].Error.Code != "boom" || *all[2].Error.Message != msg || !all[2].Terminal() || all[1].Terminal() {
		t.Errorf("events = %+v, want the admission at the Run's creation, then later changes, the last failed with its error", all)
	}
	if v, status, err := b.store.Version(b.ctx, b.org, run.ID); err != nil || v != 3 || status != runs.StatusFailed {
		t.Errorf("Version = %d %s %v, want 3 failed", v, status, err)
	}
	if _, _, err := b.store.Version(b.ctx, uuid.New(), run.ID); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("Version of another organization's Run = %v, want ErrNotFound", err)
	}
	if events, err := b.store.Events(b.ctx, uuid.New(), run.ID, 0); err != nil || len(events) != 0 {
		t.Errorf("Events of another organization's Run = %v %v, want none", events, err)
	}
}
