package goclient_test

import (
	"errors"
	"testing"
	"time"

	"github.com/searchd/searchd/client"
)

// testSchedules sets a schedule through the client on a real searchd,
// whose drain starts its first occurrence on its own: the occurrence is
// listed started, its Run and snapshot say the scheduler started it for
// the actor who set the schedule. Then pause (conditional on the version),
// resume and remove round-trip.
func testSchedules(t *testing.T, bin string) {
	s := startSearchd(t, bin)
	ss := createSavedSearch(t, s)
	c, _ := newClient(t, s.url(), s.token, client.RetryPolicy{})
	ctx := withinAMinute(t)

	if _, err := c.GetSchedule(ctx, ss.ID); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("GetSchedule with none = %v, want ErrNotFound", err)
	}
	every := int64(3600)
	sc, err := c.SetSchedule(ctx, ss.ID, client.SetScheduleParams{IntervalSeconds: &every, TimeZone: "Europe/Paris"})
	if err != nil || sc.Version != 1 || sc.NextDueAt == nil {
		t.Fatalf("SetSchedule = %+v, %v", sc, err)
	}
	var started *client.Occurrence
	for started == nil && ctx.Err() == nil {
		for o, err := range c.Occurrences(ctx, ss.ID, client.ListParams{}) {
			if err != nil {
				t.Fatal(err)
			}
			if o.Status == "started" {
				started = &o
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if started == nil || started.RunID == nil || !started.DueAt.Equal(*sc.NextDueAt) {
		t.Fatalf("the drain did not start the first occurrence, due %v: %+v", sc.NextDueAt, started)
	}
	run, err := c.GetRun(ctx, *started.RunID)
	if err != nil || run.CreatedBy == nil || *run.CreatedBy != "client-test" || run.SnapshotID == nil {
		t.Fatalf("the occurrence's Run = %+v, %v; want one by the schedule's actor", run, err)
	}
	snap, err := c.GetSnapshot(ctx, *run.SnapshotID)
	if err != nil || snap.Origin != "schedule" {
		t.Errorf("its snapshot = %+v, %v; want origin schedule", snap, err)
	}

	if _, err := c.PauseSchedule(ctx, ss.ID, 9); !errors.Is(err, client.ErrPreconditionFailed) {
		t.Errorf("PauseSchedule of version 9 = %v, want ErrPreconditionFailed", err)
	}
	if sc, err = c.PauseSchedule(ctx, ss.ID, 1); err != nil || !sc.Paused || sc.Version != 2 {
		t.Fatalf("PauseSchedule = %+v, %v", sc, err)
	}
	if sc, err = c.ResumeSchedule(ctx, ss.ID, 0); err != nil || sc.Paused || sc.NextDueAt == nil {
		t.Fatalf("ResumeSchedule = %+v, %v", sc, err)
	}
	if err := c.RemoveSchedule(ctx, ss.ID, sc.Version); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSchedule(ctx, ss.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("GetSchedule after the remove = %v, want ErrNotFound", err)
	}
	page, err := c.ListOccurrences(ctx, ss.ID, client.ListParams{Limit: 1})
	if err != nil || len(page.Items) != 1 || page.Items[0].ID != started.ID {
		t.Errorf("ListOccurrences after the remove = %+v, %v; want the occurrence kept", page, err)
	}
}
