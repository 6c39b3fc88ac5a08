package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/signal"
	"syscall"
	"time"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/console"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/fairq"
	"github.com/searchd/searchd/internal/readiness"
	"github.com/searchd/searchd/internal/telemetry"
	"github.com/searchd/searchd/migrations"
)

// startupTimeout bounds the database checks before serving.
const startupTimeout = 30 * time.Second

// HTTP server timeouts: generous for a JSON API with 4 MiB bodies, finite
// so a slow or idle client cannot hold a connection for ever.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = time.Minute
	writeTimeout      = time.Minute
	idleTimeout       = 2 * time.Minute
)

func (a *app) serve(ctx context.Context, args []string) error {
	cfg, err := a.loadCommand("serve", serveCommand, args)
	if err != nil {
		return err
	}
	logger := newLogger(a.stderr, cfg)
	warnRemovedSettings(logger, a.getenv)
	obs, err := newObservability(ctx, a.getenv)
	if err != nil {
		return err
	}
	defer obs.shutdown(logger) // after the pool: the last spans are flushed
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if err := checkSchema(ctx, cfg.DatabaseURL); err != nil {
		return err
	}
	pool, err := obs.openPool(ctx, cfg)
	if err != nil {
		return fmt.Errorf("opening the database pool: %w", err)
	}
	defer pool.Close() // last: after the hub has stopped and every request ended
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("%s=%s: cannot listen: %w", EnvAddr, cfg.Addr, err)
	}
	return a.runServer(ctx, cfg, ln, newStores(pool, a.dbClock, cfg, logger, obs), logger, obs)
}

// checkSchema refuses a database whose schema is not at the newest
// migration: serving an older schema would fail requests one by one.
func checkSchema(ctx context.Context, databaseURL string) error {
	ctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	err := migrations.Check(ctx, databaseURL)
	switch {
	case errors.Is(err, migrations.ErrNotCurrent):
		return fmt.Errorf("refusing to start: %w", err)
	case err != nil:
		return fmt.Errorf("cannot check the database named by %s: %w", EnvDatabaseURL, err)
	}
	return nil
}

// runServer serves the API on ln until ctx ends, then drains: requests in
// flight get cfg.ShutdownGrace to finish, new connections are refused, and
// what still runs is cancelled (see serveHTTP). The claim listener of
// Prefer: wait runs for as long as the server does; the sweeper, the
// inbox's applier, the dispatcher and the drain of scheduled starts until
// ctx ends. All have returned when runServer does, so the caller may close
// the pool. Everything runs on st, the stores constructed once on the pool,
// and reports to obs's metrics (newObservability's, never nil).
func (a *app) runServer(ctx context.Context, cfg serverConfig, ln net.Listener, st *stores, logger *slog.Logger, obs observability) error {
	defer ln.Close() // on an error before serving; serving closes it already
	pool := st.pool
	// One admission queue for every door: the API's requests, the
	// console's pages, the callbacks and the drain's scheduled starts
	// share its seats.
	queue, err := newAdmission(cfg.Admission, pool, obs.metrics)
	if err != nil {
		return err
	}
	hub, stopHub := startHub(ctx, pool, cfg, logger)
	defer stopHub()
	stopSweeper, err := startSweeper(ctx, st, cfg, logger, obs.metrics)
	if err != nil {
		return err
	}
	defer stopSweeper()
	stopApplier := startApplier(ctx, st, cfg, logger)
	defer stopApplier()
	stopDispatcher, err := startDispatcher(ctx, st, cfg, logger, obs)
	if err != nil {
		return err
	}
	defer stopDispatcher()
	stopDrain, err := startDrain(ctx, st, cfg, logger, obs, queue)
	if err != nil {
		return err
	}
	defer stopDrain()
	// Readiness is checked in the background on a connection of its own,
	// so probes cost the request pool nothing (see readiness.Checker).
	ready := readiness.NewChecker(pool.Config().ConnConfig, readiness.DefaultInterval)
	ready.Check(ctx) // ready from the first probe
	defer background(context.WithoutCancel(ctx), ready.Run)()
	verifier, err := newVerifier(ctx, cfg)
	if err != nil {
		return err
	}
	srv, err := newAPI(st, cfg, verifier, logger, hub, obs, ready, queue)
	if err != nil {
		return err
	}
	con, err := newConsole(st, cfg, verifier, logger, queue)
	if err != nil {
		return err
	}
	logger.Info("serving", slog.String("addr", ln.Addr().String()), slog.String("console", console.Prefix))
	if a.ready != nil {
		a.ready(ln.Addr().String())
	}
	return serveHTTP(ctx, ln, con.Mount(srv.Handler()), cfg.ShutdownGrace, logger)
}

// newAPI wires the domain services of st into the API. Starts wait on
// Prefer: wait when hub is set, and not at all when it is nil. The plane
// and the provider jobs report to the metrics the API serves. /readyz
// answers from ready when it is set, else checks on pool per probe. Every
// request takes a seat in admission first (see newAdmission).
func newAPI(st *stores, cfg serverConfig, verifier api.Verifier, logger *slog.Logger, hub *idempotency.Hub, obs observability, ready *readiness.Checker, queue *fairq.Queue) (*api.Server, error) {
	pool := st.pool
	if obs.metrics == nil {
		obs.metrics = telemetry.NewMetrics()
		_ = obs.metrics.WatchPool(pool) // a fresh registry: it cannot collide
	}
	b := buildInfo()
	// Registered once per registry: a second server on the same metrics
	// (tests) keeps the first's, which says the same.
	_ = obs.metrics.SetBuildInfo(b.Version, b.Commit, b.GoVersion)
	starter, err := admission.NewStarter(admission.Deps{
		Pool:          pool,
		Plane:         st.plane,
		SavedSearches: st.savedSearches,
		Snapshots:     st.snapshots,
		Runs:          st.runs,
	}, admission.Config{Hub: hub, Lease: cfg.SavedSearchLease, Admitted: st.wakeDispatcher})
	if err != nil {
		return nil, err
	}
	maxWait := cfg.MaxPreferWait
	if hub == nil {
		maxWait = 0
	}
	readyFunc := readiness.Pool(pool)
	if ready != nil {
		readyFunc = ready.Ready
	}
	return api.New(api.Deps{
		Ready:                readyFunc,
		Admission:            queue,
		SavedSearches:        st.savedSearches,
		Snapshots:            st.snapshots,
		Runs:                 st.runs,
		Starter:              starter,
		ProviderJobs:         st.providerJobs,
		Dispatches:           st.dispatches,
		Schedules:            st.schedules,
		ProviderSecrets:      cfg.ProviderSecrets,
		Verifier:             verifier,
		Logger:               logger,
		MaxBodyBytes:         cfg.MaxBodyBytes,
		CallbackMaxBodyBytes: cfg.CallbackMaxBodyBytes,
		CallbackBodyBudget:   cfg.CallbackBodyBudget,
		CallbackBodyTimeout:  cfg.CallbackBodyTimeout,
		MaxPreferWait:        maxWait,
		Metrics:              obs.metrics,
		TracerProvider:       obs.tracerProvider(),
		Plane:                st.plane,
		CORSOrigins:          cfg.CORSOrigins,
	})
}

// newLogger returns the logger of cfg's level and format. A line logged
// with a request's context names the request (and its trace, when traced).
func newLogger(w io.Writer, cfg serverConfig) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	var h slog.Handler = slog.NewJSONHandler(w, opts)
	if cfg.LogFormat == "text" {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(telemetry.NewLogHandler(h))
}
