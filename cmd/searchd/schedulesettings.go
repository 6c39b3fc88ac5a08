package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/schedule"
)

// Environment variables of the drain of scheduled starts.
const (
	envScheduleTick  = "SEARCHD_SCHEDULE_TICK"
	envScheduleBatch = "SEARCHD_SCHEDULE_BATCH"
	envScheduleLease = "SEARCHD_SCHEDULE_LEASE"
	envScheduleRetry = "SEARCHD_SCHEDULE_RETRY"
	envScheduleMax   = "SEARCHD_SCHEDULE_MAX_PER_ORG"
	envScheduleWidth = "SEARCHD_SCHEDULE_WIDTH"
)

// parseScheduleLease reads the schedule lease, which is twice the
// saved-search lease (read before it) by default.
func parseScheduleLease(r *reader, s setting) string {
	parse := time.ParseDuration
	return setValue(&r.cfg.Schedule.Lease, s, max(2*r.cfg.SavedSearchLease, schedule.MinLease), parse, "a duration (write it like 1s or 1m)", func(d time.Duration) string {
		if d < schedule.MinLease || d > schedule.MaxLease {
			return fmt.Sprintf("%s is out of range: from %s to %s", d, schedule.MinLease, schedule.MaxLease)
		}
		return ""
	})
}

// checkScheduleLease checks that a drain that runs holds what it took
// longer than the saved-search lease.
func checkScheduleLease(r *reader) {
	c := r.cfg
	if c.Schedule.Interval > 0 && c.Schedule.Lease <= c.SavedSearchLease {
		r.bad(r.given[envScheduleLease], "%s must be longer than the saved-search lease, %s (%s): a replica "+
			"that takes over an occurrence must find the start claim of one that died reclaimable",
			c.Schedule.Lease, r.name(envSavedSearchLease), c.SavedSearchLease)
	}
}

// drain returns the run of the drain of scheduled starts: nil when its
// Interval is zero. It starts each occurrence with a saved-search start of
// its own on the stores (no Prefer: wait; the drain never waits on a
// claim), one call per attempt, behind the queue as every request is: each
// start takes a seat in its organization's flow, so a burst of due
// occurrences waits its turn beside the API's requests rather than ahead
// of them. A refusal of the queue (every seat taken for longer than its
// longest wait) is a transient failure, not ready, tried again later. A
// Run it admits wakes this process's dispatcher, as a start through the
// API does (so make the dispatcher first).
func (s server) drain() (func(context.Context), error) {
	st, cfg := s.st, s.cfg
	dcfg := cfg.Schedule
	if dcfg.Interval <= 0 {
		return nil, nil
	}
	starter, err := admission.NewStarter(admission.Deps{
		Pool: st.pool, Plane: st.plane, SavedSearches: st.savedSearches, Snapshots: st.snapshots, Runs: st.runs,
	}, admission.Config{Lease: cfg.SavedSearchLease, Admitted: st.wakeDispatcher})
	if err != nil {
		return nil, err
	}
	dcfg.Clock, dcfg.Logger, dcfg.Observer = st.clock, s.logger, s.obs.metrics
	d, err := schedule.NewDrain(schedule.DrainDeps{Pool: st.pool, Start: seated(s.queue, starter.StartSavedSearch), Runs: st.runs}, dcfg)
	if err != nil {
		return nil, err
	}
	return d.Run, nil
}

// seated returns start behind queue: each call holds a seat of its
// organization's flow while it runs. A refusal of the queue is
// errs.Unavailable wrapping schedule.ErrBusy (the drain records the
// occurrence not ready, busy, and tries it again at its next tick).
func seated(queue *seatq.Queue, start schedule.StartFunc) schedule.StartFunc {
	return func(ctx context.Context, p admission.SavedSearchStart) (admission.Result, error) {
		seat, err := queue.Acquire(ctx, seatq.Flow{Kind: seatq.KindOrganization, Name: p.Org.String()}, 1)
		var refusal *seatq.Refusal
		switch {
		case errors.As(err, &refusal):
			return admission.Result{}, errs.Wrap(errs.Unavailable, fmt.Errorf("%w: %w", schedule.ErrBusy, err))
		case err != nil:
			return admission.Result{}, err
		}
		defer seat.Release()
		return start(ctx, p)
	}
}
