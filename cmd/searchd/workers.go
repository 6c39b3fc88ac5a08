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
// is configured, of the outbox's dispatcher; it returns once both have
// (deliveries in flight are bounded by their lease). Without a runtime,
// admitted Runs stay queued: serve warns at start, and the watcher again
// every few minutes while Runs are pending, in metrics and the console.
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

// drain returns the run of the drain of scheduled starts, nil when its
// Interval is zero. Each occurrence is a saved-search start that never
// waits on a claim and takes a seat of its organization, so a burst of due
// occurrences waits beside the API's requests, not ahead of them; a
// refusal of the queue is not ready, tried again later.
func (s server) drain() (func(context.Context), error) {
	st, dcfg := s.st, s.cfg.Schedule
	if dcfg.Interval <= 0 {
		return nil, nil
	}
	starter, err := s.starter(nil)
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
		switch {
		case errors.As(err, new(*seatq.Refusal)):
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
