package main

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/dbclock"
	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/keyset"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/schedule"
	"github.com/searchd/searchd/servicekeys"
	"github.com/searchd/searchd/snapshot"
	"github.com/searchd/searchd/sweeper"
	"github.com/searchd/searchd/webhooks"
)

// stores are the stores and services of serve and dev, each constructed
// once on the pool and handed to everything that uses it: the API, the
// console, the applier, the sweeper's run log and dev's demo data. They all
// run at one database clock.
type stores struct {
	pool          *pgxpool.Pool
	clock         *dbclock.Clock
	plane         *idempotency.Service
	savedSearches *savedsearch.Store
	snapshots     *snapshot.Store
	runs          *runs.Store
	// dispatches is the outbox of Run dispatches: the dispatcher's, and
	// the reads of the API and the console.
	dispatches *dispatch.Store
	// wakeDispatcher wakes this process's dispatcher after an admission;
	// set by server.dispatcher (a no-op when dispatch is off).
	wakeDispatcher func()
	// backlog is the outbox's backlog as last read, and whether this
	// process dispatches; set by server.dispatcher, read by the console.
	backlog *dispatch.Watcher
	// providerJobs is the callback handler's and the applier's; it sends
	// to wake when a copy meets an arrival whose worker is gone.
	providerJobs *providerjobs.Service
	wake         chan struct{}
	sweeperRuns  *sweeper.RunLog
	schedules    *schedule.Store
	// cursors is the key every store that lists signs its cursors with.
	cursors keyset.Key
	// serviceKeys verifies service keys (one cache per process) and
	// serves their management.
	serviceKeys *servicekeys.Service
	// webhooks are the organizations' webhook endpoints and their
	// deliveries: the API's, the console's and the worker's.
	webhooks *webhooks.Store
}

// newStores constructs the stores of serve and dev on pool, at clock. The
// plane and the provider jobs report to obs's metrics (never nil). Every
// store that lists signs and verifies its cursors with cursors, the
// database's key ([app.openStores]).
func newStores(pool *pgxpool.Pool, clock *dbclock.Clock, cursors keyset.Key, cfg serverConfig, logger *slog.Logger,
	obs observability) *stores {
	st := &stores{
		pool:          pool,
		clock:         clock,
		plane:         idempotency.NewService(pool, idempotency.Config{Clock: clock, Observer: obs.metrics}),
		savedSearches: savedsearch.NewStore(pool).Cursors(cursors),
		snapshots:     snapshot.NewStore(pool).Cursors(cursors),
		runs:          runs.NewStore(pool, runs.Config{Clock: clock}).Cursors(cursors),
		dispatches:    dispatch.NewStore(pool, clock),
		wake:          make(chan struct{}, 1),
		sweeperRuns:   sweeper.NewRunLog(pool, sweeper.ViaServe, clock, recordFailed(logger)).Cursors(cursors),
		schedules:     schedule.NewStore(pool, clock).Limit(cfg.ScheduleMax).Cursors(cursors),
		cursors:       cursors,
		serviceKeys:   servicekeys.NewService(pool, clock),
		webhooks: webhooks.NewStore(pool, webhooks.Config{Clock: clock,
			AllowHTTPLoopback: cfg.Webhooks.AllowHTTPLoopback}),
	}
	wake := func() {
		select {
		case st.wake <- struct{}{}:
		default:
		}
	}
	st.providerJobs = providerjobs.New(pool, st.plane,
		providerjobs.Config{Lease: cfg.Inbox.Lease, Logger: logger, Wake: wake, Observer: obs.metrics})
	return st
}
