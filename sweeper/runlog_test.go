package sweeper

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/google/uuid"

	"github.com/searchd/searchd/internal/testkit/pgtest"
)

func TestARecordedRunIsListedWithItsCounts(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	ctx := context.Background()
	var recordErr error
	log := NewRunLog(pool, ViaSweep, nil, func(err error) { recordErr = err })
	s, err := New(pool, Config{Logger: slog.New(slog.DiscardHandler), Recorder: log, Bound: 7})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := s.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if recordErr != nil {
		t.Fatalf("recording failed: %v", recordErr)
	}
	var all []RunEntry
	cursor := ""
	for {
		page, next, err := log.List(ctx, false, 2, cursor)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > 2 {
			t.Fatalf("List(limit 2) gave a page of %d runs", len(page))
		}
		all = append(all, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(all) != 3 {
		t.Fatalf("listed %d runs, want 3", len(all))
	}
	seen := map[uuid.UUID]bool{}
	for i, e := range all {
		if seen[e.ID] {
			t.Errorf("run %s listed twice", e.ID)
		}
		seen[e.ID] = true
		if i > 0 && e.FinishedAt.After(all[i-1].FinishedAt) {
			t.Errorf("run %d finished at %s, after run %d at %s: want newest first", i, e.FinishedAt, i-1, all[i-1].FinishedAt)
		}
	}
	e := all[0]
	if e.Via != ViaSweep || e.Bound != 7 || len(e.Tables) != len(Report{}.Tables()) || e.Tables[0].Table != TableClaims || e.Tables[0].Passes != 1 || e.Backlog {
		t.Errorf("recorded run = %+v, want a sweep of every table with bound 7 and no backlog", e)
	}
	if backlog, _, err := log.List(ctx, true, 10, ""); err != nil || len(backlog) != 0 {
		t.Errorf("List(backlog only) = %d, %v; want none", len(backlog), err)
	}
	if _, _, err := log.List(ctx, false, 10, "nope"); !errors.Is(err, ErrInvalidCursor) {
		t.Errorf("List with a bad cursor = %v, want ErrInvalidCursor", err)
	}
}

// TestARecordedRunKeepsItsError checks that a failed run's error text is
// recorded and listed, and a successful run's is empty.
func TestARecordedRunKeepsItsError(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	ctx := context.Background()
	var recordErr error
	log := NewRunLog(pool, ViaServe, nil, func(err error) { recordErr = err })
	log.RecordRun(ctx, RunRecord{Bound: 1})
	log.RecordRun(ctx, RunRecord{Bound: 2, Err: errors.New("sweeper: agent.runs pass 1: boom")})
	if recordErr != nil {
		t.Fatalf("recording failed: %v", recordErr)
	}
	all, _, err := log.List(ctx, false, 10, "")
	if err != nil || len(all) != 2 {
		t.Fatalf("List = %d runs, %v; want 2", len(all), err)
	}
	for _, e := range all {
		want := map[int]string{1: "", 2: "sweeper: agent.runs pass 1: boom"}[e.Bound]
		if e.Error != want {
			t.Errorf("run of bound %d lists error %q, want %q", e.Bound, e.Error, want)
		}
	}
}
