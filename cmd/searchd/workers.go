package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/schedule"
	"github.com/searchd/searchd/webhooks"
)

// The background workers of serve and dev besides the sweeper (sweep.go).

// dispatchRemedy is what the warnings of dispatch off ask for.
const dispatchRemedy = "set " + envRuntimeURL + " and " + envRuntimeSecret + " on this replica to deliver them (docs/runtime.md)"

// dispatcher returns the run of the backlog's watcher and, when a runtime
// is configured, of the dispatcher of the outbox; it returns when both
// have (the dispatcher once its deliveries in flight, each bounded by its
// lease, have). Without a runtime, dispatch is off: admitted Runs stay
// queued, their dispatches pending until a replica with a runtime delivers
// them. That is said with a WARN at start, and the watcher says it again
// (count, oldest age, the settings to set) every few minutes while Runs
// are pending, and reports it in the metrics and the console.
func (s server) dispatcher() (func(context.Context), error) {
	st := s.st
	st.wakeDispatcher = func() {}
	on := s.cfg.Dispatch.URL != ""
	w, err := dispatch.NewWatcher(st.dispatches, dispatch.WatchConfig{Dispatching: on,
		Interval: s.watch.Interval, WarnEvery: s.watch.WarnEvery, Remedy: dispatchRemedy,
		Logger: s.logger, Observer: s.obs.metrics})
	if err != nil {
		return nil, err
	}
	st.backlog = w
	if !on {
		s.logger.Warn("dispatch is off: " + envRuntimeURL + " is not set, so admitted Runs stay queued with their dispatch pending " +
			"until a replica with a runtime delivers them; " + dispatchRemedy)
		return func(ctx context.Context) { _ = w.Run(ctx) }, nil
	}
	dcfg := s.cfg.Dispatch
	dcfg.Logger, dcfg.Observer, dcfg.UserAgent = s.logger, s.obs.metrics, "searchd/"+buildInfo().Version
	d, err := dispatch.NewDispatcher(st.dispatches, dcfg)
	if err != nil {
		return nil, err
	}
	st.wakeDispatcher = d.Wake
	s.logger.Info("dispatching admitted Runs to the runtime", slog.Duration("timeout", dcfg.Timeout),
		slog.Duration("lease", d.Lease()), slog.Int("concurrency", dcfg.Concurrency))
	return func(ctx context.Context) {
		var wg sync.WaitGroup
		wg.Go(func() { _ = w.Run(ctx) })
		_ = d.Run(ctx)
		wg.Wait()
	}, nil
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

// webhookWorker returns the run of the worker that delivers Run events to
// every organization's endpoints: every serve runs one, and they share
// the deliveries. It returns once the deliveries in flight (each bounded
// by its lease) have ended.
func (s server) webhookWorker() (func(context.Context), error) {
	cfg := s.cfg.Webhooks.Worker
	cfg.Logger, cfg.UserAgent = s.logger, "searchd/"+buildInfo().Version
	w, err := webhooks.NewWorker(s.st.webhooks, cfg)
	if err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	s.logger.Info("delivering Run events to webhook endpoints", slog.Duration("timeout", cfg.Timeout),
		slog.Duration("disable_after", cfg.DisableAfter), slog.Int("concurrency", cfg.Concurrency))
	return func(ctx context.Context) { _ = w.Run(ctx) }, nil
}
