package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/internal/fairq"
	"github.com/searchd/searchd/schedule"
)

// Environment variables of the drain of scheduled starts.
const (
	// EnvScheduleTick is the time between two ticks of the drain.
	EnvScheduleTick = "SEARCHD_SCHEDULE_TICK"
	// EnvScheduleBatch is the most occurrences one tick takes.
	EnvScheduleBatch = "SEARCHD_SCHEDULE_BATCH"
	// EnvScheduleLease is how long a tick holds what it took.
	EnvScheduleLease = "SEARCHD_SCHEDULE_LEASE"
	// EnvScheduleRetry is when a not-ready occurrence is tried again.
	EnvScheduleRetry = "SEARCHD_SCHEDULE_RETRY"
)

// Defaults and limits of those settings.
const (
	DefaultScheduleTick  = time.Second
	DefaultScheduleBatch = 10
	// DefaultScheduleLease is the lease when the saved-search lease is
	// the seed's 30 s: the default is twice the saved-search lease.
	DefaultScheduleLease = time.Minute
	DefaultScheduleRetry = time.Hour
	maxScheduleTick      = time.Hour
)

// scheduleOptions are the settings above, for --help.
func scheduleOptions() []option {
	return []option{
		{"schedule-tick", EnvScheduleTick, DefaultScheduleTick.String(),
			"time between two ticks of the drain that starts the saved searches whose schedule came due (plus up to a " +
				"tenth); 0s runs none in this process, up to " + maxScheduleTick.String()},
		{"schedule-batch", EnvScheduleBatch, strconv.Itoa(DefaultScheduleBatch),
			fmt.Sprintf("most occurrences one tick of the drain takes to start (and schedules it plans), 1 to %d", schedule.MaxBatch)},
		{"schedule-lease", EnvScheduleLease, "twice the saved-search lease (" + DefaultScheduleLease.String() + ")",
			"how long a tick holds the occurrences it took before another replica takes them over; it bounds the tick's " +
				"starts, and must be longer than the saved-search lease, so that whoever takes over finds a dead " +
				"replica's claim reclaimable; " + schedule.MinLease.String() + " to " + schedule.MaxLease.String()},
		{"schedule-retry", EnvScheduleRetry, DefaultScheduleRetry.String(),
			"when an occurrence whose start failed for a transient reason (not_ready) is tried again, " +
				schedule.MinRetryAfter.String() + " to " + schedule.MaxRetryAfter.String() + "; for tests and tuning (the seed's value is an hour)"},
	}
}

// readScheduleSettings reads the settings above into a drain config and
// returns what is wrong with them, one message per setting. An Interval
// of zero runs no drain. savedSearchLease is the lease the schedule lease
// must exceed.
func readScheduleSettings(fs *flag.FlagSet, getenv func(string) string, savedSearchLease time.Duration) (schedule.DrainConfig, []string) {
	var problems []string
	duration := func(fl, env string, def, lo, hi time.Duration) (time.Duration, setting) {
		s := lookup(fs, fl, env, getenv)
		if s.value == "" {
			return def, s
		}
		d, err := time.ParseDuration(s.value)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %q is not a duration (write it like 1s or 1m)", s.name, s.value))
		case d < lo || d > hi:
			problems = append(problems, fmt.Sprintf("%s: %s is out of range: from %s to %s", s.name, d, lo, hi))
		default:
			return d, s
		}
		return def, s
	}
	var c schedule.DrainConfig
	c.Interval, _ = duration("schedule-tick", EnvScheduleTick, DefaultScheduleTick, 0, maxScheduleTick)
	var lease setting
	c.Lease, lease = duration("schedule-lease", EnvScheduleLease, max(2*savedSearchLease, schedule.MinLease),
		schedule.MinLease, schedule.MaxLease)
	c.RetryAfter, _ = duration("schedule-retry", EnvScheduleRetry, DefaultScheduleRetry, schedule.MinRetryAfter, schedule.MaxRetryAfter)
	c.Batch = DefaultScheduleBatch
	if s := lookup(fs, "schedule-batch", EnvScheduleBatch, getenv); s.value != "" {
		n, err := strconv.Atoi(s.value)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %q is not a whole number", s.name, s.value))
		case n < 1 || n > schedule.MaxBatch:
			problems = append(problems, fmt.Sprintf("%s: %d is out of range: from 1 to %d", s.name, n, schedule.MaxBatch))
		default:
			c.Batch = n
		}
	}
	if c.Interval > 0 && c.Lease <= savedSearchLease {
		problems = append(problems, fmt.Sprintf("%s: %s must be longer than the saved-search lease, %s (%s): a replica "+
			"that takes over an occurrence must find the start claim of one that died reclaimable",
			lease.name, c.Lease, EnvSavedSearchLease, savedSearchLease))
	}
	return c, problems
}

// startDrain starts the drain of scheduled starts, and returns the
// function that stops it and waits for it. It starts each occurrence with
// a saved-search start of its own on st's stores (no Prefer: wait; the
// drain never waits on a claim), one call per attempt, behind queue as
// every request is: each start takes a seat in its organization's flow,
// so a burst of due occurrences waits its turn beside the API's requests
// rather than ahead of them. A refusal of the queue (every seat taken for
// longer than its longest wait) is a transient failure, not ready, tried
// again later. A Run it admits wakes this process's dispatcher, as a
// start through the API does (so start the dispatcher first). An Interval
// of zero runs none.
func startDrain(ctx context.Context, st *stores, cfg serverConfig, logger *slog.Logger, obs observability, queue *fairq.Queue) (func(), error) {
	dcfg := cfg.Schedule
	if dcfg.Interval <= 0 {
		return func() {}, nil
	}
	starter, err := admission.NewStarter(admission.Deps{
		Pool: st.pool, Plane: st.plane, SavedSearches: st.savedSearches, Snapshots: st.snapshots, Runs: st.runs,
	}, admission.Config{Lease: cfg.SavedSearchLease, Admitted: st.wakeDispatcher})
	if err != nil {
		return nil, err
	}
	dcfg.Clock, dcfg.Logger = st.clock, logger
	if obs.metrics != nil {
		dcfg.Observer = obs.metrics
	}
	d, err := schedule.NewDrain(schedule.DrainDeps{Pool: st.pool, Start: seated(queue, starter.StartSavedSearch), Runs: st.runs}, dcfg)
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(dctx)
	}()
	return func() {
		cancel()
		<-done
	}, nil
}

// seated returns start behind queue: each call holds a seat of its
// organization's flow while it runs. A refusal of the queue is
// errs.Unavailable (the drain records the occurrence not ready).
func seated(queue *fairq.Queue, start schedule.StartFunc) schedule.StartFunc {
	return func(ctx context.Context, p admission.SavedSearchStart) (admission.Result, error) {
		seat, err := queue.Acquire(ctx, fairq.Flow{Kind: fairq.KindOrganization, Name: p.Org.String()}, 1)
		var refusal *fairq.Refusal
		switch {
		case errors.As(err, &refusal):
			return admission.Result{}, errs.Wrap(errs.Unavailable, fmt.Errorf("admission queue: %w", err))
		case err != nil:
			return admission.Result{}, err
		}
		defer seat.Release()
		return start(ctx, p)
	}
}
